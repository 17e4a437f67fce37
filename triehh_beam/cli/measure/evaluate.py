"""``triehh evaluate``: TrieHH's recall and discovery rates against rivals, on one input. Parses
flags (the input settings shared with ``discover`` come from ``job.settings.config``; ``--max-length``
counts units as in ``discover``) into a frozen ``evaluation.config.EvaluationConfig`` and Beam
``PipelineOptions`` (unknown flags go to Beam), runs ``evaluation.experiment.run_evaluation`` with
a progress bar on stderr, and writes ``evaluation.json``, the PNGs and ``report.html``
(``present.report``); an output directory holding an earlier evaluation is refused unless
``--force``. Example: ``triehh evaluate --input 'records/*.parquet' --epsilon 1,2,4,8 --delta
1e-10 --max-length 10 --runs 10 --top-k 10,20,50 --output eval/``. Exit codes: 0 success; 2 bad
arguments, unusable input or an earlier evaluation in the way (one line on stderr); 1 a failure
while running.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Optional, Sequence

from triehh_beam.cli import argtypes
from triehh_beam.job.settings.config import BY_NAME
from triehh_beam.protocol.protocols import Protocol

__all__ = ["REPORT_FILES", "add_evaluate_arguments", "config_from_args", "main", "register_evaluate", "run"]

# The files that mark an earlier evaluation in an output directory (``report.write_report``).
REPORT_FILES = ("evaluation.json", "report.html")

_epsilons = argtypes.list_of(float, "epsilon", lambda v: v > 0, "> 0")
_positive_ints = argtypes.list_of(int, "value", lambda v: v >= 1, ">= 1")


def _rivals(text: str):
    from triehh_beam.evaluation.config import RIVALS

    if text.strip().lower() in ("", "none"):
        return ()
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    for name in names:
        if name not in RIVALS:
            raise argparse.ArgumentTypeError(f"unknown rival {name!r}; choose from {', '.join(RIVALS)} or none")
    return names


def _protocols(text: str):
    try:
        return tuple(Protocol.parse(part.strip()) for part in (text.split(",") if text.strip() else [""]))
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_evaluate_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``triehh evaluate``."""
    io = parser.add_argument_group("input and output")
    BY_NAME["input_pattern"].add_to(io, required=True)  # files only (discover also takes --query)
    io.add_argument("--output", required=True, metavar="DIR",
                    help="where evaluation.json, the PNGs and report.html are written")
    for name in ("input_format", "user_column", "item_column", "count_column"):
        BY_NAME[name].add_to(io)

    target = parser.add_argument_group("what to evaluate")
    target.add_argument("--epsilon", type=_epsilons, required=True, metavar="E[,E...]",
                        help="epsilon of each configuration (TrieHH and PEM)")
    target.add_argument("--delta", type=argtypes.delta, required=True, metavar="D", help="TrieHH's delta")
    target.add_argument("--max-length", type=argtypes.positive_int, required=True, metavar="L",
                        help="L in units, as for discover (items of up to L-1 units); with several unit "
                             "sizes, units of the smallest, k_min: unit size k runs with "
                             "ceil((L-1)*k_min/k)+1 units, so every unit size sees the same items")
    target.add_argument("--unit-size", type=_positive_ints, default=(1,), metavar="K[,K...]",
                        help="characters per unit, one configuration each (default: 1)")
    target.add_argument("--runs", type=argtypes.positive_int, default=10, metavar="R",
                        help="runs per configuration (default: %(default)s)")
    target.add_argument("--top-k", type=_positive_ints, default=(10,), metavar="K[,K...]",
                        help="the K of recall@K, F1@K, NCR@K, and PEM's k (default: 10)")
    target.add_argument("--engine", choices=("pipeline", "simulate"), default="pipeline",
                        help="'pipeline' (default): every run a real Beam job; 'simulate': the keyed "
                             "simulation, the same draws as the pipeline for the same seed, faster")
    target.add_argument("--protocol", type=_protocols, default=(Protocol.TRIEHH,), metavar="P[,P...]",
                        help="triehh (default) and/or triehh++ (sample-and-threshold at the same epsilon "
                             "and delta, on the same run seeds) and/or sample-threshold (one release of "
                             "whole items with counts); both sample-and-threshold protocols are planned with "
                             "exact accounting, as discover's default")
    target.add_argument("--rivals", type=_rivals, default=("pem", "exact"), metavar="NAMES",
                        help="comma-separated: pem (local DP, same epsilon), exact (non-private "
                             "top-K), pipelinedp (PipelineDP's central partition selection at the same "
                             "epsilon and delta, one item per user; needs pip install "
                             "\"triehh-beam[rivals]\"); 'none' for none (default: pem,exact)")
    for name in ("rule", "case_fold", "truncate_long_items"):  # the same settings as discover's
        BY_NAME[name].add_to(target)
    target.add_argument("--seed", type=argtypes.non_negative_int, default=0,
                        help="public evaluation seed the run seeds derive from (default: %(default)s)")
    target.add_argument("--pem-eta", type=argtypes.positive_int, default=None, metavar="BITS",
                        help="PEM's eta, bits added per group (default: 12 - ceil(log2 of the "
                             "candidates kept))")
    target.add_argument("--pem-candidate-factor", type=argtypes.positive_int, default=2, metavar="F",
                        help="PEM keeps F*K prefixes after each intermediate group (default: %(default)s)")
    target.add_argument("--work-dir", metavar="DIR",
                        help="scratch area of the pipeline engine (default: a local temporary "
                             "directory, removed afterwards); a gs:// path for remote runners")
    target.add_argument("--no-progress", action="store_true", help="no progress bar")
    io.add_argument("--force", action="store_true",
                    help="overwrite an earlier evaluation in the output directory (refused without it)")


