from triehh_beam.proto import trie_pb2 as _trie_pb2
from triehh_beam.proto import vote_pb2 as _vote_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PrivacyPlan(_message.Message):
    __slots__ = ("rule", "population", "max_length", "target_epsilon", "target_delta", "theta", "gamma", "batch_size", "epsilon", "delta", "no_guarantee", "public_population", "protocol", "alpha", "sample_probability", "round_epsilon", "round_delta", "accounting", "basic_delta", "pld_delta", "composition", "estimate_epsilon", "max_items_per_user", "selection_share", "alphabet", "false_prefixes")
    RULE_FIELD_NUMBER: _ClassVar[int]
    POPULATION_FIELD_NUMBER: _ClassVar[int]
    MAX_LENGTH_FIELD_NUMBER: _ClassVar[int]
    TARGET_EPSILON_FIELD_NUMBER: _ClassVar[int]
    TARGET_DELTA_FIELD_NUMBER: _ClassVar[int]
    THETA_FIELD_NUMBER: _ClassVar[int]
    GAMMA_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    NO_GUARANTEE_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_POPULATION_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    ALPHA_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_PROBABILITY_FIELD_NUMBER: _ClassVar[int]
    ROUND_EPSILON_FIELD_NUMBER: _ClassVar[int]
    ROUND_DELTA_FIELD_NUMBER: _ClassVar[int]
    ACCOUNTING_FIELD_NUMBER: _ClassVar[int]
    BASIC_DELTA_FIELD_NUMBER: _ClassVar[int]
    PLD_DELTA_FIELD_NUMBER: _ClassVar[int]
    COMPOSITION_FIELD_NUMBER: _ClassVar[int]
    ESTIMATE_EPSILON_FIELD_NUMBER: _ClassVar[int]
    MAX_ITEMS_PER_USER_FIELD_NUMBER: _ClassVar[int]
    SELECTION_SHARE_FIELD_NUMBER: _ClassVar[int]
    ALPHABET_FIELD_NUMBER: _ClassVar[int]
    FALSE_PREFIXES_FIELD_NUMBER: _ClassVar[int]
    rule: str
    population: int
    max_length: int
    target_epsilon: float
    target_delta: float
    theta: int
    gamma: float
    batch_size: int
    epsilon: float
    delta: float
    no_guarantee: bool
    public_population: int
    protocol: str
    alpha: float
    sample_probability: float
    round_epsilon: float
    round_delta: float
    accounting: str
    basic_delta: float
    pld_delta: float
    composition: str
    estimate_epsilon: float
    max_items_per_user: int
    selection_share: float
    alphabet: str
    false_prefixes: float
    def __init__(self, rule: _Optional[str] = ..., population: _Optional[int] = ..., max_length: _Optional[int] = ..., target_epsilon: _Optional[float] = ..., target_delta: _Optional[float] = ..., theta: _Optional[int] = ..., gamma: _Optional[float] = ..., batch_size: _Optional[int] = ..., epsilon: _Optional[float] = ..., delta: _Optional[float] = ..., no_guarantee: _Optional[bool] = ..., public_population: _Optional[int] = ..., protocol: _Optional[str] = ..., alpha: _Optional[float] = ..., sample_probability: _Optional[float] = ..., round_epsilon: _Optional[float] = ..., round_delta: _Optional[float] = ..., accounting: _Optional[str] = ..., basic_delta: _Optional[float] = ..., pld_delta: _Optional[float] = ..., composition: _Optional[str] = ..., estimate_epsilon: _Optional[float] = ..., max_items_per_user: _Optional[int] = ..., selection_share: _Optional[float] = ..., alphabet: _Optional[str] = ..., false_prefixes: _Optional[float] = ...) -> None: ...

