"""The settings of a discovery job as data: ``DiscoverySettings``, one frozen dataclass whose
every field carries its ``Setting`` (flag, parser, help, group, config-file key, where a job's
state records it), the ``SETTINGS`` table derived from those fields, and the views of them that
need no I/O (the item encoder, the reading options, the budget, the resolved directories). The
validated ``DiscoveryConfig`` (``job.settings.config``) is this class with its checks; the identity a
state records and compares is ``job.settings.identity``'s.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Optional, Tuple

from triehh_beam.io.schema import DEFAULT_MAX_ITEM_BYTES, DEFAULT_MAX_USER_BYTES, RecordOptions
from triehh_beam.job.settings import deny_lists
from triehh_beam.job.settings.paths import canonical_path, canonical_pattern
from triehh_beam.job.settings.setting import (Setting, parse_duration, parse_window_range,
                                              read_seed_file, setting)
from triehh_beam.job.state import ledger as ledger_lib
from triehh_beam.protocol.central.noisy_rounds import DEFAULT_ALPHABET, DEFAULT_FALSE_PREFIXES
from triehh_beam.protocol.central.partition_selection import DEFAULT_MAX_ITEMS, DEFAULT_SELECTION_SHARE
from triehh_beam.protocol.items.encoding import ItemEncoder, ItemKind
from triehh_beam.protocol.planning import parameters
from triehh_beam.protocol.planning.sample_threshold_planner import ACCOUNTINGS, BOUND, DEFAULT_ACCOUNTING
from triehh_beam.protocol.protocols import DEFAULT_PROTOCOL, Protocol

__all__ = [
    "BY_NAME",
    "DEFAULT_MAX_BAD_FRACTION",
    "DEFAULT_MAX_UNUSABLE_FRACTION",
    "DiscoverySettings",
    "ENCODING",
    "GROUPS",
    "NOISY_ROUNDS_ACCOUNTING",
    "OPTIMAL_SELECTION",
    "SAMPLE_AND_THRESHOLD",
    "SETTINGS",
    "planned_count_epsilon",
    "recorded_accounting",
]

#: The rule a TrieHH++ (or whole-item) plan records (``planning``): its planner, not one of TrieHH's RULES.
SAMPLE_AND_THRESHOLD = "sample-and-threshold"

# Argument groups of ``triehh discover --help``, in the order they are shown.
GROUPS = (
    "input and output",
    "privacy target",
    "budget of the population (privacy ledger)",
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


#: The accounting a partition-selection plan records: the optimal keep probability, exact by construction.
OPTIMAL_SELECTION = "optimal-selection"


#: What a noisy-rounds job records for --accounting (not its own: the plan's accountant, "pld" or
#: "zcdp", is in plan.accounting; a resume never names --accounting, which it refuses).
NOISY_ROUNDS_ACCOUNTING = "composed"


def recorded_accounting(config: "DiscoverySettings") -> str:
    """The accounting a new job's plan records: the one asked for (exact by default) under
    sample-and-threshold, ``OPTIMAL_SELECTION`` under partition selection, "" under TrieHH
    (Theorem 1 has one)."""
    if Protocol(config.protocol).selects_partitions:
        return OPTIMAL_SELECTION
    if Protocol(config.protocol).noises_rounds:
        return NOISY_ROUNDS_ACCOUNTING
    if Protocol(config.protocol).samples_by_probability:
        return config.accounting or DEFAULT_ACCOUNTING
    return ""


def _recorded_rule(config: "DiscoverySettings") -> str:
    """The rule a job's plan records: TrieHH's rule, "fixed" for expert values, or TrieHH++'s."""
    if Protocol(config.protocol).samples_by_probability:
        return SAMPLE_AND_THRESHOLD
    return config.rule if config.theta is None else "fixed"


