"""``triehh scheduled``: one run of a recurring discovery described by a TOML or YAML file
(``CONFIG_EXAMPLE``; every setting of ``discover``), for a scheduler to call each period: each
date discovers into its own output directory, charges the schedule's ledger against its lifetime
budget, and a re-run of a date resumes it; ``deny_earlier_runs`` denies what earlier dates
published; private locations under ``output_root`` are refused on load; the spend so far is
printed as a ``scheduled_spend`` event."""

from __future__ import annotations

import argparse
import datetime
import json
import math
import re
import sys
import textwrap
import tomllib
from typing import Any, Dict, List, Optional, Tuple

from triehh_beam.cli import discover
from triehh_beam.job.settings import config as config_lib
from triehh_beam.job.settings import paths
from triehh_beam.job.settings.config import DiscoveryConfig, Setting
from triehh_beam.protocol.protocols import DEFAULT_PROTOCOL, Protocol

__all__ = [
    "CONFIG_EXAMPLE",
    "ConfigError",
    "DENY_EARLIER_RUNS",
    "OUTPUT_ROOT",
    "dated_state_dir",
    "earlier_results",
    "file_settings",
    "load_config",
    "register_scheduled",
    "run_config",
    "schedule_ledgers",
    "spend_summary",
]

CONFIG_EXAMPLE = """\
    [discovery]
    input = "gs://data-bucket/records/{date}/*.parquet"  # {date}: the run's date, YYYY-MM-DD,
                                                     # in any text value of [discovery]
    output_root = "gs://public-bucket/triehh/words"  # this run writes output_root/{date}/: the
                                                     # published tree
    state_dir = "gs://private-bucket/triehh/words"   # private state (the secret seed) of
                                                     # each date: state_dir/{date}/; required
                                                     # on gs:// (locally: output_root.state/)
    epsilon = 1.0
    delta = 1e-10
    max_length = 10
    rule = "authors"                                 # optional, as is every other setting of
    item_type = "text"                               # triehh discover: its flag with
    tokenize = true                                  # underscores (--item-type: item_type)
    deny_earlier_runs = true                         # optional: each run denies the heavy hitters
                                                     # that earlier dates of this schedule
                                                     # published (output_root/DATE/heavy_hitters.json),
                                                     # so it spends its rounds on new items; the
                                                     # spend is unchanged (README: Deny lists across runs)

    [budget]                                         # optional: the population's lifetime budget
    ledger = "gs://private-bucket/triehh/ledgers/words"  # required with a budget: shared by every date
    epsilon = 12.0
    delta = 1e-8
    # period = "1d"                                  # optional: a rolling budget, per day of the
                                                     # runs' charges instead of a lifetime one

    [beam]                                           # optional: Beam pipeline options, passed through
    options = ["--runner=DataflowRunner", "--project=my-project", "--region=europe-west1",
               "--temp_location=gs://private-bucket/tmp"]      # only options Beam defines

    # The state, the ledger and Beam's temp and staging files are private (the seed, every
    # job's parameters, derived keys): a schedule that puts one of them under output_root is
    # refused when its file is loaded. Without [budget] every date's spend is still totalled
    # (a scheduled_spend line after each run), with no limit.
"""

# The one key that differs from discover's flags: each run writes to OUTPUT_ROOT/<date>.
OUTPUT_ROOT = "output_root"
# The one key of a schedule only: deny the heavy hitters its earlier dates published.
DENY_EARLIER_RUNS = "deny_earlier_runs"
_SECTIONS = ("discovery", "budget", "beam")


class ConfigError(ValueError):
    """The config file is unreadable or wrong; the message names the file and the key."""


def file_settings() -> Dict[Tuple[str, str], Setting]:
    """Every setting a config file accepts, by (section, key): all of discover's settings."""
    accepted = {}
    for item in config_lib.SETTINGS:
        key = OUTPUT_ROOT if item.name == "output_dir" else item.key
        accepted[(item.section, key)] = item
    return accepted