class InputSpec(_message.Message):
    __slots__ = ("file_pattern", "format", "user_column", "item_column", "count_column", "bytes_encoding", "max_user_bytes", "max_item_bytes", "normalise_user_ids", "query")
    FILE_PATTERN_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    USER_COLUMN_FIELD_NUMBER: _ClassVar[int]
    ITEM_COLUMN_FIELD_NUMBER: _ClassVar[int]
    COUNT_COLUMN_FIELD_NUMBER: _ClassVar[int]
    BYTES_ENCODING_FIELD_NUMBER: _ClassVar[int]
    MAX_USER_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_ITEM_BYTES_FIELD_NUMBER: _ClassVar[int]
    NORMALISE_USER_IDS_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    file_pattern: str
    format: str
    user_column: str
    item_column: str
    count_column: str
    bytes_encoding: str
    max_user_bytes: int
    max_item_bytes: int
    normalise_user_ids: bool
    query: str
    def __init__(self, file_pattern: _Optional[str] = ..., format: _Optional[str] = ..., user_column: _Optional[str] = ..., item_column: _Optional[str] = ..., count_column: _Optional[str] = ..., bytes_encoding: _Optional[str] = ..., max_user_bytes: _Optional[int] = ..., max_item_bytes: _Optional[int] = ..., normalise_user_ids: _Optional[bool] = ..., query: _Optional[str] = ...) -> None: ...

class InputFile(_message.Message):
    __slots__ = ("path", "size_bytes", "last_updated", "generation")
    PATH_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    LAST_UPDATED_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    path: str
    size_bytes: int
    last_updated: float
    generation: int
    def __init__(self, path: _Optional[str] = ..., size_bytes: _Optional[int] = ..., last_updated: _Optional[float] = ..., generation: _Optional[int] = ...) -> None: ...

class InputSnapshot(_message.Message):
    __slots__ = ("files", "records", "as_of_millis")
    FILES_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    AS_OF_MILLIS_FIELD_NUMBER: _ClassVar[int]
    files: _containers.RepeatedCompositeFieldContainer[InputFile]
    records: int
    as_of_millis: int
    def __init__(self, files: _Optional[_Iterable[_Union[InputFile, _Mapping]]] = ..., records: _Optional[int] = ..., as_of_millis: _Optional[int] = ...) -> None: ...

class RoundConfig(_message.Message):
    __slots__ = ("round_index", "theta", "batch_size", "population", "encoding", "truncate_long_items")
    ROUND_INDEX_FIELD_NUMBER: _ClassVar[int]
    THETA_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    POPULATION_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    TRUNCATE_LONG_ITEMS_FIELD_NUMBER: _ClassVar[int]
    round_index: int
    theta: int
    batch_size: int
    population: int
    encoding: _trie_pb2.Encoding
    truncate_long_items: bool
    def __init__(self, round_index: _Optional[int] = ..., theta: _Optional[int] = ..., batch_size: _Optional[int] = ..., population: _Optional[int] = ..., encoding: _Optional[_Union[_trie_pb2.Encoding, _Mapping]] = ..., truncate_long_items: _Optional[bool] = ...) -> None: ...

class RoundSummary(_message.Message):
    __slots__ = ("round_index", "frontier_size", "prefixes_kept", "counters", "elapsed_seconds")
    class CountersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    ROUND_INDEX_FIELD_NUMBER: _ClassVar[int]
    FRONTIER_SIZE_FIELD_NUMBER: _ClassVar[int]
    PREFIXES_KEPT_FIELD_NUMBER: _ClassVar[int]
    COUNTERS_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_SECONDS_FIELD_NUMBER: _ClassVar[int]
    round_index: int
    frontier_size: int
    prefixes_kept: int
    counters: _containers.ScalarMap[str, int]
    elapsed_seconds: float
    def __init__(self, round_index: _Optional[int] = ..., frontier_size: _Optional[int] = ..., prefixes_kept: _Optional[int] = ..., counters: _Optional[_Mapping[str, int]] = ..., elapsed_seconds: _Optional[float] = ...) -> None: ...

