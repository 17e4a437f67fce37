"""The validated configuration of a discovery job: ``DiscoveryConfig``, the settings of
``job.settings.fields`` checked in ``__post_init__`` before any pipeline is built, and the front ends
derived from the one ``SETTINGS`` table: the ``triehh discover`` flags (``add_arguments``), the
Beam options of ``pipelines/discover.py`` (``add_pipeline_arguments``) and the configuration of
parsed values (``config_from_values``). What a state records and compares is ``job.settings.identity``'s;
where records come from is ``job.settings.sources``'.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import functools
from typing import Any, Dict, List, Mapping, Optional, Sequence

from triehh_beam.job.settings import deny_lists, identity, sources
from triehh_beam.job.settings.fields import BY_NAME, GROUPS, SETTINGS, DiscoverySettings
from triehh_beam.job.settings.paths import is_inside
from triehh_beam.job.settings.setting import Setting, read_seed_file, setting
from triehh_beam.proto import state_pb2
from triehh_beam.protocol.central.noisy_release import candidate_units
from triehh_beam.protocol.central.noisy_rounds import plan_noisy_rounds
from triehh_beam.protocol.central.partition_selection import plan_partition_selection
from triehh_beam.protocol.items.encoding import ItemEncoder, ItemKind
from triehh_beam.protocol.planning import parameters
from triehh_beam.protocol.protocols import Protocol

__all__ = [
    "BY_NAME",
    "DiscoveryConfig",
    "GROUPS",
    "SETTINGS",
    "Setting",
    "add_arguments",
    "add_pipeline_arguments",
    "config_from_values",
    "read_seed_file",
    "setting",
]

# Aliases of the protocols for packages that imported them from here (until they use Protocol).
TRIEHH, TRIEHH_PP, SAMPLE_THRESHOLD = Protocol.TRIEHH, Protocol.TRIEHH_PP, Protocol.WHOLE_ITEMS
FORMATS = (None, "jsonl", "csv", "parquet")


@dataclasses.dataclass(frozen=True)
class DiscoveryConfig(DiscoverySettings):
    """A whole discovery job, validated before any pipeline is built.

    Every field is a ``Setting`` (``job.settings.fields``; its help text says what it means). ``protocol``
    is a ``Protocol`` (a name given as text is parsed). ``theta`` and ``batch_size`` override
    TrieHH's planner together (both or neither): the guarantee is then Theorem 1's for these
    values, which must not exceed the target (epsilon, delta); if its conditions fail, or it
    exceeds the target, the job has none and runs only with ``allow_no_guarantee=True``
    (experiments and tests, never production).

    Raises:
      ValueError: a value is out of range or settings contradict each other.
    """

    def __post_init__(self):
        sources.check_source(self)
        if not self.output_dir:
            raise ValueError("--output is required (the output directory)")
        if not self.epsilon > 0:
            raise ValueError(f"--epsilon must be > 0, got {self.epsilon}")
        if not 0 < self.delta < 1:
            raise ValueError(f"--delta must be in (0, 1), got {self.delta}")
        if self.rule not in parameters.RULES:
            raise ValueError(f"--rule must be one of {', '.join(parameters.RULES)}, got {self.rule!r}")
        if self.input_format not in FORMATS:
            raise ValueError(f"--format must be jsonl, csv or parquet, got {self.input_format!r}")
        if self.seed is not None and not 16 <= len(self.seed) <= 64:
            raise ValueError(f"the seed (--seed-file) must be 16 to 64 bytes, got {len(self.seed)}")
        try:
            object.__setattr__(self, "protocol", Protocol.parse(self.protocol))  # a name given as text
        except ValueError as e:
            raise ValueError(f"--protocol: {e}") from None
        _check_partition_selection(self)
        _check_noisy_rounds(self)
        if self.protocol.samples_by_probability:
            _check_sample_and_threshold(self)
        elif self.accounting is not None:
            raise ValueError("--accounting chooses how sample-and-threshold is certified; --protocol triehh "
                             "is certified by Theorem 1: drop it, or use --protocol triehh++ or sample-threshold")
        _check_estimates(self)
        _check_deny_list(self)
        if (self.theta is None) != (self.batch_size is None):
            raise ValueError("--theta and --batch-size override the planner together: give both or neither")
        if self.theta is not None and (self.theta < 1 or self.batch_size < 1):
            raise ValueError("--theta and --batch-size must be >= 1")
        if self.population is not None and self.population < 1:
            raise ValueError(f"--population must be >= 1, got {self.population}")
        if self.state_dir is None and "://" in self.output_dir:
            raise ValueError(
                f"a {self.output_dir.split('://')[0]}:// output needs --state-dir: the state holds "
                "the secret seed, so put it where only the job can read it (another bucket; "
                "README: Secrets and state)"
            )
        if is_inside(self.resolved_state_dir, self.output_dir):
            raise ValueError(
                f"the state directory {self.resolved_state_dir} is inside the output "
                f"{self.output_dir}: it holds the secret seed, so keep it out of what is published"
            )
        for name in ("max_bad_fraction", "max_unusable_fraction"):
            value = getattr(self, name)
            if value is not None and not 0 <= value <= 1:
                raise ValueError(f"{BY_NAME[name].flag} must be in [0, 1], got {value}")
        self.record_options  # validates the reading options
        self.budget  # validates the budget
        if (self.budget_epsilon is not None or self.budget_delta is not None) and not self.ledger_dir:
            # The default ledger, in the job's own state directory, is fresh for every job: a
            # budget there bounds nothing (each dated run of a schedule would spend it anew).
            raise ValueError(
                "a lifetime budget needs the population's shared ledger: give --ledger DIR "
                "([budget] ledger in a scheduled config), the same for every job on the population")
        if self.window is not None and self.window < 1:
            raise ValueError(f"--window must be at least 1 second, got {self.window}")
        if self.windows is not None and self.window is not None:
            _check_declared_windows(self)
        if self.allowed_lateness < 0:
            raise ValueError(f"--allowed-lateness cannot be negative, got {self.allowed_lateness}")
        if isinstance(self.worker_budget, bool) or not isinstance(self.worker_budget, int) or self.worker_budget < 2:
            raise ValueError(f"--worker-budget must be an integer of at least 2 rows, got {self.worker_budget!r}")
        if not self.lease_seconds > 0:
            raise ValueError(f"--lease-seconds must be > 0, got {self.lease_seconds}")
        self.encoder  # validates unit_size and max_length

    @functools.cached_property
    def deny(self) -> Optional[deny_lists.DenyList]:
        """The deny set of ``deny_list`` (None without one), its files read and checked once per
        config (``deny_lists.load``; raises ``DenyListError``, a ValueError, naming the file)."""
        return deny_lists.load(self.deny_list, self.encoder)

    def sampling_identity(self) -> bytes:
        """``identity.sampling_identity`` of this job."""
        return identity.sampling_identity(self)

    def window_identity(self) -> bytes:
        """``identity.window_identity`` of this job."""
        return identity.window_identity(self)

    def input_spec(self) -> state_pb2.InputSpec:
        """``identity.input_spec`` of this job."""
        return identity.input_spec(self)

    def recorded(self, item: Setting) -> Any:
        """``identity.recorded``: the value of an identity setting as a job's state records it."""
        return identity.recorded(self, item)

    def resume_mismatches(self, state: state_pb2.JobState, state_encoder: ItemEncoder) -> List[str]:
        """``identity.resume_mismatches`` of this job and ``state``."""
        return identity.resume_mismatches(self, state, state_encoder)


