from triehh_beam.proto import trie_pb2 as _trie_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Prefix(_message.Message):
    __slots__ = ("units",)
    UNITS_FIELD_NUMBER: _ClassVar[int]
    units: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, units: _Optional[_Iterable[bytes]] = ...) -> None: ...

class FrontierBroadcast(_message.Message):
    __slots__ = ("schema_version", "round_index", "encoding", "prefixes", "prefix_count")
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    ROUND_INDEX_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    PREFIXES_FIELD_NUMBER: _ClassVar[int]
    PREFIX_COUNT_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    round_index: int
    encoding: _trie_pb2.Encoding
    prefixes: _containers.RepeatedCompositeFieldContainer[Prefix]
    prefix_count: int
    def __init__(self, schema_version: _Optional[int] = ..., round_index: _Optional[int] = ..., encoding: _Optional[_Union[_trie_pb2.Encoding, _Mapping]] = ..., prefixes: _Optional[_Iterable[_Union[Prefix, _Mapping]]] = ..., prefix_count: _Optional[int] = ...) -> None: ...

class Vote(_message.Message):
    __slots__ = ("schema_version", "round_index", "prefix")
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    ROUND_INDEX_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    round_index: int
    prefix: Prefix
    def __init__(self, schema_version: _Optional[int] = ..., round_index: _Optional[int] = ..., prefix: _Optional[_Union[Prefix, _Mapping]] = ...) -> None: ...
