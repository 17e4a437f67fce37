"""Every setting of a discovery job, defined once: ``DiscoveryConfig`` and its ``SETTINGS``.

Each field of the frozen ``DiscoveryConfig`` carries its ``Setting`` (command-line flag, parser,
help text, argument group, where ``triehh scheduled`` reads it from a config file, and where a
job's state records it when it is part of the job's identity), so that the ``triehh discover``
flags (``add_arguments``), the Beam options of ``pipelines/discover.py``
(``add_pipeline_arguments``), the keys a scheduled job's config file accepts
(``Setting.from_file_value``), the ``InputSpec`` recorded in a job's state (``input_spec``) and
the comparison made when a job resumes (``resume_mismatches``) are all derived from the one
definition and cannot drift apart. The configuration is validated in ``__post_init__``, before
any pipeline is built.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import functools
import json
import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from triehh_beam.io.schema import DEFAULT_MAX_ITEM_BYTES, DEFAULT_MAX_USER_BYTES, RecordOptions
from triehh_beam.job import deny_lists
from triehh_beam.job import ledger as ledger_lib
from triehh_beam.job import sources
from triehh_beam.job.paths import canonical_path, canonical_pattern, is_inside, same_path
from triehh_beam.job.settings import Setting, parse_duration, parse_window_range, read_seed_file, setting
from triehh_beam.proto import state_pb2
from triehh_beam.protocol import parameters
from triehh_beam.protocol.encoding import ItemEncoder, ItemKind
from triehh_beam.protocol.sample_threshold_planner import ACCOUNTINGS, BOUND, DEFAULT_ACCOUNTING, EXACT


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

RULES = parameters.RULES
TRIEHH, TRIEHH_PP = "triehh", "triehh++"
#: Whole-item sample-and-threshold: one release, no trie (``job.whole_items``).
SAMPLE_THRESHOLD = "sample-threshold"
PROTOCOLS = (TRIEHH, TRIEHH_PP, SAMPLE_THRESHOLD)
#: The rule a TrieHH++ (or whole-item) plan records (``planning``): its planner, not one of TrieHH's RULES.
SAMPLE_AND_THRESHOLD = "sample-and-threshold"
# Keyed settings left out of the job's identity at their default, so that identities recorded
# before the setting existed (every TrieHH job's) stay the same and their jobs resume.
_IDENTITY_OMITS_DEFAULT = ("protocol", "estimate_frequencies")
FORMATS = (None, "jsonl", "csv", "parquet")

# Argument groups of ``triehh discover --help``, in the order they are shown.
GROUPS = (
    "input and output",
    "privacy target",
    "lifetime budget of the population (privacy ledger)",
    "operation",
    "items",
    "expert (experiments only)",
    "event-time windows (triehh stream, and triehh discover --window)",
)

# A broken export (a wrong delimiter, encoding or column) makes most of its rows bad, 40% to
# 100%, while a healthy one rarely has more than a fraction of a percent: 5% stops the first
# before it spends any budget and leaves room for messy but usable data.
DEFAULT_MAX_BAD_FRACTION = 0.05
# Users without a usable item are sampled but can never vote: past half of them, most of every
# round's sample is wasted, and a job of nothing but them (URLs under a short L) releases nothing.
DEFAULT_MAX_UNUSABLE_FRACTION = 0.5

# Where a job's state records an identity setting (``Setting.identity``): a field of the
# state's ``InputSpec`` ("input.<field>"), of its ``PrivacyPlan`` ("plan.<field>"), the trie's
# item encoding (compared as a whole) or a field of ``JobState`` itself.
ENCODING = "trie.encoding"


_IO, _TARGET, _BUDGET, _OPERATE, _ITEMS, _EXPERT, _WINDOWS = GROUPS

def recorded_accounting(config: "DiscoveryConfig") -> str:
    """The accounting a new job's plan records: the one asked for (exact by default) under
    sample-and-threshold, "" under TrieHH (Theorem 1 has one)."""
    if config.protocol in (TRIEHH_PP, SAMPLE_THRESHOLD):
        return config.accounting or DEFAULT_ACCOUNTING
    return ""


def _recorded_rule(config: "DiscoveryConfig") -> str:
    """The rule a job's plan records: TrieHH's rule, "fixed" for expert values, or TrieHH++'s."""
    if config.protocol in (TRIEHH_PP, SAMPLE_THRESHOLD):
        return SAMPLE_AND_THRESHOLD
    return config.rule if config.theta is None else "fixed"