#: The most windows one --windows range may declare (each is planned and charged).
MAX_DECLARED_WINDOWS = 100_000


def _check_declared_windows(config: DiscoveryConfig) -> None:
    """Refuses a ``--windows`` range not aligned to ``--window``, or of too many windows, in one
    line saying what would work (without ``--window``, ``discover`` refuses it: it has no windows)."""
    first, last = config.windows
    size = config.window * 1_000_000
    for name, instant in (("FROM", first), ("TO", last)):
        if instant is not None and instant % size:
            aligned = _rfc3339(instant // size * size)
            raise ValueError(f"--windows: {name} {_rfc3339(instant)} is not a window boundary of "
                             f"--window {config.window}s (windows start at multiples of it since "
                             f"1970-01-01T00:00:00Z, e.g. {aligned})")
    count = 0 if last is None else (last - first) // size  # FROM..: open-ended
    if count > MAX_DECLARED_WINDOWS:
        raise ValueError(f"--windows declares {count:,} windows, more than {MAX_DECLARED_WINDOWS:,}: "
                         "declare a shorter range or longer windows")


def _rfc3339(micros: int) -> str:
    """A UTC instant in microseconds as RFC 3339 (whole seconds: ``2026-11-23T10:00:00Z``)."""
    instant = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(microseconds=micros)
    return instant.strftime("%Y-%m-%dT%H:%M:%S") + (f".{instant.microsecond:06d}" if instant.microsecond else "") + "Z"


def _check_estimates(config: DiscoveryConfig) -> None:
    """Refuses a bad ``--estimate-frequencies`` (with ``--window`` too: each released window is
    estimated, ``job.windows.windowed``)."""
    value = config.estimate_frequencies
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 < value < float("inf")):
        raise ValueError(f"--estimate-frequencies must be a positive epsilon, got {value!r}")


