from triehh_beam.proto import trie_pb2 as _trie_pb2
from triehh_beam.proto import vote_pb2 as _vote_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RoundAnnouncement(_message.Message):
    __slots__ = ("schema_version", "job_id", "round_index", "encoding", "long_items", "deadline_millis", "report_goal", "frontier_shared", "frontier_unit_lengths", "frontier_units", "frontier_unit_width", "frontier_count")
    class LongItems(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        LONG_ITEMS_UNSPECIFIED: _ClassVar[RoundAnnouncement.LongItems]
        DROP: _ClassVar[RoundAnnouncement.LongItems]
        TRUNCATE: _ClassVar[RoundAnnouncement.LongItems]
    LONG_ITEMS_UNSPECIFIED: RoundAnnouncement.LongItems
    DROP: RoundAnnouncement.LongItems
    TRUNCATE: RoundAnnouncement.LongItems
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_INDEX_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    LONG_ITEMS_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_MILLIS_FIELD_NUMBER: _ClassVar[int]
    REPORT_GOAL_FIELD_NUMBER: _ClassVar[int]
    FRONTIER_SHARED_FIELD_NUMBER: _ClassVar[int]
    FRONTIER_UNIT_LENGTHS_FIELD_NUMBER: _ClassVar[int]
    FRONTIER_UNITS_FIELD_NUMBER: _ClassVar[int]
    FRONTIER_UNIT_WIDTH_FIELD_NUMBER: _ClassVar[int]
    FRONTIER_COUNT_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    job_id: str
    round_index: int
    encoding: _trie_pb2.Encoding
    long_items: RoundAnnouncement.LongItems
    deadline_millis: int
    report_goal: int
    frontier_shared: _containers.RepeatedScalarFieldContainer[int]
    frontier_unit_lengths: _containers.RepeatedScalarFieldContainer[int]
    frontier_units: bytes
    frontier_unit_width: int
    frontier_count: int
    def __init__(self, schema_version: _Optional[int] = ..., job_id: _Optional[str] = ..., round_index: _Optional[int] = ..., encoding: _Optional[_Union[_trie_pb2.Encoding, _Mapping]] = ..., long_items: _Optional[_Union[RoundAnnouncement.LongItems, str]] = ..., deadline_millis: _Optional[int] = ..., report_goal: _Optional[int] = ..., frontier_shared: _Optional[_Iterable[int]] = ..., frontier_unit_lengths: _Optional[_Iterable[int]] = ..., frontier_units: _Optional[bytes] = ..., frontier_unit_width: _Optional[int] = ..., frontier_count: _Optional[int] = ...) -> None: ...

class EstimateAnnouncement(_message.Message):
    __slots__ = ("schema_version", "job_id", "round_index", "encoding", "long_items", "deadline_millis", "report_goal", "targets", "target_count")
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_INDEX_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    LONG_ITEMS_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_MILLIS_FIELD_NUMBER: _ClassVar[int]
    REPORT_GOAL_FIELD_NUMBER: _ClassVar[int]
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    TARGET_COUNT_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    job_id: str
    round_index: int
    encoding: _trie_pb2.Encoding
    long_items: RoundAnnouncement.LongItems
    deadline_millis: int
    report_goal: int
    targets: _containers.RepeatedCompositeFieldContainer[_vote_pb2.Prefix]
    target_count: int
    def __init__(self, schema_version: _Optional[int] = ..., job_id: _Optional[str] = ..., round_index: _Optional[int] = ..., encoding: _Optional[_Union[_trie_pb2.Encoding, _Mapping]] = ..., long_items: _Optional[_Union[RoundAnnouncement.LongItems, str]] = ..., deadline_millis: _Optional[int] = ..., report_goal: _Optional[int] = ..., targets: _Optional[_Iterable[_Union[_vote_pb2.Prefix, _Mapping]]] = ..., target_count: _Optional[int] = ...) -> None: ...

class Invitation(_message.Message):
    __slots__ = ("schema_version", "job_id", "round_index", "device_id", "token", "choice_word")
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_INDEX_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    CHOICE_WORD_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    job_id: str
    round_index: int
    device_id: bytes
    token: bytes
    choice_word: int
    def __init__(self, schema_version: _Optional[int] = ..., job_id: _Optional[str] = ..., round_index: _Optional[int] = ..., device_id: _Optional[bytes] = ..., token: _Optional[bytes] = ..., choice_word: _Optional[int] = ...) -> None: ...

class VoteReport(_message.Message):
    __slots__ = ("schema_version", "job_id", "round_index", "token", "prefix", "abstain")
    class Abstain(_message.Message):
        __slots__ = ()
        def __init__(self) -> None: ...
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_INDEX_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    ABSTAIN_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    job_id: str
    round_index: int
    token: bytes
    prefix: _vote_pb2.Prefix
    abstain: VoteReport.Abstain
    def __init__(self, schema_version: _Optional[int] = ..., job_id: _Optional[str] = ..., round_index: _Optional[int] = ..., token: _Optional[bytes] = ..., prefix: _Optional[_Union[_vote_pb2.Prefix, _Mapping]] = ..., abstain: _Optional[_Union[VoteReport.Abstain, _Mapping]] = ...) -> None: ...