def _text_or_empty(name: str) -> Callable[["DiscoveryConfig"], Any]:
    return lambda config: getattr(config, name) or ""


@dataclasses.dataclass(frozen=True)
class DiscoveryConfig:
    """A whole discovery job, validated before any pipeline is built.

    Every field is a ``Setting`` (its help text says what it means); ``SETTINGS`` lists them.
    ``protocol`` is TrieHH's (below) or TrieHH++'s, whose planner has no such override.
    ``theta`` and ``batch_size`` override the planner together (both or neither): the guarantee
    is then Theorem 1's for these values, which must not exceed the target (epsilon, delta); if
    its conditions fail, or it exceeds the target, the job has none and runs only with
    ``allow_no_guarantee=True`` (experiments and tests, never production).

    Raises:
      ValueError: a value is out of range or settings contradict each other.
    """

    # --input and --query: exactly one (input_pattern None with a query).
    input_pattern: Optional[str] = setting(
        "--input", "records: file, glob, gs:// path (comma-separate several), or a BigQuery table "
        "bq://PROJECT.DATASET.TABLE (read as of the census's start, time travel); or give --query",
        _IO, default=None, positional=True, metavar="PATTERN", identity="input.file_pattern",
        record=lambda c: canonical_pattern(c.input_pattern or ""), example="records/day-2.jsonl")
    query: Optional[str] = setting(
        "--query", "instead of --input: a standard-SQL BigQuery query whose result is the records; "
        "make it deterministic (a fixed date range): the sampling pass runs it again and refuses a "
        "result of another size", _IO, default=None, kw_only=True, metavar="SQL",
        identity="input.query", record=_text_or_empty("query"),
        example="SELECT user_id, item FROM `my-proj.devices.records` WHERE day = '2026-03-04'")
    output_dir: str = setting(
        "--output", "where the publishable heavy_hitters.json and trie.pb are written", _IO,
        metavar="DIR", keyed=True, example="out")
    epsilon: float = setting(
        "--epsilon", "epsilon for the whole job", _TARGET, parse=float,
        identity="plan.target_epsilon", example="2.5")
    delta: float = setting(
        "--delta", "delta for the whole job", _TARGET, parse=float,
        identity="plan.target_delta", example="1e-9")
    max_length: int = setting(
        "--max-length", "units per item including the terminator; also the most rounds", _TARGET,
        parse=int, metavar="L", identity="plan.max_length", example="6")
    unit_size: int = setting(
        "--unit-size", "characters per unit (default: %(default)s)", _TARGET, default=1, parse=int,
        metavar="K", identity=ENCODING, example="2")
    input_format: Optional[str] = setting(
        "--format", "input format (default: from the file extension)", _IO, default=None,
        choices=("jsonl", "csv", "parquet"), identity="input.format",
        record=_text_or_empty("input_format"), example="csv")
    population: Optional[int] = setting(
        "--population", "a population size n that is public: the plan uses N and n, m and the achieved "
        "epsilon, delta are published; refused if the input holds fewer distinct users (default: "
        "n is the census count, private, and none of these is published)", _TARGET, default=None,
        parse=int, metavar="N", identity="plan.public_population", record=lambda c: c.population or 0,
        mismatch="public population (state has {theirs!r}, asked {ours!r}; 0: none declared)",
        example="4000")
    protocol: str = setting(
        "--protocol", "triehh: bottom-m samples and Theorem 1's theta (default); triehh++: "
        "sample-and-threshold, each user sampled with probability p_s per round and tau votes "
        "kept (docs/protocol.md §2); sample-threshold: one release of whole items, each user "
        "sampled with probability p_s, items reported by at least tau released with their count "
        "(epsilon <= 1); --theta, --batch-size and --rule are TrieHH's",
        _TARGET, default=TRIEHH, choices=PROTOCOLS, identity="plan.protocol",
        # States before TrieHH++ ran in the pipeline record none: they are TrieHH jobs.
        accepts=lambda c, theirs: theirs == "" and c.protocol == TRIEHH, example=TRIEHH_PP)
    accounting: Optional[str] = setting(
        "--accounting", "how --protocol triehh++ and sample-threshold certify (epsilon, delta): exact "
        "(each release's exact delta, worst case over the other holders; docs/protocol.md §2) or bound "
        "(the paper's closed form, epsilon/L <= 1); recorded in the state, the ledger and the output "
        "(default: exact for a new job; a resumed job keeps the one it started with)",
        _TARGET, default=None, choices=ACCOUNTINGS, identity="plan.accounting", compare="given", keyed=False,
        record=lambda c: recorded_accounting(c),
        # States before exact accounting record none: they were planned under the bound.
        accepts=lambda c, theirs: theirs == "" and recorded_accounting(c) in ("", BOUND),
        mismatch="accounting (state has {theirs!r}, asked {ours!r}; a job resumes under the one it started with)",
        example=BOUND)
    estimate_frequencies: Optional[float] = setting(
        "--estimate-frequencies", "after the rounds, estimate how many users hold each heavy hitter "
        "and frequent prefix: one more pass, each user counted once, two-sided geometric noise of "
        "this epsilon (spent on top of --epsilon: the ledger is charged epsilon + EPSILON_EST, delta "
        "unchanged; docs/protocol.md section 5) (default: none)", _TARGET, default=None,
        parse=float, metavar="EPSILON_EST", identity="plan.estimate_epsilon",
        record=lambda c: c.estimate_frequencies or 0.0,
        mismatch="frequency estimates' epsilon (state has {theirs!r}, asked {ours!r}; 0: none)",
        example="1")
    deny_list: Tuple[str, ...] = setting(
        "--deny-list", "earlier runs' heavy_hitters.json (comma-separate several; local or gs://): a "
        "sampled user whose chosen item is on them chooses among its other items, or abstains; the "
        "samples and the privacy spend are unchanged (README: Deny lists across runs) (default: none)",
        _TARGET, default=(), parse=deny_lists.parse_paths, metavar="FILES", identity="deny_list.digest",
        keyed=False, record=lambda c: c.deny.digest if c.deny else "",
        mismatch="deny list (the state's digest {theirs:.12}, this one's {ours:.12}; empty: none)",
        example="runs/2026-03-01/heavy_hitters.json")
    rule: str = setting(
        "--rule", "TrieHH's parameter rule (default: %(default)s)", _TARGET, default="authors",
        choices=tuple(RULES), identity="plan.rule", record=_recorded_rule, example="corollary1")
    state_dir: Optional[str] = setting(
        "--state-dir", "private job state, holds the secret seed; never inside the output "
        "(default: OUTPUT.state beside a local output; required for a gs:// output)", _IO,
        default=None, metavar="DIR", example="private/state")
    seed: Optional[bytes] = setting(
        "--seed-file", "file whose 16-64 bytes are the secret seed (default: a fresh random seed)",
        _IO, default=None, metavar="F", load=read_seed_file, identity="secret_seed",
        compare="given", keyed=False, mismatch="secret seed", example="private/seed.bin", repr=False)
    case_fold: bool = setting(
        "--case-fold", "fold case of text items", _ITEMS, default=False, parse=None,
        identity=ENCODING, example="true")
    truncate_long_items: bool = setting(
        "--truncate-long-items", "cut items longer than L-1 units to a prefix instead of dropping them",
        _ITEMS, default=False, parse=None, identity="truncate_long_items",
        mismatch="long-item policy", example="true")
    user_column: str = setting(
        "--user-column", "(default: %(default)s)", _IO, default="user_id",
        identity="input.user_column", example="device")
    normalise_user_ids: bool = setting(
        "--normalise-user-ids", "strip surrounding white space from text user ids and put them in "
        "Unicode NFC, so ' 42' and '42' are one user (the guarantee is per distinct id)", _IO,
        default=False, parse=None, identity="input.normalise_user_ids", example="true")
    item_column: str = setting(
        "--item-column", "(default: %(default)s)", _IO, default="item",
        identity="input.item_column", example="word")
    count_column: str = setting(
        "--count-column", "optional per-record count (default: %(default)s)", _IO, default="count",
        identity="input.count_column", example="times")
    item_kind: str = setting(
        "--item-type", "text (units of K characters), bytes (K bytes) or int (K bits) (default: %(default)s)",
        _ITEMS, default="text", choices=tuple(kind.value for kind in ItemKind), identity=ENCODING,
        example="int")
    int_bits: Optional[int] = setting(
        "--int-bits", "width of integer items, 1-64 (default: 64)", _ITEMS, default=None, parse=int,
        identity=ENCODING, example="32")
    tokenize: bool = setting(
        "--tokenize", "split text fields into words (rule: triehh_beam/protocol/tokenize.py), each an item",
        _ITEMS, default=False, parse=None, identity=ENCODING, example="true")
    bytes_encoding: Optional[str] = setting(
        "--bytes-encoding", "how byte items are written in JSON Lines and CSV (Parquet: binary columns)",
        _ITEMS, default=None, choices=("base64", "hex"), identity="input.bytes_encoding",
        record=_text_or_empty("bytes_encoding"), example="hex")
    max_user_bytes: int = setting(
        "--max-user-bytes", "longer user ids are bad rows (default: %(default)s)", _OPERATE,
        default=DEFAULT_MAX_USER_BYTES, parse=int, identity="input.max_user_bytes",
        example="128")
    max_item_bytes: int = setting(
        "--max-item-bytes", "longer items are bad rows (default: %(default)s)", _OPERATE,
        default=DEFAULT_MAX_ITEM_BYTES, parse=int, identity="input.max_item_bytes",
        example="1024")
    dead_letter: Optional[str] = setting(
        "--dead-letter", "write the rejected input rows (raw) to this JSON-lines file, for the operator",
        _OPERATE, default=None, metavar="PATH", example="private/rejected.jsonl")
    max_bad_fraction: Optional[float] = setting(
        "--max-bad-fraction", "refuse the job, before any budget is spent, if more than F of the rows "
        "are bad (malformed, missing fields, bad counts, ...); 1 disables (default: %(default)s)",
        _OPERATE, default=DEFAULT_MAX_BAD_FRACTION, parse=float, metavar="F", example="0.01")
    max_unusable_fraction: Optional[float] = setting(
        "--max-unusable-fraction", "refuse the job, before any budget is spent, if more than F of the "
        "users hold no usable item (every item of theirs longer than L allows, or not encodable): they "
        "are sampled but can never vote; 1 disables (default: %(default)s)",
        _OPERATE, default=DEFAULT_MAX_UNUSABLE_FRACTION, parse=float, metavar="F", example="0.9")
    theta: Optional[int] = setting(
        "--theta", "fix the threshold instead of planning it (with --batch-size)", _EXPERT,
        default=None, parse=int, identity="plan.theta", compare="given",
        example="12")
    batch_size: Optional[int] = setting(
        "--batch-size", "fix the users sampled per round (with --theta)", _EXPERT, default=None,
        parse=int, identity="plan.batch_size", compare="given", example="300")
    allow_no_guarantee: bool = setting(
        "--allow-no-guarantee", "run fixed parameters even when Theorem 1 gives them no guarantee, or one above the "
        "target (the job then claims none)",
        _EXPERT, default=False, parse=None, example="true")
    ledger_dir: Optional[str] = setting(
        "--ledger", "where the population's ledger.jsonl lives, shared by every job on the same "
        "population; required with a lifetime budget (without one: the state directory)", _BUDGET, default=None, metavar="DIR",
        section="budget", key="ledger", identity="ledger", compare="recorded", keyed=False,
        # A resume must be charged (or found charged) in the ledger the job started with.
        mismatch="privacy ledger (state has {theirs!r})",
        # The same ledger however it was typed (states before canonical paths recorded it as
        # typed); and a job moved out of OUTPUT/state (the old default) took its default
        # ledger with it.
        accepts=lambda c, theirs: same_path(theirs, c.resolved_ledger_dir) or (
            c.ledger_dir is None and same_path(theirs, c.legacy_state_dir)),
        record=lambda c: c.resolved_ledger_dir, example="private/ledger")
    budget_epsilon: Optional[float] = setting(
        "--budget-epsilon", "lifetime epsilon of the population, enforced in --ledger (default: unlimited)", _BUDGET,
        default=None, parse=float, section="budget", key="epsilon", example="20")
    budget_delta: Optional[float] = setting(
        "--budget-delta", "lifetime delta of the population, enforced in --ledger (default: unlimited)", _BUDGET,
        default=None, parse=float, section="budget", key="delta", example="1e-7")
    verbose: bool = setting(
        "--verbose", "also show exact private counts (users, votes, dropped rows) in progress lines "
        "and events, marked private, and keep Beam's own log output (silenced on the in-process "
        "runner otherwise): such logs are operator data, never to be published", _OPERATE,
        default=False, parse=None, example="true")
    rounds_per_job: str = setting(
        "--rounds-per-job", "1: one Beam job per round, each committed before the next starts "
        "(resume per round); all: every round in one job after the sampling pass, each level "
        "written to the state as its round completes (for runners where a job start is "
        "expensive, e.g. Dataflow). Both give the same trie (default: %(default)s)", _OPERATE,
        default="1", choices=("1", "all"), example="all")
    keep_samples: bool = setting(
        "--keep-samples", "keep the sampled users' items (a private artefact in the state "
        "directory, deleted when the job ends by default)", _OPERATE, default=False, parse=None,
        example="true")
    lease_seconds: float = setting(
        "--lease-seconds", "how long a run holds the state directory's lease between renewals "
        "(default: %(default)s)", _OPERATE, default=6 * 3600, parse=float, example="600")

    window: Optional[int] = setting(
        "--window", "one discovery per fixed event-time window of this length (90s, 15m, 1h, 1d), "
        "each planned, charged and released on its own; with files, --timestamp-column gives the "
        "event time", _WINDOWS, default=None, parse=parse_duration, metavar="DURATION", example="1h")
    allowed_lateness: int = setting(
        "--allowed-lateness", "a window closes (and is released) this long after its end; records "
        "arriving later are late: counted and dead-lettered, never in a result (default: 0)",
        _WINDOWS, default=0, parse=parse_duration, metavar="DURATION", example="10m")
    windows: Optional[Tuple[int, int]] = setting(
        "--windows", "the windows released, declared in advance: FROM..TO, RFC 3339 UTC instants "
        "aligned to --window; every window starting in [FROM, TO) is planned, charged and "
        "released, an empty one too (an empty result); records outside are dropped and counted; "
        "required with --window", _WINDOWS, default=None, parse=parse_window_range, metavar="FROM..TO",
        example="2026-11-23T00:00:00Z..2026-11-24T00:00:00Z")
    timestamp_column: Optional[str] = setting(
        "--timestamp-column", "files only: the column holding each record's event time "
        "(milliseconds since the epoch, RFC 3339, or a Parquet timestamp)", _WINDOWS, default=None,
        metavar="NAME", example="event_time")

    def __post_init__(self):
        sources.check_source(self)
        if not self.output_dir:
            raise ValueError("--output is required (the output directory)")
        if not self.epsilon > 0:
            raise ValueError(f"--epsilon must be > 0, got {self.epsilon}")
        if not 0 < self.delta < 1:
            raise ValueError(f"--delta must be in (0, 1), got {self.delta}")
        if self.rule not in RULES:
            raise ValueError(f"--rule must be one of {', '.join(RULES)}, got {self.rule!r}")
        if self.input_format not in FORMATS:
            raise ValueError(f"--format must be jsonl, csv or parquet, got {self.input_format!r}")
        if self.seed is not None and not 16 <= len(self.seed) <= 64:
            raise ValueError(f"the seed (--seed-file) must be 16 to 64 bytes, got {len(self.seed)}")
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"--protocol must be one of {', '.join(PROTOCOLS)}, got {self.protocol!r}")
        if self.protocol in (TRIEHH_PP, SAMPLE_THRESHOLD):
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
        if self.state_dir is None and not _is_local(self.output_dir):
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
        if not self.lease_seconds > 0:
            raise ValueError(f"--lease-seconds must be > 0, got {self.lease_seconds}")
        self.encoder  # validates unit_size and max_length

    @property
    def encoder(self) -> ItemEncoder:
        return ItemEncoder(
            kind=ItemKind(self.item_kind),
            unit_size=self.unit_size,
            max_length=self.max_length,
            case_fold=self.case_fold,
            int_bits=self.int_bits if self.item_kind == "int" else None,
            tokenize=self.tokenize,
        )

    @functools.cached_property
    def deny(self) -> Optional[deny_lists.DenyList]:
        """The deny set of ``deny_list`` (None without one), its files read and checked once per
        config (``deny_lists.load``; raises ``DenyListError``, a ValueError, naming the file)."""
        return deny_lists.load(self.deny_list, self.encoder)

    @property
    def record_options(self) -> RecordOptions:
        return RecordOptions.for_encoder(
            self.encoder,
            bytes_encoding=self.bytes_encoding,
            max_user_bytes=self.max_user_bytes,
            max_item_bytes=self.max_item_bytes,
            normalise_user_ids=self.normalise_user_ids,
            timestamp_column=self.timestamp_column,
        )

    @property
    def budget(self) -> ledger_lib.Budget:
        return ledger_lib.Budget(self.budget_epsilon, self.budget_delta)

    @property
    def resolved_ledger_dir(self) -> str:
        """``ledger_dir`` or the state directory, canonical (``paths``)."""
        return canonical_path(self.ledger_dir) if self.ledger_dir else self.resolved_state_dir

    @property
    def resolved_state_dir(self) -> str:
        """``state_dir``, or ``OUTPUT.state`` beside a local output (outside what is published),
        canonical (``paths``: absolute, whichever directory the job runs from)."""
        if self.state_dir:
            return canonical_path(self.state_dir)
        return canonical_path(self.output_dir) + ".state"

    @property
    def legacy_state_dir(self) -> str:
        """Where releases before 0.2 kept the state by default: ``OUTPUT/state``, inside the
        published output (a job found there must be moved out before it resumes)."""
        from apache_beam.io.filesystems import FileSystems

        return FileSystems.join(self.output_dir, "state")

    def window_identity(self) -> bytes:
        """The identity of a windowed job (``sampling.WindowKeys``): every keyed setting but where
        the records come from and where results go (so the stream and a bounded replay of the
        same records, given one seed file, sample alike), with the window length."""
        where = {"input_pattern", "output_dir", "input_format", "user_column", "item_column",
                 "count_column", "timestamp_column"}
        values = _keyed_values(self, skip=where)
        values["window"] = self.window
        text = json.dumps({"triehh-beam/window-identity": 1, **values}, sort_keys=True,
                          separators=(",", ":"), ensure_ascii=True, allow_nan=False)
        return text.encode("ascii")

    def sampling_identity(self) -> bytes:
        """The job's identity, mixed into every key derived from the seed (``Sampler``).

        A canonical JSON object of every ``keyed`` setting (input, output, target, encoding,
        reading options; never the seed or the ledger), the input pattern and the output in
        their canonical forms (``paths``: ``out/``, ``./out`` and ``/home/me/out`` run from
        ``/home/me`` are one output): a job's retries and resumes record and compare the same
        identity from any working directory, while two jobs that share a seed file (two dates of
        a schedule) differ in it. A job's state records it. Keys are derived from it and the
        release's nonce together (``release.Release``), so two releases of one identity (the
        same command after its state was deleted) still draw independent samples. The protocol
        is in it only when it is not TrieHH (identities recorded before it existed stay valid).
        """
        values = _keyed_values(self)
        text = json.dumps({"triehh-beam/job-identity": 1, **_canonical_identity(values)}, sort_keys=True,
                          separators=(",", ":"), ensure_ascii=True, allow_nan=False)
        return text.encode("ascii")

    def recorded(self, item: Setting) -> Any:
        """The value of an identity setting as a job's state records it."""
        return item.record(self) if item.record is not None else getattr(self, item.name)

    def input_spec(self) -> state_pb2.InputSpec:
        """The ``InputSpec`` a job's state records: every setting whose identity is ``input.*``."""
        return state_pb2.InputSpec(**{
            item.identity.split(".", 1)[1]: self.recorded(item)
            for item in SETTINGS
            if item.identity and item.identity.startswith("input.")
        })

    def resume_mismatches(self, state: state_pb2.JobState, state_encoder: ItemEncoder) -> List[str]:
        """What differs between this configuration and a job's committed state.

        Every identity setting is compared (see ``Setting.identity``); each difference is
        described in a few words, never with the secret seed. ``state_encoder`` is the item
        encoding of the state's trie. An empty list: the job may resume.
        """
        mismatches = []
        # The pattern as typed in states recorded before canonical paths: compared canonical.
        theirs_input = state_pb2.InputSpec()
        theirs_input.CopyFrom(state.input)
        theirs_input.file_pattern = canonical_pattern(state.input.file_pattern)
        if theirs_input.SerializeToString(deterministic=True) != self.input_spec().SerializeToString(
            deterministic=True
        ):
            mismatches.append(f"input (state has {sources.describe_input(state.input)})")
        for item in SETTINGS:
            if item.identity is None or item.identity.startswith("input.") or item.identity == ENCODING:
                continue
            ours = self.recorded(item)
            theirs = _state_value(state, item.identity)
            if item.compare == "given" and getattr(self, item.name) is None:
                continue
            if item.compare == "recorded" and not theirs:
                continue
            if ours != theirs and not (item.accepts is not None and item.accepts(self, theirs)):
                mismatches.append(item.mismatch.format(name=item.name, ours=ours, theirs=theirs))
        if state_encoder != self.encoder:
            mismatches.append("item encoding (unit size or case folding)")
        theirs, ours = _identity_values(state.sampling_identity), _identity_values(self.sampling_identity().decode())
        # A setting absent from a recorded identity (recorded before it existed) is at its
        # default, None: only values that differ are a difference.
        names = sorted(k for k in set(theirs) | set(ours) if theirs.get(k) != ours.get(k))
        if state.sampling_identity and names:
            # The identity keys every sample: a resume under another would draw other users.
            # (Compared canonical: states before canonical paths recorded them as typed; the
            # recorded identity, as recorded, keys the resumed job's samples.)
            unnamed = [n for n in names if n not in BY_NAME or BY_NAME[n].identity is None]
            if unnamed or not mismatches:
                mismatches.append(f"job identity ({', '.join(unnamed or names)}: the samples are keyed by it)")
        return mismatches

    @property
    def source(self) -> str:
        """Where the records come from, in a few words: the input pattern, or "the --query result"."""
        return self.input_pattern or "the --query result"

    def read_transform(self, dead_letter: bool = False, as_of_millis: Optional[int] = None) -> Any:
        """The transform that reads the records (``sources.read_transform``)."""
        return sources.read_transform(self, dead_letter, as_of_millis)