def _check_partition_selection(config: DiscoveryConfig) -> None:
    """Refuses partition selection's settings with another protocol, and bad values of them or
    ``--accounting`` with it (its keep probability is exact: there is nothing to choose)."""
    if not config.protocol.selects_partitions:
        for name in ("max_items_per_user", "selection_share"):
            if getattr(config, name) != BY_NAME[name].default:
                raise ValueError(f"{BY_NAME[name].flag} is --protocol {Protocol.PARTITION_SELECTION}'s: drop it, "
                                 f"or use that protocol")
        return
    if config.accounting is not None:
        raise ValueError(f"--accounting chooses how sample-and-threshold is certified; --protocol "
                         f"{config.protocol} keeps each item with the optimal probability, exact: drop it")
    try:
        plan_partition_selection(config.epsilon, config.delta, config.max_items_per_user, config.selection_share)
    except ValueError as e:
        raise ValueError(f"--protocol {config.protocol}: {e} (--max-items-per-user, --selection-share)") from None


# Settings that mean nothing for noisy prefix rounds, and why.
_NOT_FOR_NOISY_ROUNDS = (
    ("accounting", "chooses how sample-and-threshold is certified; the L noisy rounds are composed by "
                   "dp_accounting (PLD or zCDP, whichever certifies less): drop it"),
    ("estimate_frequencies", "adds noisy counts to a trie's leaves; noisy rounds release every kept prefix "
                             "with its noisy count already: drop it"),
    ("deny_list", "is written for the sampled votes of triehh and triehh++: drop it"),
    ("window", "is not available: noisy rounds are central and batch only (triehh discover without --window)"),
)


def _check_noisy_rounds(config: DiscoveryConfig) -> None:
    """Refuses noisy rounds' settings with another protocol, the settings that mean nothing with
    it, items that are not text (its candidates extend by an alphabet) and bad values; its rounds
    run one job each (``rounds_per_job`` is set to "1": the one-job path runs thresholds without
    noise)."""
    if not config.protocol.noises_rounds:
        for name in ("alphabet", "false_prefixes"):
            if getattr(config, name) != BY_NAME[name].default:
                raise ValueError(f"{BY_NAME[name].flag} is --protocol {Protocol.NOISY_ROUNDS}'s: drop it, "
                                 f"or use that protocol")
        return
    for name, why in _NOT_FOR_NOISY_ROUNDS:
        if getattr(config, name) not in (None, (), BY_NAME[name].default):
            raise ValueError(f"--protocol {config.protocol}: {BY_NAME[name].flag} {why}")
    if config.encoder.kind is not ItemKind.TEXT:
        raise ValueError(f"--protocol {config.protocol} needs text items (its candidates extend by --alphabet), "
                         f"not {config.encoder.kind.value}")
    try:
        candidate_units(config.alphabet, config.unit_size, config.encoder.eos)
        plan_noisy_rounds(config.epsilon, config.delta, 1, config.false_prefixes, accountant="zcdp")
    except ValueError as e:
        raise ValueError(f"--protocol {config.protocol}: {e} (--alphabet, --false-prefixes)") from None
    object.__setattr__(config, "rounds_per_job", "1")