def config_from_args(args: argparse.Namespace):
    """The frozen ``EvaluationConfig`` for parsed flags (raises ValueError on bad values)."""
    from triehh_beam.evaluation.config import EvaluationConfig

    return EvaluationConfig(
        input_pattern=args.input,
        epsilons=args.epsilon,
        delta=args.delta,
        max_length=args.max_length,
        unit_sizes=args.unit_size,
        runs=args.runs,
        top_k=args.top_k,
        engine=args.engine,
        rivals=args.rivals,
        input_format=args.format,
        rule=args.rule,
        case_fold=args.case_fold,
        truncate_long_items=args.truncate_long_items,
        user_column=args.user_column,
        item_column=args.item_column,
        count_column=args.count_column or None,
        seed=args.seed,
        pem_eta=args.pem_eta,
        pem_candidate_factor=args.pem_candidate_factor,
        work_dir=args.work_dir,
        protocols=args.protocol,
    )


def _progress(enabled: bool):
    from triehh_beam.evaluation.experiment import Progress

    class _Bar(Progress):
        """tqdm on stderr when installed, else one line per run."""

        def __init__(self):
            self._bar = None
            self._total = 0
            self._done = 0

        def start(self, total: int) -> None:
            self._total = total
            if not enabled:
                return
            try:
                from tqdm import tqdm
            except ImportError:
                return
            self._bar = tqdm(total=total, unit="run", file=sys.stderr, dynamic_ncols=True)

        def advance(self, label: str) -> None:
            self._done += 1
            if not enabled:
                return
            if self._bar is not None:
                self._bar.set_description(label, refresh=False)
                self._bar.update(1)
            else:
                print(f"[{self._done}/{self._total}] {label}", file=sys.stderr, flush=True)

        def note(self, line: str) -> None:
            if self._bar is not None:
                self._bar.write(line, file=sys.stderr)
            else:
                print(line, file=sys.stderr, flush=True)

        def close(self) -> None:
            if self._bar is not None:
                self._bar.close()

    return _Bar()


def _fail(message: str) -> int:
    print(f"triehh evaluate: error: {message}", file=sys.stderr)
    return argtypes.EXIT_USAGE