def load_config(path: str) -> dict:
    """Parses a TOML or YAML config file and checks its sections and keys."""
    from triehh_beam.io.files import read_file

    try:
        raw = read_file(path)
    except OSError as e:
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
    unknown = set(config) - set(_SECTIONS)
    if unknown:
        raise ConfigError(f"{path}: unknown section(s) {', '.join(sorted(unknown))}")
    for section in _SECTIONS:
        if not isinstance(config.get(section, {}), dict):
            raise ConfigError(f"{path}: [{section}] must be a table of keys")
    accepted = file_settings()
    for (section, key), item in accepted.items():
        if item.required and key not in config[section]:
            raise ConfigError(f"{path}: [{section}] needs {key!r}")
    for section in ("discovery", "budget"):
        values = config.get(section, {})
        known = sorted(key for (where, key) in accepted if where == section)
        if section == "discovery":
            known = sorted(known + [DENY_EARLIER_RUNS])
        unknown = set(values) - set(known)
        if unknown:
            raise ConfigError(f"{path}: unknown [{section}] key(s) {', '.join(sorted(unknown))} "
                              f"(accepted: {', '.join(known)})")
    if not isinstance(config["discovery"].get(DENY_EARLIER_RUNS, False), bool):
        raise ConfigError(f"{path}: [discovery] {DENY_EARLIER_RUNS} must be true or false")
    if config["discovery"].get(DENY_EARLIER_RUNS):
        # Refused here, not on the second date: the first date has no earlier result, so its
        # run would pass with an empty list and every later one fail.
        discovery = config["discovery"]
        protocol = discovery.get("protocol", DEFAULT_PROTOCOL.value)
        if protocol not in [p.value for p in Protocol if p.grows_trie and not p.central_only]:
            raise ConfigError(f"{path}: [discovery] {DENY_EARLIER_RUNS} works with protocol triehh and "
                              f"triehh++, not {protocol}")
        if discovery.get("window") is not None:
            raise ConfigError(f"{path}: [discovery] {DENY_EARLIER_RUNS} is not available with window yet")
    options = config.get("beam", {}).get("options", [])
    if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
        raise ConfigError(f"{path}: [beam] options must be a list of strings")
    _refuse_private_locations_in_the_output(path, config)
    return config


# Beam's options naming where a runner keeps temp and staging files (the job graphs, which hold
# a round's derived keys): as private as the state.
_BEAM_PRIVATE_OPTIONS = ("temp_location", "staging_location", "gcp_temp_location")


def _private_locations(config: dict) -> List[Tuple[str, str, str]]:
    """(what, where, what it holds) for every private location a config names."""
    found = []
    state_key = config_lib.BY_NAME["state_dir"].key
    state_dir = config["discovery"].get(state_key)
    if isinstance(state_dir, str):
        found.append((f"[discovery] {state_key}", state_dir, "the secret seed and the exact counts"))
    ledger_key = config_lib.BY_NAME["ledger_dir"].key
    ledger_dir = config.get("budget", {}).get(ledger_key)
    if isinstance(ledger_dir, str):
        found.append((f"[budget] {ledger_key}", ledger_dir, "every job's spend and parameters"))
    options = config.get("beam", {}).get("options", [])
    for i, option in enumerate(options):
        name, equals, value = option.lstrip("-").partition("=")
        if name in _BEAM_PRIVATE_OPTIONS:
            value = value if equals else (options[i + 1] if i + 1 < len(options) else "")
            if value:
                found.append((f"[beam] --{name}", value, "job graphs with a round's derived keys"))
    return found


def _refuse_private_locations_in_the_output(path: str, config: dict) -> None:
    """Refuses a config that puts its state, ledger or Beam temp/staging files under
    ``output_root``, the tree every date publishes into."""
    output_root = config["discovery"].get(OUTPUT_ROOT)
    if not isinstance(output_root, str):
        return  # (refused as a value when a run is built)
    for what, where, holds in _private_locations(config):
        if paths.is_inside(where, output_root):
            raise ConfigError(
                f"{path}: {what} {where!r} is inside output_root {output_root!r}, which is published: "
                f"it holds {holds}; put it in a private location (another bucket, or a directory "
                "beside the output root), never under it")