class FederatedRound(_message.Message):
    __slots__ = ("round_index", "closed_by", "close_micros", "frontier_size", "selected", "goal", "labels", "closed_at", "kept", "targets", "secure_aggregation")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class SecureAggregationEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    ROUND_INDEX_FIELD_NUMBER: _ClassVar[int]
    CLOSED_BY_FIELD_NUMBER: _ClassVar[int]
    CLOSE_MICROS_FIELD_NUMBER: _ClassVar[int]
    FRONTIER_SIZE_FIELD_NUMBER: _ClassVar[int]
    SELECTED_FIELD_NUMBER: _ClassVar[int]
    GOAL_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    CLOSED_AT_FIELD_NUMBER: _ClassVar[int]
    KEPT_FIELD_NUMBER: _ClassVar[int]
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    SECURE_AGGREGATION_FIELD_NUMBER: _ClassVar[int]
    round_index: int
    closed_by: str
    close_micros: int
    frontier_size: int
    selected: int
    goal: int
    labels: _containers.ScalarMap[str, int]
    closed_at: str
    kept: _containers.RepeatedCompositeFieldContainer[_vote_pb2.Prefix]
    targets: int
    secure_aggregation: _containers.ScalarMap[str, int]
    def __init__(self, round_index: _Optional[int] = ..., closed_by: _Optional[str] = ..., close_micros: _Optional[int] = ..., frontier_size: _Optional[int] = ..., selected: _Optional[int] = ..., goal: _Optional[int] = ..., labels: _Optional[_Mapping[str, int]] = ..., closed_at: _Optional[str] = ..., kept: _Optional[_Iterable[_Union[_vote_pb2.Prefix, _Mapping]]] = ..., targets: _Optional[int] = ..., secure_aggregation: _Optional[_Mapping[str, int]] = ...) -> None: ...

class FederatedProgress(_message.Message):
    __slots__ = ("registry_sha256", "devices", "rounds", "estimate_round", "after_last_round", "redelivered", "finished_at")
    class AfterLastRoundEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    REGISTRY_SHA256_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_FIELD_NUMBER: _ClassVar[int]
    ESTIMATE_ROUND_FIELD_NUMBER: _ClassVar[int]
    AFTER_LAST_ROUND_FIELD_NUMBER: _ClassVar[int]
    REDELIVERED_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    registry_sha256: str
    devices: int
    rounds: _containers.RepeatedCompositeFieldContainer[FederatedRound]
    estimate_round: FederatedRound
    after_last_round: _containers.ScalarMap[str, int]
    redelivered: int
    finished_at: str
    def __init__(self, registry_sha256: _Optional[str] = ..., devices: _Optional[int] = ..., rounds: _Optional[_Iterable[_Union[FederatedRound, _Mapping]]] = ..., estimate_round: _Optional[_Union[FederatedRound, _Mapping]] = ..., after_last_round: _Optional[_Mapping[str, int]] = ..., redelivered: _Optional[int] = ..., finished_at: _Optional[str] = ...) -> None: ...