#: The most windows one --windows range may declare (each is planned and charged).
MAX_DECLARED_WINDOWS = 100_000


def _check_declared_windows(config: "DiscoveryConfig") -> None:
    """Refuses a ``--windows`` range not aligned to ``--window``, or of too many windows, in one
    line saying what would work (without ``--window``, ``discover`` refuses it: it has no windows)."""
    first, last = config.windows
    size = config.window * 1_000_000
    for name, instant in (("FROM", first), ("TO", last)):
        if instant % size:
            aligned = _rfc3339(instant // size * size)
            raise ValueError(f"--windows: {name} {_rfc3339(instant)} is not a window boundary of "
                             f"--window {config.window}s (windows start at multiples of it since "
                             f"1970-01-01T00:00:00Z, e.g. {aligned})")
    count = (last - first) // size
    if count > MAX_DECLARED_WINDOWS:
        raise ValueError(f"--windows declares {count:,} windows, more than {MAX_DECLARED_WINDOWS:,}: "
                         "declare a shorter range or longer windows")


def _rfc3339(micros: int) -> str:
    """A UTC instant in microseconds as RFC 3339 (whole seconds: ``2026-11-23T10:00:00Z``)."""
    instant = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(microseconds=micros)
    return instant.strftime("%Y-%m-%dT%H:%M:%S") + (f".{instant.microsecond:06d}" if instant.microsecond else "") + "Z"


def _check_estimates(config: DiscoveryConfig) -> None:
    """Refuses a bad ``--estimate-frequencies`` (with ``--window`` too: each released window is
    estimated, ``job.windowed``)."""
    value = config.estimate_frequencies
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 < value < float("inf")):
        raise ValueError(f"--estimate-frequencies must be a positive epsilon, got {value!r}")