def earlier_results(output_root: str, date: str) -> List[str]:
    """The published ``heavy_hitters.json`` of the dates before ``date`` under ``output_root``
    (directories named YYYY-MM-DD), in date order; a date that published nothing is skipped."""
    from apache_beam.io.filesystems import FileSystems

    pattern = FileSystems.join(output_root.rstrip("/"), "*", "heavy_hitters.json")
    found = []
    for metadata in FileSystems.match([pattern])[0].metadata_list:
        name = metadata.path.rstrip("/").split("/")[-2]
        try:
            if datetime.date.fromisoformat(name).isoformat() == name and name < date:
                found.append((name, metadata.path))
        except ValueError:
            continue
    return [path for _, path in sorted(found)]


def dated_state_dir(config: dict, date: str) -> Optional[str]:
    """The private state directory of the run of ``date``, outside the published output_root:
    the configured state_dir (its ``{date}`` replaced, or ``/DATE`` appended) or, for a local
    output root, ``OUTPUT_ROOT.state/DATE``; None where there is none (a ``gs://`` output root
    without state_dir, refused when the run is built)."""
    configured = config["discovery"].get(config_lib.BY_NAME["state_dir"].key)
    if isinstance(configured, str):
        if "{date}" in configured:
            return configured.replace("{date}", date)
        return configured.rstrip("/") + "/" + date
    output_root = str(config["discovery"][OUTPUT_ROOT]).replace("{date}", date).rstrip("/")
    return None if paths.is_url(output_root) else output_root + ".state/" + date


def schedule_ledgers(config: dict) -> List[str]:
    """The ledgers holding what this schedule's runs spent: the shared ``[budget] ledger``, or
    without one each date's own (``ledger.jsonl`` in every dated state directory, in date
    order)."""
    from apache_beam.io.filesystems import FileSystems

    from triehh_beam.job.state.ledger import LEDGER_NAME

    shared = config.get("budget", {}).get(config_lib.BY_NAME["ledger_dir"].key)
    if isinstance(shared, str):
        return [shared]
    marker = "0000-00-00"  # where the date goes in a state directory's path
    template = dated_state_dir(config, marker)
    if template is None:
        return []
    template = paths.canonical_path(template)
    prefix, _, suffix = template.partition(marker)
    dated = re.compile(re.escape(prefix) + r"(\d{4}-\d{2}-\d{2})" + re.escape(suffix))
    found = []
    pattern = FileSystems.join(prefix + "*" + suffix, LEDGER_NAME)
    for metadata in FileSystems.match([pattern])[0].metadata_list:
        directory = paths.canonical_path(metadata.path)[: -len(LEDGER_NAME) - 1]
        match = dated.fullmatch(directory)
        if match:
            found.append((match.group(1), directory))
    return [directory for _, directory in sorted(found)]


def spend_summary(config: dict, date: str) -> dict:
    """The ``scheduled_spend`` event: what every run of the schedule has spent so far (basic
    composition over its ledgers; None for an unbounded total), and the lifetime budget with
    what is left of it, or that there is none.

    Raises:
      CasError: a ledger that is not a JSON-lines log; OSError, ValueError: one unreadable.
    """
    from triehh_beam.job.state import ledger as ledger_lib

    ledgers = schedule_ledgers(config)
    records = [r for location in ledgers for r in ledger_lib.Ledger(location).records()]
    spent = ledger_lib.Ledger.total(records)
    budget_section = config.get("budget", {})
    limits = {name: budget_section.get(config_lib.BY_NAME[f"budget_{name}"].key) for name in ("epsilon", "delta")}
    event = {"event": "scheduled_spend", "date": date, "ledgers": ledgers, "jobs": len(records),
             "spent": _amounts(spent)}
    if all(limit is None for limit in limits.values()):
        event.update(budget=None, note="no lifetime budget ([budget] epsilon and delta unset): the "
                                       "schedule's spend is totalled here, never limited")
    else:
        from triehh_beam.job.settings.setting import parse_duration

        period_text = budget_section.get(config_lib.BY_NAME["budget_period"].key)
        period = None if period_text is None else parse_duration(str(period_text))
        budget = ledger_lib.Budget(*(None if v is None else float(v) for v in limits.values()), period)
        if period is None:
            event.update(budget=limits, remaining=_amounts(ledger_lib.remaining(budget, spent)))
        else:  # a rolling budget: the spend, and what is left, of each period a charge touched
            book = ledger_lib.Ledger(ledgers[0], budget) if ledgers else None
            event.update(budget=dict(limits, period=str(period_text)), per_period=[
                {"period_start": ledger_lib.period_start(k, period), "spent": _amounts(used),
                 "remaining": _amounts(ledger_lib.remaining(budget, used))}
                for k, used in (book.spent_per_period(records) if book else [])])
    return event



