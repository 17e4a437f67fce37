"""Entry point: one run of a recurring discovery described by a config file (``triehh scheduled``).

A scheduler (cron, a Kubernetes CronJob, Airflow) runs ``triehh scheduled --config job.toml``
every period. Each run discovers into its own dated output directory, and every run on the same
population charges the same privacy ledger against the population's lifetime budget, so a
schedule cannot spend more than the budget whatever its frequency. A re-run for the same date
resumes that date's job (same state directory) instead of spending again.

Config (TOML, or YAML with the same keys)::

    [discovery]
    input = "gs://bucket/records/{date}/*.parquet"   # {date} is the run's date, YYYY-MM-DD
    output_root = "gs://bucket/triehh/words"         # this run writes output_root/{date}/
    epsilon = 1.0
    delta = 1e-10
    max_length = 10
    unit_size = 1                                    # optional, as are the other discover flags
    rule = "authors"

    [budget]                                         # optional: the population's lifetime budget
    ledger = "gs://bucket/triehh/ledgers/words"
    epsilon = 12.0
    delta = 1e-8

    [beam]                                           # optional: pipeline options, passed through
    options = ["--runner=DataflowRunner", "--project=my-project", "--region=europe-west1",
               "--temp_location=gs://bucket/tmp"]
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import tomllib
from typing import List

__all__ = ["load_config", "register_scheduled"]

_DISCOVERY_KEYS = {
    "input", "output_root", "epsilon", "delta", "max_length", "unit_size", "rule", "format",
    "user_column", "item_column", "count_column", "case_fold", "truncate_long_items", "seed_file",
}


class ConfigError(ValueError):
    """The config file is unreadable or wrong; the message names the file and the key."""


def load_config(path: str) -> dict:
    """Parses a TOML or YAML config file and checks its keys."""
    from apache_beam.io.filesystems import FileSystems

    try:
        with FileSystems.open(path, compression_type="uncompressed") as f:
            raw = f.read()
    except (IOError, OSError) as e:
        raise ConfigError(f"{path}: cannot read the config file ({e})") from None
    try:
        if path.endswith((".yaml", ".yml")):
            import yaml

            config = yaml.safe_load(raw) or {}
        else:
            config = tomllib.loads(raw.decode("utf-8"))
    except Exception as e:  # tomllib.TOMLDecodeError, yaml.YAMLError, UnicodeDecodeError
        raise ConfigError(f"{path}: not a valid config file ({e})") from None
    if not isinstance(config, dict) or "discovery" not in config:
        raise ConfigError(f"{path}: a [discovery] section is required")
    unknown = set(config) - {"discovery", "budget", "beam"}
    if unknown:
        raise ConfigError(f"{path}: unknown section(s) {', '.join(sorted(unknown))}")
    discovery = config["discovery"]
    for key in ("input", "output_root", "epsilon", "delta", "max_length"):
        if key not in discovery:
            raise ConfigError(f"{path}: [discovery] needs {key!r}")
    unknown = set(discovery) - _DISCOVERY_KEYS
    if unknown:
        raise ConfigError(f"{path}: unknown [discovery] key(s) {', '.join(sorted(unknown))}")
    unknown = set(config.get("budget", {})) - {"ledger", "epsilon", "delta"}
    if unknown:
        raise ConfigError(f"{path}: unknown [budget] key(s) {', '.join(sorted(unknown))}")
    options = config.get("beam", {}).get("options", [])
    if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
        raise ConfigError(f"{path}: [beam] options must be a list of strings")
    return config


def discover_argv(config: dict, date: str, dry_run: bool = False) -> List[str]:
    """The ``triehh discover`` arguments of one run (``date`` as YYYY-MM-DD)."""
    discovery = dict(config["discovery"])
    output = discovery.pop("output_root").rstrip("/") + "/" + date
    argv = ["--input", discovery.pop("input").replace("{date}", date), "--output", output]
    for key, value in sorted(discovery.items()):
        flag = "--" + key.replace("_", "-")
        if flag == "--format" or not isinstance(value, bool):
            argv += [flag, str(value)]
        elif value:
            argv.append(flag)
    budget = config.get("budget", {})
    if "ledger" in budget:
        argv += ["--ledger", budget["ledger"]]
    if "epsilon" in budget:
        argv += ["--budget-epsilon", str(budget["epsilon"])]
    if "delta" in budget:
        argv += ["--budget-delta", str(budget["delta"])]
    if dry_run:
        argv.append("--dry-run")
    return argv + list(config.get("beam", {}).get("options", []))


def _run(args: argparse.Namespace, extra: List[str]) -> int:
    from triehh_beam import cli

    if extra:
        print(f"triehh scheduled: error: unrecognized arguments: {' '.join(extra)}", file=sys.stderr)
        return 2
    try:
        config = load_config(args.config)
        date = args.date or datetime.datetime.now(datetime.timezone.utc).date().isoformat()
        datetime.date.fromisoformat(date)
    except ValueError as e:
        print(f"triehh scheduled: error: {e}", file=sys.stderr)
        return 2
    argv = discover_argv(config, date, dry_run=args.dry_run)
    print(json.dumps({"event": "scheduled_run", "date": date, "argv": argv}), flush=True)
    return cli.main(["discover", *argv])


def register_scheduled(subparsers) -> None:
    parser = subparsers.add_parser(
        "scheduled",
        help="one run of a recurring discovery described by a TOML/YAML config file",
        description=__doc__.split("\n\n")[1],
    )
    parser.add_argument("--config", required=True, help="the job's TOML or YAML file (local or gs://)")
    parser.add_argument("--date", help="the run's date, YYYY-MM-DD (default: today, UTC)")
    parser.add_argument("--dry-run", action="store_true", help="plan only; run no round")
    parser.set_defaults(handler=_run, accepts_beam_args=True)