def _print_summary(result: dict, written: dict, json_path: str) -> None:
    from triehh_beam.present.report import summary_rows

    ks = result["parameters"]["top_k"]
    print(f"recall@K, mean [95% CI] over {result['parameters']['runs']} runs "
          f"({result['parameters']['engine']} engine, {result['data_source']['users']:,} users):")
    rows = summary_rows(result, "recall")
    width = max([len(r[0]) for r in rows] + [6])
    print(f"  {'method':<{width}}  " + "  ".join(f"{'recall@' + str(k):<22}" for k in ks))
    for method, _, cells in rows:
        print(f"  {method:<{width}}  " + "  ".join(f"{c:<22}" for c in cells))
    for skipped in result["infeasible"]:
        print(f"skipped {skipped['protocol']} epsilon={skipped['epsilon']:g} unit size {skipped['unit_size']}: infeasible "
              f"({skipped['reason']})")
    for warning in result["warnings"]:  # e.g. several items per user: Proposition 1 is no bound
        print(f"warning: {warning}")
    print(f"results: {json_path}")
    print(f"report:  {written['report']}")


def run(args: argparse.Namespace, beam_args: Sequence[str]) -> int:
    """Runs an evaluation for parsed flags; returns the exit code."""
    from apache_beam.options.pipeline_options import PipelineOptions

    from triehh_beam.evaluation import experiment as evaluation

    from triehh_beam.io.schema import RecordFormatError
    from triehh_beam.present import report
    from triehh_beam.reference.pipelinedp_rival import RivalUnavailableError

    try:
        config = config_from_args(args)
    except ValueError as e:
        return _fail(str(e))
    earlier = [name for name in REPORT_FILES if os.path.exists(os.path.join(args.output, name))]
    if earlier and not args.force:  # before any run: an hour's evaluation must not vanish silently
        return _fail(f"{args.output} already holds an evaluation ({', '.join(earlier)}): give --force "
                     "to overwrite it, or another --output")
    if beam_args and config.engine != "pipeline":
        return _fail(f"unrecognized arguments: {' '.join(beam_args)} (Beam options need --engine pipeline)")
    from triehh_beam.beam import runners

    unknown = runners.unknown_pipeline_args(beam_args)
    if unknown:  # Beam would drop them with a warning
        return _fail(runners.describe_unknown(unknown))
    progress = _progress(not args.no_progress)
    try:
        result = evaluation.run_evaluation(config, PipelineOptions(list(beam_args)), progress)
    except (FileNotFoundError, RecordFormatError, RivalUnavailableError, ValueError) as e:
        return _fail(str(e))
    finally:
        progress.close()
    os.makedirs(args.output, exist_ok=True)
    json_path = evaluation.write_evaluation_json(result, os.path.join(args.output, "evaluation.json"))
    written = report.write_report(result, args.output)
    _print_summary(result, written, json_path)
    return 0


def register_evaluate(subparsers) -> None:
    """Adds ``evaluate`` to the ``triehh`` tool (handler(args, beam_args), Beam flags allowed)."""
    parser = subparsers.add_parser(
        "evaluate",
        help="measure recall and discovery rates of TrieHH against PEM, the exact top-K and PipelineDP",
        description="Runs TrieHH R times per epsilon and unit size on an input (through the real "
        "pipeline, or the keyed simulation with --engine simulate), PEM and the exact top-K (and "
        "PipelineDP's partition selection with --rivals pipelinedp) on the same input, and writes "
        "evaluation.json, plots and report.html. Its runs are measurements, not private releases: "
        "a public seed, a fixed nonce and no ledger charge, on any input (BigQuery too), and the "
        "exact top-K it compares with is the raw data's; run it on synthetic or public data, never "
        "publish what it says about private data. Flags this command does not know are Beam "
        "pipeline options.",
    )
    add_evaluate_arguments(parser)
    parser.set_defaults(handler=lambda args, extra: run(args, extra), accepts_beam_args=True)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m triehh_beam.cli.measure.evaluate --input ...``: the same as ``triehh evaluate``."""
    parser = argtypes.ArgumentParser(prog="triehh evaluate", description="Evaluate TrieHH (see triehh evaluate --help).")
    add_evaluate_arguments(parser)
    try:
        args, beam_args = parser.parse_known_args(argv)
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else argtypes.EXIT_USAGE
    return run(args, beam_args)


if __name__ == "__main__":
    sys.exit(main())