class JobState(_message.Message):
    __slots__ = ("schema_version", "written_by", "job_id", "secret_seed", "input", "plan", "truncate_long_items", "trie", "rounds_completed", "rounds", "finished", "stop_reason", "created_at", "census_counters", "ledger", "input_snapshot", "sampling_identity", "samples", "estimates", "deny_list", "release", "release_nonce", "ledger_record", "release_charged", "noisy_rounds", "federated")
    class CensusCountersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    WRITTEN_BY_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SECRET_SEED_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    PLAN_FIELD_NUMBER: _ClassVar[int]
    TRUNCATE_LONG_ITEMS_FIELD_NUMBER: _ClassVar[int]
    TRIE_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_COMPLETED_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    STOP_REASON_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    CENSUS_COUNTERS_FIELD_NUMBER: _ClassVar[int]
    LEDGER_FIELD_NUMBER: _ClassVar[int]
    INPUT_SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_IDENTITY_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    ESTIMATES_FIELD_NUMBER: _ClassVar[int]
    DENY_LIST_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    RELEASE_NONCE_FIELD_NUMBER: _ClassVar[int]
    LEDGER_RECORD_FIELD_NUMBER: _ClassVar[int]
    RELEASE_CHARGED_FIELD_NUMBER: _ClassVar[int]
    NOISY_ROUNDS_FIELD_NUMBER: _ClassVar[int]
    FEDERATED_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    written_by: str
    job_id: str
    secret_seed: bytes
    input: InputSpec
    plan: PrivacyPlan
    truncate_long_items: bool
    trie: _trie_pb2.Trie
    rounds_completed: int
    rounds: _containers.RepeatedCompositeFieldContainer[RoundSummary]
    finished: bool
    stop_reason: str
    created_at: str
    census_counters: _containers.ScalarMap[str, int]
    ledger: str
    input_snapshot: InputSnapshot
    sampling_identity: str
    samples: SampleSet
    estimates: FrequencyEstimates
    deny_list: DenyList
    release: WholeItemRelease
    release_nonce: bytes
    ledger_record: str
    release_charged: bool
    noisy_rounds: NoisyRounds
    federated: FederatedProgress
    def __init__(self, schema_version: _Optional[int] = ..., written_by: _Optional[str] = ..., job_id: _Optional[str] = ..., secret_seed: _Optional[bytes] = ..., input: _Optional[_Union[InputSpec, _Mapping]] = ..., plan: _Optional[_Union[PrivacyPlan, _Mapping]] = ..., truncate_long_items: _Optional[bool] = ..., trie: _Optional[_Union[_trie_pb2.Trie, _Mapping]] = ..., rounds_completed: _Optional[int] = ..., rounds: _Optional[_Iterable[_Union[RoundSummary, _Mapping]]] = ..., finished: _Optional[bool] = ..., stop_reason: _Optional[str] = ..., created_at: _Optional[str] = ..., census_counters: _Optional[_Mapping[str, int]] = ..., ledger: _Optional[str] = ..., input_snapshot: _Optional[_Union[InputSnapshot, _Mapping]] = ..., sampling_identity: _Optional[str] = ..., samples: _Optional[_Union[SampleSet, _Mapping]] = ..., estimates: _Optional[_Union[FrequencyEstimates, _Mapping]] = ..., deny_list: _Optional[_Union[DenyList, _Mapping]] = ..., release: _Optional[_Union[WholeItemRelease, _Mapping]] = ..., release_nonce: _Optional[bytes] = ..., ledger_record: _Optional[str] = ..., release_charged: _Optional[bool] = ..., noisy_rounds: _Optional[_Union[NoisyRounds, _Mapping]] = ..., federated: _Optional[_Union[FederatedProgress, _Mapping]] = ...) -> None: ...

class DenyList(_message.Message):
    __slots__ = ("digest", "items", "files", "items_digest")
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    ITEMS_DIGEST_FIELD_NUMBER: _ClassVar[int]
    digest: str
    items: int
    files: _containers.RepeatedScalarFieldContainer[str]
    items_digest: str
    def __init__(self, digest: _Optional[str] = ..., items: _Optional[int] = ..., files: _Optional[_Iterable[str]] = ..., items_digest: _Optional[str] = ...) -> None: ...

class WholeItemRelease(_message.Message):
    __slots__ = ("items", "users_sampled", "records_ranked", "counters", "elapsed_seconds")
    class Item(_message.Message):
        __slots__ = ("units", "count", "noisy_count")
        UNITS_FIELD_NUMBER: _ClassVar[int]
        COUNT_FIELD_NUMBER: _ClassVar[int]
        NOISY_COUNT_FIELD_NUMBER: _ClassVar[int]
        units: _containers.RepeatedScalarFieldContainer[bytes]
        count: int
        noisy_count: int
        def __init__(self, units: _Optional[_Iterable[bytes]] = ..., count: _Optional[int] = ..., noisy_count: _Optional[int] = ...) -> None: ...
    class CountersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    USERS_SAMPLED_FIELD_NUMBER: _ClassVar[int]
    RECORDS_RANKED_FIELD_NUMBER: _ClassVar[int]
    COUNTERS_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_SECONDS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[WholeItemRelease.Item]
    users_sampled: int
    records_ranked: int
    counters: _containers.ScalarMap[str, int]
    elapsed_seconds: float
    def __init__(self, items: _Optional[_Iterable[_Union[WholeItemRelease.Item, _Mapping]]] = ..., users_sampled: _Optional[int] = ..., records_ranked: _Optional[int] = ..., counters: _Optional[_Mapping[str, int]] = ..., elapsed_seconds: _Optional[float] = ...) -> None: ...

