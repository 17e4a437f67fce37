"""``triehh federated``: TrieHH rounds where devices keep their records and only votes arrive:
``serve`` is the server (``job.federated.serve``: n from a registry of enrolled devices, the plan and
ledger as in ``discover``, rounds announced and counted over Pub/Sub), ``simulate`` runs it
against a simulated fleet (on ``PUBSUB_EMULATOR_HOST`` or an emulator it starts) and reports
recall against the central run. Unknown flags must be Beam options. Exit codes: 0 done; 2 bad
arguments or a refused job; 1 a failure while running."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Sequence

from triehh_beam.job.settings import config as config_lib

__all__ = ["register_federated", "secure_option"]

# Settings of jobs that read records (a federated server reads none: devices keep them).
_NOT_FOR_FEDERATED = ("input_pattern", "query", "input_format", "timestamp_column", "rounds_per_job",
                      "keep_samples", "max_bad_fraction", "max_unusable_fraction",
                      "item_column", "count_column", "window", "allowed_lateness", "dead_letter",
                      "bytes_encoding", "max_user_bytes", "max_item_bytes", "normalise_user_ids",
                      "deny_list")  # the device's vote would need the list: not built
# What simulate reads from its records file, besides the server's settings.
_SIMULATE_KEEPS = ("input_format", "item_column", "count_column", "bytes_encoding", "max_user_bytes",
                   "max_item_bytes", "normalise_user_ids")


def _round_arguments(group) -> None:
    group.add_argument("--round-deadline", type=float, default=300.0, metavar="SECONDS",
                       help="the longest a round stays open (default: %(default)s s)")
    group.add_argument("--report-goal", type=float, default=1.0, metavar="FRACTION",
                       help="close a round early once this fraction of its selected devices have "
                       "reported (default: %(default)s, all of them; below 1 only for a plan without a "
                       "guarantee: an early close would let one device's report cut off another's)")


def _secure_arguments(group) -> None:
    group.add_argument("--secure-aggregation", action="store_true",
                       help="the server sees only each cohort's sum of votes (and with --estimate-frequencies of "
                       "chosen leaves), never one device's vote (Bonawitz et al.'s secure aggregation: three more "
                       "exchanges per round, each up to --round-deadline)")
    group.add_argument("--cohort-size", type=int, default=500, metavar="N",
                       help="secure aggregation: the largest cohort (default: %(default)s)")
    group.add_argument("--cohort-minimum", type=int, default=10, metavar="N",
                       help="secure aggregation: the smallest cohort, and the fewest devices whose sum is ever "
                       "unmasked (default: %(default)s)")
    group.add_argument("--cohort-threshold", type=float, default=None, metavar="FRACTION",
                       help="secure aggregation: the fraction of a cohort needed at every exchange (default: 2/3; "
                       "at most 1/2 protects only from a server that follows the protocol)")
    group.add_argument("--secure-alphabet", default=None, metavar="CHARACTERS",
                       help="secure aggregation: the characters a unit may be; a vote for any other is lost "
                       "(default: a-z and 0-9)")


def secure_option(args: argparse.Namespace):
    """The ``SecureAggregation`` the flags ask for, or None.

    Raises:
      ValueError: a cohort bound or alphabet out of range, or a secure-aggregation flag without
        ``--secure-aggregation``.
    """
    from triehh_beam.job.federated.secagg import DEFAULT_ALPHABET, SecureAggregation
    from triehh_beam.protocol.secagg.cohorts import CohortPolicy

    if not args.secure_aggregation:
        if (args.secure_alphabet is not None or args.cohort_threshold is not None or args.cohort_size != 500
                or args.cohort_minimum != 10):
            raise ValueError("--cohort-size, --cohort-minimum, --cohort-threshold and --secure-alphabet need "
                             "--secure-aggregation")
        return None
    fraction = CohortPolicy().fraction if args.cohort_threshold is None else args.cohort_threshold
    policy = CohortPolicy(max_size=args.cohort_size, min_size=args.cohort_minimum, fraction=fraction)
    return SecureAggregation(policy, args.secure_alphabet if args.secure_alphabet is not None else DEFAULT_ALPHABET)


def _serve_arguments(parser: argparse.ArgumentParser) -> None:
    groups = config_lib.add_arguments(parser, skip=_NOT_FOR_FEDERATED)
    source = groups[config_lib.GROUPS[0]]
    source.add_argument("--devices", required=True, metavar="REGISTRY",
                        help="the enrolled device ids: a text file (one per line) or a .parquet/.csv/.jsonl "
                        "table (column --user-column); n is their number")
    source.add_argument("--announce-topic", required=True, metavar="projects/P/topics/T",
                        help="where round announcements and invitations are published")
    source.add_argument("--reports-subscription", required=True, metavar="projects/P/subscriptions/S",
                        help="where the devices' vote reports arrive")
    source.add_argument("--drain-seconds", type=float, default=0.0, metavar="SECONDS",
                        help="after the last round, keep reading reports this long (counted as late; "
                        "default: %(default)s)")
    _round_arguments(source)
    _secure_arguments(source)


def _simulate_arguments(parser: argparse.ArgumentParser) -> None:
    skip = tuple(s for s in _NOT_FOR_FEDERATED if s not in _SIMULATE_KEEPS and s != "input_pattern")
    config_lib.add_arguments(parser, skip=skip)
    fleet = parser.add_argument_group("the simulated fleet")
    _round_arguments(fleet)
    _secure_arguments(fleet)
    for name, default, what in (
            ("--dropout", 0.0, "selected devices that never report"),
            ("--duplicate", 0.0, "reports sent twice"),
            ("--late", 0.0, "reports sent after the round's deadline"),
            ("--malformed", 0.0, "reports corrupted on the way")):
        fleet.add_argument(name, type=float, default=default, metavar="P",
                           help=f"fraction of {what} (default: %(default)s)")
    fleet.add_argument("--latency", type=float, default=0.2, metavar="SECONDS",
                       help="median time a device takes to answer (lognormal; default: %(default)s)")
    fleet.add_argument("--fleet-seed", type=int, default=0, metavar="N",
                       help="seed of the fleet's faults and latencies (default: %(default)s)")
    fleet.add_argument("--json", action="store_true", help="print the summary as one JSON object")


def _quiet_beam(config) -> None:
    """As ``stream`` does: the streaming DirectRunner logs each retry of its Pub/Sub reader after
    the collector is cancelled (a closed channel), and a worker's error with its traceback before
    it reaches us; shown only with --verbose."""
    if not config.verbose:
        logging.getLogger("apache_beam").setLevel(logging.CRITICAL)


def _fail(command: str, message: str, code: int = 2) -> int:
    print(f"triehh federated {command}: error: {message}", file=sys.stderr)
    return code


def _serve(args: argparse.Namespace, beam_args: Sequence[str]) -> int:
    from apache_beam.options.pipeline_options import PipelineOptions

    from triehh_beam.cli.discover import unknown_arguments
    from triehh_beam.io.pubsub import client as pubsub
    from triehh_beam.io.registry import RegistryError, read_registry
    from triehh_beam.job.federated import serve as federated, outputs as federated_outputs
    from triehh_beam.job.release.planning import InfeasiblePlanError
    from triehh_beam.job.state.lease import LeaseHeld
    from triehh_beam.job.state.ledger import BudgetExceededError

    refused = unknown_arguments([a for a in beam_args if not a.startswith("--streaming")])
    if refused:
        return _fail("serve", refused)
    try:
        config = config_lib.config_from_values(vars(args), input_pattern=args.devices)
        registry = read_registry(args.devices, config.user_column)
        source = federated.FederatedSource(registry, args.announce_topic, args.reports_subscription,
                                           args.round_deadline, args.report_goal, args.drain_seconds,
                                           secure=secure_option(args))
        if source.secure is not None:  # again by the server; here before anything is built
            source.secure.check(config.encoder)
        federated.check_protocol(config)  # again by the server; here before anything is built
        federated.check_report_goal(args.report_goal, config.allow_no_guarantee)  # again once planned
    except (RegistryError, ValueError, OSError) as e:
        return _fail("serve", str(e))
    _quiet_beam(config)
    with pubsub.BatchPublisher() as publisher:
        def publish(topic, messages):
            publisher.publish_many(topic, messages)
            publisher.wait()

        try:
            result = federated.run_federated(config, source, publish, PipelineOptions(list(beam_args)),
                                             progress=lambda line: print(line, flush=True))
        except pubsub.PubsubUnavailableError as e:
            return _fail("serve", str(e), code=1)  # transient: a retry may succeed
        except LeaseHeld as e:
            return _fail("serve", f"another run is working on this state directory: {e}")
        except (InfeasiblePlanError, BudgetExceededError, ValueError) as e:
            return _fail("serve", str(e))
    print(f"federated job {result.job_id}: {len(result.rounds)} rounds, "
          f"{len(result.trie.heavy_hitters()):,} heavy hitters in {result.output}; "
          f"counts (private) in {result.report_path}", flush=True)
    print(federated_outputs.console_guarantee(result.estimate is not None, args.secure_aggregation), flush=True)
    return 0


def _simulate(args: argparse.Namespace, beam_args: Sequence[str]) -> int:
    from triehh_beam.cli.discover import unknown_arguments
    from triehh_beam.evaluation.fleet import run as fleet_run
    from triehh_beam.job.federated import serve as federated

    refused = unknown_arguments([a for a in beam_args if not a.startswith("--streaming")])
    if refused:
        return _fail("simulate", refused)
    try:
        config = config_lib.config_from_values(vars(args))
        faults = fleet_run.fleet_options(dropout=args.dropout, duplicate=args.duplicate, late=args.late,
                                         malformed=args.malformed, latency=args.latency, seed=args.fleet_seed)
        secure = secure_option(args)
        if secure is not None:
            secure.check(config.encoder)
        federated.check_protocol(config)  # again by the server; here before anything is built
        federated.check_report_goal(args.report_goal, config.allow_no_guarantee)  # again once planned
    except (ValueError, OSError) as e:
        return _fail("simulate", str(e))
    _quiet_beam(config)
    from triehh_beam.io.pubsub.client import PubsubUnavailableError
    from triehh_beam.io.schema import RecordFormatError
    from triehh_beam.job.release.planning import InfeasiblePlanError

    try:
        return fleet_run.main(config, faults, args.round_deadline, args.report_goal, list(beam_args), args.json,
                             config.verbose, secure)
    except (InfeasiblePlanError, RecordFormatError, FileNotFoundError, ValueError) as e:
        return _fail("simulate", str(e))
    except PubsubUnavailableError as e:
        return _fail("simulate", str(e), code=1)


def register_federated(subparsers) -> None:
    """Adds ``federated serve`` and ``federated simulate`` to the ``triehh`` tool."""
    parser = subparsers.add_parser(
        "federated",
        help="TrieHH rounds with devices that keep their data: the server, or a simulated fleet",
        description="Federated TrieHH: each round the server announces the trie learned so far to the "
        "devices it selected, and only their votes come back (Pub/Sub).",
    )
    commands = parser.add_subparsers(dest="federated_command", required=True, metavar="COMMAND")
    serve = commands.add_parser(
        "serve", help="run the server: announce rounds, count the devices' reports",
        description="The federated server: n from --devices, the plan and the ledger as in discover, "
        "each round announced on --announce-topic and counted from --reports-subscription.")
    _serve_arguments(serve)
    serve.set_defaults(handler=_serve, accepts_beam_args=True, resumable=True)
    simulate = commands.add_parser(
        "simulate", help="run the server against a simulated fleet made from a records file",
        description="One simulated device per user of --input, answering announcements through Pub/Sub "
        "(PUBSUB_EMULATOR_HOST, else an emulator started on 127.0.0.1), with faults; reports recall "
        "against the central run of the same records.")
    _simulate_arguments(simulate)
    simulate.set_defaults(handler=_simulate, accepts_beam_args=True)