def _amounts(spend) -> dict:
    """An (epsilon, delta) as JSON: None for an unbounded (infinite) amount."""
    return {"epsilon": spend.epsilon if math.isfinite(spend.epsilon) else None,
            "delta": spend.delta if math.isfinite(spend.delta) else None}


def run_config(config: dict, date: str) -> DiscoveryConfig:
    """The ``DiscoveryConfig`` of the run of ``date`` (YYYY-MM-DD), as ``triehh discover`` would
    build it from the same settings given as flags.

    Raises:
      ValueError: a value has the wrong type or is out of range (the message names the key);
        OSError: an unreadable seed file.
    """
    values: Dict[str, Any] = {}
    for (section, key), item in file_settings().items():
        if key not in config.get(section, {}):
            continue
        value = config[section][key]
        if section == "discovery" and isinstance(value, str):
            value = value.replace("{date}", date)
        parsed = item.from_file_value(value)
        if isinstance(parsed, float) and not math.isfinite(parsed):  # as the flags refuse it (argtypes)
            raise ValueError(f"[{section}] {key} must be a finite number, got {value!r}")
        values[item.dest] = parsed
    output_dir = config_lib.BY_NAME["output_dir"]
    output_root = values[output_dir.dest].rstrip("/")
    values[output_dir.dest] = output_root + "/" + date
    state_dir = dated_state_dir(config, date)
    if state_dir is not None:
        values[config_lib.BY_NAME["state_dir"].dest] = state_dir
    if config["discovery"].get(DENY_EARLIER_RUNS):
        deny = config_lib.BY_NAME["deny_list"]
        values[deny.dest] = tuple(values.get(deny.dest) or ()) + tuple(earlier_results(output_root, date))
    return config_lib.config_from_values(values)


def _run(args: argparse.Namespace, extra: List[str]) -> int:
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
    try:
        discovery = run_config(config, date)
    except (ValueError, OSError) as e:
        print(f"triehh scheduled: error: {args.config}: {e}", file=sys.stderr)
        return 2
    beam_options = list(config.get("beam", {}).get("options", []))
    print(json.dumps({"event": "scheduled_run", "date": date, "input": discovery.input_pattern,
                      "output": discovery.output_dir, "beam_options": beam_options,
                      **({"deny_list": list(discovery.deny_list)} if discovery.deny_list else {})}), flush=True)
    code = discover.execute(discovery, beam_options, dry_run=args.dry_run)
    # After every run, charged or refused: the schedule's spend so far, budget or not.
    from triehh_beam.job.state.cas import CasError

    try:
        print(json.dumps(spend_summary(config, date)), flush=True)
    except (CasError, OSError, ValueError) as e:
        print(f"triehh scheduled: error: cannot total the schedule's spend: {e}", file=sys.stderr)
        return code or 1
    return code


def register_scheduled(subparsers) -> None:
    """Adds ``scheduled`` to the ``triehh`` tool."""
    parser = subparsers.add_parser(
        "scheduled",
        help="one run of a recurring discovery described by a TOML/YAML config file",
        description=textwrap.fill(
            "Runs one dated discovery described by a TOML or YAML file (or a dry run): "
        "each date publishes OUTPUT_ROOT/DATE and keeps its state in a private location outside "
        "it; with a budget every date charges the same private ledger; a re-run of a date "
        "resumes it; after each run the schedule's total spend is printed (scheduled_spend). The "
        "file accepts every setting of `triehh discover` (key: the flag with underscores).", width=92),
        epilog="config file (TOML; YAML with the same keys):\n" + CONFIG_EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", required=True, help="the job's TOML or YAML file (local or gs://)")
    parser.add_argument("--date", help="the run's date, YYYY-MM-DD (default: today, UTC)")
    parser.add_argument("--dry-run", action="store_true", help="plan only; run no round")
    parser.set_defaults(handler=_run, accepts_beam_args=True, resumable=True)