def _check_deny_list(config: DiscoveryConfig) -> None:
    """Refuses ``--deny-list`` with ``--window`` (not built there) and with a protocol whose
    vote it was not written for (TrieHH and TrieHH++ only)."""
    if not config.deny_list:
        return
    if isinstance(config.deny_list, str) or not all(isinstance(p, str) for p in config.deny_list):
        raise ValueError(f"--deny-list must be a tuple of paths, got {config.deny_list!r}")
    if config.window is not None:
        raise ValueError("--deny-list is not available with --window yet: leave it out, or run "
                         "discover without --window")
    if config.protocol not in (TRIEHH, TRIEHH_PP):
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
    if protocol != SAMPLE_THRESHOLD:
        return
    for name, why in _NOT_FOR_WHOLE_ITEMS:
        if getattr(config, name) != BY_NAME[name].default:
            raise ValueError(f"{BY_NAME[name].flag} {why}; --protocol sample-threshold releases whole "
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


def _keyed_values(config: DiscoveryConfig, skip: Sequence[str] = ()) -> Dict[str, Any]:
    """Every keyed setting's value by name, but ``skip`` and those omitted at their default."""
    return {item.name: getattr(config, item.name) for item in SETTINGS
            if item.keyed and item.name not in skip
            and not (item.name in _IDENTITY_OMITS_DEFAULT and getattr(config, item.name) == item.default)}


def _is_local(path: str) -> bool:
    return "://" not in path


def _canonical_identity(values: Dict[str, Any]) -> Dict[str, Any]:
    """Identity values with the input pattern and the output in their canonical forms."""
    values = dict(values)
    if isinstance(values.get("input_pattern"), str):
        values["input_pattern"] = canonical_pattern(values["input_pattern"])
    if isinstance(values.get("output_dir"), str):
        values["output_dir"] = canonical_path(values["output_dir"])
    return values


def _identity_values(identity: str) -> Dict[str, Any]:
    """A recorded identity's values, paths canonical ({} for none)."""
    return _canonical_identity(json.loads(identity)) if identity else {}


def _state_value(state: state_pb2.JobState, path: str) -> Any:
    value: Any = state
    for part in path.split("."):
        value = getattr(value, part)
    return value


SETTINGS: Tuple[Setting, ...] = tuple(
    Setting(name=f.name, **{**f.metadata["setting"], "key": f.metadata["setting"]["key"] or
                            f.metadata["setting"]["flag"].lstrip("-").replace("-", "_")})
    for f in dataclasses.fields(DiscoveryConfig)
)
BY_NAME: Dict[str, Setting] = {item.name: item for item in SETTINGS}


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
