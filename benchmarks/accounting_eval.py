"""Issue 25's accounting evaluation: what the real ``triehh discover`` finds on a population at
the issue's two settings, run after run, against the exact counts. Each run is a fresh release
(its own output, state, secret seed and release nonce) of ``python -m triehh_beam.cli discover``
in a child process, on the default in-process runner, with this checkout's code:

* whole items: ``--protocol sample-threshold --epsilon 1 --delta 1e-8 --max-length 10``,
  recall of the true top 100;
* TrieHH++: ``--protocol triehh++ --unit-size 3 --max-length 4 --epsilon 2 --delta 1e-8``,
  recall of the true top 50.

Both allow items of up to 9 characters. Prints a markdown table (protocol, epsilon, delta,
accounting, p_s, tau, recall mean, sd and min over the runs, the recall the releases' (p_s, tau)
predict in closed form, items released, wall seconds per run) and the commands. Flags this script does not know are passed to every ``discover`` as they
are (e.g. ``--accounting exact``). The population defaults to the held-out one
(``triehh_beam.evaluation.heldout``), generated into ``bench-data/`` when missing (needs
wordfreq)::

    python benchmarks/accounting_eval.py --runs 10 [--population FILE] [--json OUT] [discover flags]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import hashlib
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

import pyarrow.parquet as pq  # noqa: E402
from scipy.stats import binom  # noqa: E402

from triehh_beam.evaluation import demo, heldout  # noqa: E402

from triehh_beam.reference import metrics
from triehh_beam.protocol.items.encoding import ItemEncoder, ItemTooLongError  # noqa: E402

DEFAULT_POPULATION = os.path.join("bench-data", "heldout_words.parquet")


@dataclasses.dataclass(frozen=True)
class Setting:
    """One of the issue's settings: the discover flags, the K of its recall and the issue's goal."""

    name: str
    protocol: str
    epsilon: float
    delta: float
    unit_size: int
    max_length: int
    top_k: int
    goal: float

    def flags(self) -> List[str]:
        return ["--protocol", self.protocol, "--epsilon", f"{self.epsilon:g}", "--delta", f"{self.delta:g}",
                "--max-length", str(self.max_length), "--unit-size", str(self.unit_size)]


SETTINGS: Dict[str, Setting] = {
    "sample-threshold": Setting("whole items", "sample-threshold", 1.0, 1e-8, 1, 10, 100, 0.85),
    "triehh++": Setting("TrieHH++, unit size 3", "triehh++", 2.0, 1e-8, 3, 4, 50, 0.90),
}


@dataclasses.dataclass
class Run:
    """One release: its exit code, what it released and how long the child process took."""

    run: int
    exit_code: int
    seconds: float
    heavy_hitters: List[str]
    privacy: dict
    rounds_run: Optional[int]
    recall: Optional[float]
    error: str


def run_seed(seed: int, run: int) -> bytes:
    """The 32-byte secret seed of run ``run``; derived from a public seed, since these releases
    are of a synthetic population and meant to be replayed."""
    return hashlib.blake2b(f"triehh-beam/accounting-eval/{seed}/{run}".encode(), digest_size=32).digest()


def discover_command(setting: Setting, population: str, output: str, seed_file: str, extra: Sequence[str]) -> List[str]:
    """The ``discover`` command line of one run."""
    return ([sys.executable, "-m", "triehh_beam.cli", "discover", "--input", population, "--output", output,
             "--seed-file", seed_file] + setting.flags() + list(extra))


def run_once(setting: Setting, population: str, truth: Dict[str, int], work: str, seed: int, run: int,
             extra: Sequence[str]) -> Run:
    """Runs one release of ``setting`` in a child process and scores it against ``truth``."""
    tag = f"{setting.protocol}-run{run}"
    seed_file = os.path.join(work, f"{tag}.seed")
    with open(seed_file, "wb") as f:
        f.write(run_seed(seed, run))
    output = os.path.join(work, tag)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO_ROOT, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    started = time.monotonic()
    done = subprocess.run(discover_command(setting, population, output, seed_file, extra), cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()] or ["(no message)"]
        return Run(run, done.returncode, seconds, [], {}, None, None, lines[-1])
    with open(os.path.join(output, "heavy_hitters.json"), encoding="utf-8") as f:
        published = json.load(f)
    found = published["heavy_hitters"]
    return Run(run, 0, seconds, found, published.get("privacy", {}), published.get("rounds_run"),
               metrics.recall_at_k(found, truth, setting.top_k), "")


def expected_recall(setting: Setting, truth: Dict[str, int], sample_probability: float, tau: int) -> float:
    """The expected recall@K of a release with this (p_s, tau) when every user holds one item.

    A whole item is released when at least tau of its f holders are sampled: P(Bin(f, p_s) >= tau).
    TrieHH++ finds an item when, in every round r up to its length in units (terminator
    included), at least tau of the F_r users whose item starts with its first r units are sampled
    (each round samples anew, so the rounds are independent): the product of
    P(Bin(F_r, p_s) >= tau). Items too long for L are never found. The top K is the truth's first
    K (exact when the K-th and (K+1)-th items are not tied).
    """
    top = sorted(truth.items(), key=lambda kv: (-kv[1], kv[0]))[: setting.top_k]

    def passes(holders: int) -> float:
        return float(binom.sf(tau - 1, holders, sample_probability))

    if setting.protocol == "sample-threshold":
        return sum(passes(f) for _, f in top) / len(top)
    encoder = ItemEncoder(unit_size=setting.unit_size, max_length=setting.max_length)
    sequences, holders = {}, collections.Counter()  # item -> units; prefix -> users holding it
    for item, users in truth.items():
        try:
            sequence = encoder.encode(item)
        except ItemTooLongError:
            continue
        sequences[item] = sequence
        for r in range(1, len(sequence) + 1):
            holders[sequence[:r]] += users
    found = 0.0
    for item, _ in top:
        if item in sequences:
            sequence = sequences[item]
            found += math.prod(passes(holders[sequence[:r]]) for r in range(1, len(sequence) + 1))
    return found / len(top)


def accounting_of(privacy: dict) -> str:
    """What accounting a release says it used; a release that names none used the paper's bound
    (the only accounting before issue 25)."""
    value = privacy.get("accounting")
    if value is None:
        return "paper's bound (not named)"
    if isinstance(value, dict):
        return str(value.get("method") or value.get("name") or json.dumps(value, sort_keys=True))
    return str(value)


def _distinct(values) -> str:
    shown = sorted({v for v in values if v is not None}, key=str)
    return " / ".join(str(v) for v in shown) if shown else "–"


def summarise(setting: Setting, runs: List[Run], truth: Optional[Dict[str, int]]) -> dict:
    """The table row of a setting's runs (the plan read from the releases, the recall over them);
    with ``truth`` (a population of one item per user), the recall the plan predicts."""
    ok = [r for r in runs if r.exit_code == 0]
    recalls = [r.recall for r in ok]
    plans = {(r.privacy["sample_probability"], r.privacy["tau"]) for r in ok
             if "sample_probability" in r.privacy and "tau" in r.privacy}
    expected = None
    if truth is not None and len(plans) == 1:
        expected = expected_recall(setting, truth, *plans.pop())
    return {
        "setting": setting.name,
        "protocol": setting.protocol,
        "epsilon": setting.epsilon,
        "delta": setting.delta,
        "unit_size": setting.unit_size,
        "max_length": setting.max_length,
        "top_k": setting.top_k,
        "goal": setting.goal,
        "runs": len(runs),
        "refused": len(runs) - len(ok),
        "errors": sorted({r.error for r in runs if r.exit_code != 0}),
        "accounting": _distinct(accounting_of(r.privacy) for r in ok),
        "achieved_epsilon": _distinct(r.privacy.get("epsilon") for r in ok),
        "achieved_delta": _distinct(f"{r.privacy['delta']:.3g}" for r in ok if "delta" in r.privacy),
        "sample_probability": _distinct(f"{100 * r.privacy['sample_probability']:.2f}%" for r in ok
                                        if "sample_probability" in r.privacy),
        "tau": _distinct(r.privacy.get("tau") for r in ok),
        "recall_mean": statistics.fmean(recalls) if recalls else None,
        "recall_sd": statistics.stdev(recalls) if len(recalls) > 1 else None,
        "recall_min": min(recalls) if recalls else None,
        "recalls": recalls,
        "expected_recall": expected,
        "items_released_mean": statistics.fmean(len(r.heavy_hitters) for r in ok) if ok else None,
        "rounds_run": _distinct(r.rounds_run for r in ok),
        "seconds_mean": statistics.fmean(r.seconds for r in runs),
    }


def markdown(rows: List[dict]) -> str:
    """The rows as a markdown table."""
    lines = ["| protocol | ε | δ target (achieved) | accounting | p_s | τ | recall@K: mean [sd] | min | expected | "
             "goal | items released (mean) | rounds | wall s/run | runs |",
             "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        runs = f"{row['runs']}" + (f" ({row['refused']} refused)" if row["refused"] else "")
        if row["recall_mean"] is None:
            lines.append(f"| {row['setting']} (`{row['protocol']}`) | {row['epsilon']:g} | {row['delta']:g} | "
                         f"refused: {'; '.join(row['errors'])} | – | – | – | – | – | ≥ {row['goal']:.2f} | – | – | "
                         f"{row['seconds_mean']:.1f} | {runs} |")
            continue
        sd = "" if row["recall_sd"] is None else f" [{row['recall_sd']:.3f}]"
        expected = "–" if row["expected_recall"] is None else f"{row['expected_recall']:.3f}"
        lines.append(
            f"| {row['setting']} (`{row['protocol']}`) | {row['epsilon']:g} | {row['delta']:g} "
            f"({row['achieved_delta']}) | {row['accounting']} | {row['sample_probability']} | {row['tau']} | "
            f"@{row['top_k']}: **{row['recall_mean']:.3f}**{sd} | {row['recall_min']:.3f} | {expected} | ≥ {row['goal']:.2f} | "
            f"{row['items_released_mean']:.1f} | {row['rounds_run']} | {row['seconds_mean']:.1f} | {runs} |")
    return "\n".join(lines)


def _code_version() -> str:
    try:
        commit = subprocess.run(["git", "-C", REPO_ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO_ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + (" (with uncommitted changes)" if dirty else "")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="Unknown flags are passed to every triehh discover.")
    parser.add_argument("--population", default=DEFAULT_POPULATION,
                        help=f"the records (default: {DEFAULT_POPULATION}, the held-out population, generated if missing)")
    parser.add_argument("--runs", type=int, default=10, help="releases per setting (default: 10)")
    parser.add_argument("--seed", type=int, default=0, help="public seed of the runs' secret seeds (default: 0)")
    parser.add_argument("--protocols", default="sample-threshold,triehh++",
                        help="settings to run, comma-separated (default: both)")
    parser.add_argument("--work", help="keep every run's output and state here (default: a scratch directory)")
    parser.add_argument("--json", help="also write the rows and every run's result to this file")
    args, extra = parser.parse_known_args(argv)
    unknown = [p for p in args.protocols.split(",") if p not in SETTINGS]
    if unknown:
        parser.error(f"--protocols: {', '.join(unknown)} unknown; choose from {', '.join(SETTINGS)}")
    settings = [SETTINGS[p] for p in args.protocols.split(",")]
    if args.runs < 1:
        parser.error("--runs must be >= 1")
    if args.work and os.path.isdir(args.work) and os.listdir(args.work):
        parser.error(f"--work {args.work} is not empty: a run's output there would be resumed, not released anew")

    population = os.path.abspath(args.population)
    if not os.path.exists(population):
        if os.path.abspath(args.population) != os.path.abspath(DEFAULT_POPULATION):
            parser.error(f"{args.population} does not exist")
        print(f"generating the held-out population in {population}", file=sys.stderr)
        try:
            heldout.make_heldout_population(population)
        except ImportError as exc:
            parser.error(str(exc))
    truth = dict(demo.truth(population))
    ids = pq.read_table(population, columns=["user_id"]).column("user_id")
    users = len(ids.unique())
    one_item_each = sum(truth.values()) == users == len(ids)  # else the closed form does not apply
    with open(population, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]

    rows, detail = [], []
    with tempfile.TemporaryDirectory() as scratch:
        work = os.path.abspath(args.work) if args.work else scratch
        os.makedirs(work, exist_ok=True)
        for setting in settings:
            runs = []
            for j in range(args.runs):
                run = run_once(setting, population, truth, work, args.seed, j, extra)
                shown = f"recall@{setting.top_k} {run.recall:.3f}" if run.exit_code == 0 else f"refused: {run.error}"
                print(f"{setting.protocol} run {j}: {shown}, {len(run.heavy_hitters)} items, {run.seconds:.1f} s",
                      file=sys.stderr, flush=True)
                runs.append(run)
            rows.append(summarise(setting, runs, truth if one_item_each else None))
            detail.append([dataclasses.asdict(r) for r in runs])

    print(f"population: {args.population} ({users:,} users, {len(truth):,} distinct items, "
          f"sha256 {digest}); triehh_beam at {_code_version()}; {args.runs} runs per setting, public seed {args.seed}")
    print()
    print(markdown(rows))
    print()
    for setting in settings:
        command = discover_command(setting, args.population, "OUT", "SEED", extra)
        print("    triehh discover " + shlex.join(command[4:]))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"population": args.population, "sha256_16": digest, "code": _code_version(),
                       "extra_flags": list(extra), "rows": rows, "runs": detail}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