class NoisyRounds(_message.Message):
    __slots__ = ("rounds",)
    class Prefix(_message.Message):
        __slots__ = ("units", "noisy_count")
        UNITS_FIELD_NUMBER: _ClassVar[int]
        NOISY_COUNT_FIELD_NUMBER: _ClassVar[int]
        units: _containers.RepeatedScalarFieldContainer[bytes]
        noisy_count: int
        def __init__(self, units: _Optional[_Iterable[bytes]] = ..., noisy_count: _Optional[int] = ...) -> None: ...
    class Round(_message.Message):
        __slots__ = ("round_index", "threshold", "candidates", "kept")
        ROUND_INDEX_FIELD_NUMBER: _ClassVar[int]
        THRESHOLD_FIELD_NUMBER: _ClassVar[int]
        CANDIDATES_FIELD_NUMBER: _ClassVar[int]
        KEPT_FIELD_NUMBER: _ClassVar[int]
        round_index: int
        threshold: int
        candidates: int
        kept: _containers.RepeatedCompositeFieldContainer[NoisyRounds.Prefix]
        def __init__(self, round_index: _Optional[int] = ..., threshold: _Optional[int] = ..., candidates: _Optional[int] = ..., kept: _Optional[_Iterable[_Union[NoisyRounds.Prefix, _Mapping]]] = ...) -> None: ...
    ROUNDS_FIELD_NUMBER: _ClassVar[int]
    rounds: _containers.RepeatedCompositeFieldContainer[NoisyRounds.Round]
    def __init__(self, rounds: _Optional[_Iterable[_Union[NoisyRounds.Round, _Mapping]]] = ...) -> None: ...

class FrequencyEstimates(_message.Message):
    __slots__ = ("epsilon", "half_width", "items")
    class Estimate(_message.Message):
        __slots__ = ("units", "estimate")
        UNITS_FIELD_NUMBER: _ClassVar[int]
        ESTIMATE_FIELD_NUMBER: _ClassVar[int]
        units: _containers.RepeatedScalarFieldContainer[bytes]
        estimate: int
        def __init__(self, units: _Optional[_Iterable[bytes]] = ..., estimate: _Optional[int] = ...) -> None: ...
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    HALF_WIDTH_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    epsilon: float
    half_width: int
    items: _containers.RepeatedCompositeFieldContainer[FrequencyEstimates.Estimate]
    def __init__(self, epsilon: _Optional[float] = ..., half_width: _Optional[int] = ..., items: _Optional[_Iterable[_Union[FrequencyEstimates.Estimate, _Mapping]]] = ...) -> None: ...

class SampleSet(_message.Message):
    __slots__ = ("dir", "complete", "users_sampled", "records_ranked", "counters", "deleted", "elapsed_seconds")
    class CountersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    DIR_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    USERS_SAMPLED_FIELD_NUMBER: _ClassVar[int]
    RECORDS_RANKED_FIELD_NUMBER: _ClassVar[int]
    COUNTERS_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_SECONDS_FIELD_NUMBER: _ClassVar[int]
    dir: str
    complete: bool
    users_sampled: _containers.RepeatedScalarFieldContainer[int]
    records_ranked: int
    counters: _containers.ScalarMap[str, int]
    deleted: bool
    elapsed_seconds: float
    def __init__(self, dir: _Optional[str] = ..., complete: _Optional[bool] = ..., users_sampled: _Optional[_Iterable[int]] = ..., records_ranked: _Optional[int] = ..., counters: _Optional[_Mapping[str, int]] = ..., deleted: _Optional[bool] = ..., elapsed_seconds: _Optional[float] = ...) -> None: ...
