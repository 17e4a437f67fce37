"""``triehh demo``: ``triehh discover`` on the bundled population, compared with the truth.

The bundled population (200,000 users, one English word each, drawn from wordfreq's English
frequencies; ``evaluation.demo``) is discovered with the discover flags (input and columns
fixed, a privacy target by default), then the true top words are printed beside what was found.
Exit codes as ``triehh discover``.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import List

from triehh_beam.cli.discover import say, add_discover_arguments, run

__all__ = ["register_demo"]


def register_demo(subparsers) -> None:
    """Adds ``demo`` to the ``triehh`` tool (Beam flags allowed)."""
    parser = subparsers.add_parser(
        "demo",
        help="run discover on the bundled population of 200,000 users (one English word each)",
        description="Runs `triehh discover` on the bundled real-word population (words drawn "
        "from wordfreq's English frequencies), then compares what it found with the truth.",
    )
    add_discover_arguments(parser, demo=True)
    parser.set_defaults(handler=_run_demo, accepts_beam_args=True)


def _run_demo(args: argparse.Namespace, beam_args: List[str]) -> int:
    from triehh_beam.evaluation import demo

    path = demo.demo_population_path()
    say(f"demo population: {path}")
    code = run(args, beam_args, input_pattern=path)
    if code != 0:
        return code
    with open(os.path.join(args.output, "heavy_hitters.json"), encoding="utf-8") as f:
        found = set(json.load(f)["heavy_hitters"])
    truth = demo.truth(path)
    n = sum(1 for _ in truth)
    say("")
    say("the truth (known here because the demo population is synthetic):")
    say(f"  {'rank':>4}  {'word':<10} {'users':>7}  found")
    for rank, (word, users) in enumerate(truth[:25], start=1):
        say(f"  {rank:>4}  {word:<10} {users:>7,}  {'yes' if word in found else '-'}")
    hits = sum(1 for word, _ in truth[:10] if word in found)
    say(f"  recall of the true top 10: {hits}/10 ({n:,} distinct words in the population)")
    return 0