def planned_count_epsilon(config: "DiscoverySettings") -> float:
    """The epsilon of the noise on the counts a job's plan records (``plan.estimate_epsilon``):
    --estimate-frequencies, or partition selection's share of --epsilon for its counts."""
    if Protocol(config.protocol).selects_partitions:
        share = config.selection_share
        return 0.0 if share >= 1 else config.epsilon - config.epsilon * share
    return config.estimate_frequencies or 0.0


def _text_or_empty(name: str) -> Callable[["DiscoverySettings"], Any]:
    return lambda config: getattr(config, name) or ""


@dataclasses.dataclass(frozen=True)
class DiscoverySettings:
    """Every setting of a discovery job, as data (each field's ``Setting`` says what it means;
    ``SETTINGS`` lists them). ``DiscoveryConfig`` validates them."""

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
    protocol: Protocol = setting(
        "--protocol", "triehh++ (default): sample-and-threshold, each user sampled with probability "
        "p_s per round and tau votes kept, certified exactly (docs/protocol.md §2); triehh: the "
        "paper's bottom-m samples and Theorem 1's theta (Theorem 1 is unproven for fixed-size "
        "sampling; plans it fails near are refused); sample-threshold: one release of whole items, "
        "each user sampled with probability p_s, items reported by at least tau released with their "
        "count (epsilon <= 1); partition-selection: one release of whole items at the central optimum, "
        "every user contributing up to --max-items-per-user items, each item kept with the optimal "
        "probability for its users, its count noised (docs/protocol.md §7); noisy-rounds: a trie "
        "from every user's vote per round, each candidate of --alphabet's units kept when its count "
        "plus discrete Laplace noise reaches the round's threshold, released with that noisy count "
        "(central only, one job per round; docs/protocol.md §8); --theta, --batch-size and --rule "
        "are TrieHH's",
        _TARGET, default=DEFAULT_PROTOCOL, choices=tuple(p.value for p in Protocol), identity="plan.protocol",
        record=lambda c: Protocol(c.protocol).value, example=Protocol.TRIEHH.value)
    accounting: Optional[str] = setting(
        "--accounting", "how --protocol triehh++ and sample-threshold certify (epsilon, delta): exact "
        "(each release's exact delta, worst case over the other holders; docs/protocol.md §2) or bound "
        "(the paper's closed form, epsilon/L <= 1); recorded in the state, the ledger and the output "
        "(default: exact for a new job; a resumed job keeps the one it started with)",
        _TARGET, default=None, choices=ACCOUNTINGS, identity="plan.accounting", compare="given", keyed=False,
        record=lambda c: recorded_accounting(c),
        mismatch="accounting (state has {theirs!r}, asked {ours!r}; a job resumes under the one it started with)",
        example=BOUND)
    estimate_frequencies: Optional[float] = setting(
        "--estimate-frequencies", "after the rounds, estimate how many users hold each heavy hitter "
        "and frequent prefix: one more pass, each user counted once, two-sided geometric noise of "
        "this epsilon (spent on top of --epsilon: the ledger is charged epsilon + EPSILON_EST, delta "
        "unchanged; docs/protocol.md section 5) (default: none)", _TARGET, default=None,
        parse=float, metavar="EPSILON_EST", identity="plan.estimate_epsilon",
        record=lambda c: planned_count_epsilon(c),
        mismatch="frequency estimates' epsilon (state has {theirs!r}, asked {ours!r}; 0: none)",
        example="1")
    max_items_per_user: int = setting(
        "--max-items-per-user", "--protocol partition-selection: the distinct items each user "
        "contributes at most, drawn by local frequency with a keyed uniform; the selection and the "
        "counts split their epsilon and delta over them (default: %(default)s)", _TARGET,
        default=DEFAULT_MAX_ITEMS, parse=int, metavar="K", identity="plan.max_items_per_user",
        record=lambda c: c.max_items_per_user if Protocol(c.protocol).selects_partitions else 0,
        mismatch="items per user (state has {theirs!r}, asked {ours!r}; 0: not partition selection)",
        example="3")
    selection_share: float = setting(
        "--selection-share", "--protocol partition-selection: the share of --epsilon the selection "
        "spends; the rest adds two-sided geometric noise to the released items' counts (1: items "
        "only, no counts) (default: %(default)s)", _TARGET, default=DEFAULT_SELECTION_SHARE,
        parse=float, metavar="F", identity="plan.selection_share",
        record=lambda c: c.selection_share if Protocol(c.protocol).selects_partitions else 0.0,
        mismatch="selection share (state has {theirs!r}, asked {ours!r}; 0: not partition selection)",
        example="1")
    alphabet: str = setting(
        "--alphabet", "--protocol noisy-rounds: the characters of the public candidates (every frontier "
        "prefix extended by every unit of them, and by the end marker); a vote for a unit with other "
        "characters counts nowhere (default: a-z)", _TARGET, default=DEFAULT_ALPHABET, metavar="CHARS",
        identity="plan.alphabet", record=lambda c: c.alphabet if Protocol(c.protocol).noises_rounds else "",
        mismatch="alphabet (state has {theirs!r}, asked {ours!r}; empty: not noisy rounds)", example="abc")
    false_prefixes: float = setting(
        "--false-prefixes", "--protocol noisy-rounds: the expected prefixes nobody holds that a release "
        "keeps at most; sets each round's threshold (default: %(default)s)", _TARGET,
        default=DEFAULT_FALSE_PREFIXES, parse=float, metavar="F", identity="plan.false_prefixes",
        record=lambda c: c.false_prefixes if Protocol(c.protocol).noises_rounds else 0.0,
        mismatch="expected false prefixes (state has {theirs!r}, asked {ours!r}; 0: not noisy rounds)",
        example="0.5")
    deny_list: Tuple[str, ...] = setting(
        "--deny-list", "earlier runs' heavy_hitters.json (comma-separate several; local or gs://): a "
        "sampled user whose chosen item is on them chooses among its other items, or abstains; the "
        "samples and the privacy spend are unchanged; with --window and in triehh stream, in every window "
        "(README: Deny lists across runs) (default: none)",
        _TARGET, default=(), parse=deny_lists.parse_paths, metavar="FILES", identity="deny_list.digest",
        keyed=False, record=lambda c: c.deny.digest if c.deny else "",
        mismatch="deny list (the state's digest {theirs:.12}, this one's {ours:.12}; empty: none)",
        example="runs/2026-03-01/heavy_hitters.json")
    rule: str = setting(
        "--rule", "TrieHH's parameter rule (default: %(default)s)", _TARGET, default="authors",
        choices=tuple(parameters.RULES), identity="plan.rule", record=_recorded_rule, example="corollary1")
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
        "--tokenize", "split text fields into words (rule: triehh_beam/protocol/items/tokenize.py), each an item",
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
        section="budget", key="ledger", identity="ledger", keyed=False,
        # A resume must be charged (or found charged) in the ledger the job started with.
        mismatch="privacy ledger (state has {theirs!r})",
        record=lambda c: c.resolved_ledger_dir, example="private/ledger")
    budget_epsilon: Optional[float] = setting(
        "--budget-epsilon", "epsilon budget of the population, enforced in --ledger: lifetime, or per "
        "--budget-period (default: unlimited)", _BUDGET,
        default=None, parse=float, section="budget", key="epsilon", example="20")
    budget_delta: Optional[float] = setting(
        "--budget-delta", "delta budget of the population, enforced in --ledger: lifetime, or per "
        "--budget-period (default: unlimited)", _BUDGET,
        default=None, parse=float, section="budget", key="delta", example="1e-7")
    budget_period: Optional[int] = setting(
        "--budget-period", "make --budget-epsilon/--budget-delta a rolling budget: the most spent on "
        "the releases touching any one period of event time (1d: each UTC day; a window's period is "
        "its event-time interval, a batch job's the instant it is charged): the privacy unit becomes "
        "a user per period (default: a lifetime budget)", _BUDGET, default=None, parse=parse_duration,
        metavar="DURATION", section="budget", key="period", example="1d")
    verbose: bool = setting(
        "--verbose", "also show exact private counts (users, votes, dropped rows) in progress lines "
        "and events, marked private, and keep Beam's own log output (silenced on the in-process "
        "runner otherwise): such logs are operator data, never to be published", _OPERATE,
        default=False, parse=None, example="true")
    rounds_per_job: str = setting(
        "--rounds-per-job", "all: every round in one job after the first read, in order, each "
        "round's sample tables voted over the job's workers and its votes combined per prefix, "
        "each level written to the state as its round completes (one job start: what every "
        "runner wants, Dataflow most); 1: one Beam job per round, voted the same way (a job start "
        "per round). Both give the same trie (default: "
        "%(default)s)", _OPERATE, default="all", choices=("1", "all"), example="1")
    keep_samples: bool = setting(
        "--keep-samples", "keep the sampled users' items (a private artefact in the state "
        "directory, deleted when the job ends by default)", _OPERATE, default=False, parse=None,
        example="true")
    worker_budget: int = setting(
        "--worker-budget", "the most rows (records, candidates, sampled rows, user fingerprints "
        "or a round's prefixes) one step of a job holds in memory at once: larger stages spill to "
        "the private state directory or split over workers, and the operator report's "
        "largest_rows_held says what one step held (and each worker's peak memory, "
        "worker_peak_rss_mb); any value gives the same trie (default: %(default)s, a few hundred MB)",
        _OPERATE, default=1 << 22, parse=int, metavar="ROWS", example="1000000")
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
    windows: Optional[Tuple[int, Optional[int]]] = setting(
        "--windows", "the windows released, declared in advance: FROM..TO, RFC 3339 UTC instants "
        "aligned to --window; every window starting in [FROM, TO) is planned, charged and "
        "released, an empty one too (an empty result); FROM.. (triehh stream): every window from "
        "FROM on, for as long as the stream runs; records outside are dropped and counted; "
        "required with --window", _WINDOWS, default=None, parse=parse_window_range, metavar="FROM..TO",
        example="2026-11-23T00:00:00Z..2026-11-24T00:00:00Z")
    timestamp_column: Optional[str] = setting(
        "--timestamp-column", "files only: the column holding each record's event time "
        "(milliseconds since the epoch, RFC 3339, or a Parquet timestamp)", _WINDOWS, default=None,
        metavar="NAME", example="event_time")

    @property
    def encoder(self) -> ItemEncoder:
        """The item encoding these settings describe (raises ValueError for a bad one)."""
        return ItemEncoder(
            kind=ItemKind(self.item_kind),
            unit_size=self.unit_size,
            max_length=self.max_length,
            case_fold=self.case_fold,
            int_bits=self.int_bits if self.item_kind == "int" else None,
            tokenize=self.tokenize,
        )

    @property
    def record_options(self) -> RecordOptions:
        """How records are read and checked (raises ValueError for bad options)."""
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
        return ledger_lib.Budget(self.budget_epsilon, self.budget_delta, self.budget_period)

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
    def source(self) -> str:
        """Where the records come from, in a few words: the input pattern, or "the --query result"."""
        return self.input_pattern or "the --query result"


SETTINGS: Tuple[Setting, ...] = tuple(
    Setting(name=f.name, **{**f.metadata["setting"], "key": f.metadata["setting"]["key"] or
                            f.metadata["setting"]["flag"].lstrip("-").replace("-", "_")})
    for f in dataclasses.fields(DiscoverySettings)
)
BY_NAME: Dict[str, Setting] = {item.name: item for item in SETTINGS}
