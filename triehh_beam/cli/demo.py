"""``triehh demo``: ``triehh discover`` on the bundled population (200,000 users, one English
word each, drawn from wordfreq's frequencies), then the true top words beside what was found. It
writes where its first line says: ``triehh-demo/output`` in the user's cache directory by default
(``output-<8 hex>`` beside it for a second install, or when an earlier release's demo is
there), ``--output`` elsewhere; a finished demo
there is shown again rather than run anew. Exit codes as ``triehh discover``."""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import sys
from typing import List, Optional, Tuple

from triehh_beam.cli.discover import add_discover_arguments, config_from_args, execute, say

__all__ = ["default_output", "register_demo"]


def default_output() -> str:
    """Where the demo writes without ``--output``: ``triehh-demo/output`` in the cache directory."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "triehh-demo", "output")


def _recorded_population(state_dir: str) -> Optional[str]:
    """The input a demo state in ``state_dir`` was run on; None when there is no state, "" when
    there is one this release cannot resume (an earlier release's, or damaged)."""
    from triehh_beam.job.state.state_store import StateError, StateStore

    if not os.path.isdir(state_dir):
        return None
    try:
        state = StateStore(state_dir).load()
    except (StateError, OSError, ValueError):
        return ""
    return None if state is None else state.input.file_pattern


def output_for_install(population: str) -> str:
    """The default output for this install's population file: ``default_output()``, unless a demo
    of another install (another venv: the bundled file at another path, so another job identity)
    or of an earlier release (a state this one cannot resume) holds it; then a sibling named for
    this install's file and state schema, ``output-<8 hex>``, so that the demo runs instead of
    being refused the directory."""
    from triehh_beam.job.settings.paths import canonical_pattern
    from triehh_beam.job.state.state_store import STATE_SCHEMA_VERSION

    base = default_output()
    recorded = _recorded_population(base + ".state")
    if recorded is None or (recorded and canonical_pattern(recorded) == canonical_pattern(population)):
        return base
    key = f"{canonical_pattern(population)}\0schema {STATE_SCHEMA_VERSION}"
    return f"{base}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"


def register_demo(subparsers) -> None:
    """Adds ``demo`` to the ``triehh`` tool (Beam flags allowed)."""
    parser = subparsers.add_parser(
        "demo",
        help="run discover on the bundled population of 200,000 users (one English word each)",
        description="Runs `triehh discover` on the bundled real-word population (words drawn "
        "from wordfreq's English frequencies), then compares what it found with the truth. It "
        "writes under the directory its first line names: by default triehh-demo/ in your cache "
        "directory ($XDG_CACHE_HOME, else ~/.cache); a finished demo there is shown again (remove "
        "the directory, or give another --output, to run anew).",
    )
    add_discover_arguments(parser, demo=True)
    parser.set_defaults(handler=_run_demo, accepts_beam_args=True, resumable=True)


def _earlier_result(config) -> Optional[Tuple[str, str]]:
    """The job id and start time of a finished demo with these settings in the state directory
    (the run will republish it, not discover anew), or None."""
    from triehh_beam.job.state.state_store import StateError, StateStore
    from triehh_beam.protocol.rounds.trie import Trie

    if not os.path.isdir(config.resolved_state_dir):
        return None
    try:
        state = StateStore(config.resolved_state_dir).load()
        if state is None or not state.finished:
            return None
        if config.resume_mismatches(state, Trie.from_proto(state.trie).encoder):
            return None  # the run refuses it, naming the difference
    except (StateError, OSError, ValueError):
        return None  # the run reports what is wrong with it
    return state.job_id, state.created_at


def _when(created_at: str) -> str:
    try:
        moment = datetime.datetime.fromisoformat(created_at)
    except ValueError:
        return created_at
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _where(output_dir: str, state_dir: str, chosen: bool) -> str:
    """The first line: the directory the demo writes under (or the two it writes to)."""
    if "://" not in state_dir:
        state_dir = os.path.abspath(state_dir)
    if state_dir == output_dir + ".state":
        name = os.path.basename(output_dir)
        line = (f"demo: writing under {os.path.dirname(output_dir)}: the results in {name}/, "
                f"the private state in {name}.state/")
    else:
        line = f"demo: writing the results to {output_dir}, the private state to {state_dir}"
    return line if chosen else line + " (--output DIR to choose)"


def _run_demo(args: argparse.Namespace, beam_args: List[str]) -> int:
    from triehh_beam.evaluation import demo

    chosen = args.output is not None
    try:
        path = demo.demo_population_path()
        args = argparse.Namespace(**{**vars(args), "output": os.path.abspath(args.output or output_for_install(path))})
        config = config_from_args(args, input_pattern=path)
    except (ValueError, OSError) as e:
        print(f"triehh: error: {e}", file=sys.stderr)
        return 2
    earlier = _earlier_result(config)
    if args.log_format == "json":
        print(json.dumps({"event": "demo", "output": config.output_dir, "state": config.resolved_state_dir,
                          "population": path, "earlier_job": earlier[0] if earlier else None}), flush=True)
    else:
        say(_where(config.output_dir, config.resolved_state_dir, chosen))
        if earlier:
            say(f"demo: showing an earlier result again (job {earlier[0][:8]}, started "
                f"{_when(earlier[1])}), not a new discovery: to run anew, remove "
                f"{config.output_dir} and {config.resolved_state_dir}, or give another --output")
        say(f"demo population: {path}")
    code = execute(config, beam_args, dry_run=args.dry_run, log_format=args.log_format)
    if code != 0 or args.dry_run:
        return code
    with open(os.path.join(config.output_dir, "heavy_hitters.json"), encoding="utf-8") as f:
        published = json.load(f)["heavy_hitters"]
    # Entries are the items, or with --estimate-frequencies objects holding the item's estimate.
    found = {entry["item"] if isinstance(entry, dict) else entry: entry for entry in published}
    truth = demo.truth(path)
    top = [{"rank": rank, "word": word, "users": users, "found": word in found}
           for rank, (word, users) in enumerate(truth[:25], start=1)]
    for row in top:
        entry = found.get(row["word"])
        if isinstance(entry, dict):
            row.update(estimate=entry["estimate"], interval=entry["interval"])
    estimated = any("estimate" in row for row in top)
    hits = sum(1 for row in top[:10] if row["found"])
    if args.log_format == "json":
        print(json.dumps({"event": "truth", "top": top, "recall_at_10": hits / 10,
                          "distinct_words": len(truth)}), flush=True)
        return 0
    say("")
    say("the truth (known here because the demo population is synthetic):")
    say(f"  {'rank':>4}  {'word':<10} {'users':>7}  found" + ("  estimate  95% interval" if estimated else ""))
    for row in top:
        line = f"  {row['rank']:>4}  {row['word']:<10} {row['users']:>7,}  {'yes' if row['found'] else '-':<5}"
        if "estimate" in row:
            low, high = row["interval"]
            line += f"  {row['estimate']:>8,}  {low:,} to {high:,}"
        say(line.rstrip())
    say(f"  recall of the true top 10: {hits}/10 ({len(truth):,} distinct words in the population)")
    return 0