def _check_deny_list(config: DiscoveryConfig) -> None:
    """Refuses ``--deny-list`` with a protocol whose vote it was not written for (TrieHH and
    TrieHH++ only; batch or windowed alike)."""
    if not config.deny_list:
        return
    if isinstance(config.deny_list, str) or not all(isinstance(p, str) for p in config.deny_list):
        raise ValueError(f"--deny-list must be a tuple of paths, got {config.deny_list!r}")
    if not config.protocol.grows_trie:
        raise ValueError(f"--deny-list works with --protocol triehh and triehh++, not {config.protocol}")


def _check_sample_and_threshold(config: DiscoveryConfig) -> None:
    """Refuses TrieHH's own settings with ``--protocol triehh++`` or ``sample-threshold`` (they
    would mean nothing), and with the latter the trie's (one release of whole items)."""
    protocol = config.protocol
    for name in ("theta", "batch_size"):
        if getattr(config, name) is not None:
            raise ValueError(
                f"{BY_NAME[name].flag} fixes TrieHH's parameters; --protocol {protocol} plans alpha, tau "
                "and p_s for the target itself: drop it, or use --protocol triehh")
    if config.rule != BY_NAME["rule"].default:
        raise ValueError(f"--rule chooses TrieHH's theta and m; --protocol {protocol} has its own "
                         "planner: drop it, or use --protocol triehh")
    if protocol.grows_trie:
        return
    for name, why in _NOT_FOR_WHOLE_ITEMS:
        if getattr(config, name) != BY_NAME[name].default:
            raise ValueError(f"{BY_NAME[name].flag} {why}; --protocol {protocol} releases whole "
                             "items once, with their counts (README: Whole-item sample-and-threshold)")


# Settings of a trie (or of other jobs) that mean nothing for one release of whole items.
_NOT_FOR_WHOLE_ITEMS = (
    ("truncate_long_items", "cuts long items to prefixes, which only a trie can release: leave it out "
                            "(items longer than --max-length allows are dropped)"),
    ("estimate_frequencies", "adds noisy counts to a trie's items: leave it out (the release already "
                             "carries each item's count and count / p_s)"),
    ("rounds_per_job", "groups a trie's rounds into jobs: leave it out (there is one pass)"),
    ("keep_samples", "keeps the samples between a trie's rounds: leave it out (nothing is kept)"),
    ("window", "is not available with it yet: leave it out, or use --protocol triehh or triehh++"),
)


def add_arguments(
    parser: argparse.ArgumentParser,
    *,
    optional: Sequence[str] = (),
    skip: Sequence[str] = (),
    groups: Optional[Mapping[str, Any]] = None,
) -> Dict[str, Any]:
    """Adds a flag for every setting to ``parser``, in its group; returns the groups by name.

    Args:
      parser: the ``triehh discover`` (or ``demo``) parser.
      optional: settings whose flag is optional even if the field is required (the caller
        supplies a default).
      skip: settings that get no flag.
      groups: argument groups already made, by name (made here otherwise).
    """
    made = dict(groups or {})
    for name in GROUPS:
        if name not in made:
            made[name] = parser.add_argument_group(name)
    for item in SETTINGS:
        if item.name in skip:
            continue
        item.add_to(made[item.group], required=False if item.name in optional else None)
    return made


def add_pipeline_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds every setting as a Beam pipeline option (``--max_length``; ``--max-length`` too)."""
    for item in SETTINGS:
        item.add_to(parser, beam=True)


def config_from_values(values: Mapping[str, Any], **overrides: Any) -> DiscoveryConfig:
    """The ``DiscoveryConfig`` for parsed values keyed by ``Setting.dest`` (argparse namespace).

    Values absent or None take the field's default; ``overrides`` (by field name) replace
    values. Raises ValueError (bad values, a required setting missing) or OSError (a seed file
    that cannot be read).
    """
    fields: Dict[str, Any] = {}
    for item in SETTINGS:
        if item.name in overrides:
            fields[item.name] = overrides[item.name]
            continue
        value = values.get(item.dest)
        if value is None:
            if item.required:
                raise ValueError(f"{item.flag} is required")
            fields[item.name] = item.default
            continue
        fields[item.name] = item.field_value(value)
    return DiscoveryConfig(**fields)
