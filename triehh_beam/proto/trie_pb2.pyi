from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Encoding(_message.Message):
    __slots__ = ("kind", "unit_size", "max_length", "case_fold", "int_bits", "tokenizer")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        KIND_UNSPECIFIED: _ClassVar[Encoding.Kind]
        TEXT: _ClassVar[Encoding.Kind]
        BYTES: _ClassVar[Encoding.Kind]
        INT: _ClassVar[Encoding.Kind]
    KIND_UNSPECIFIED: Encoding.Kind
    TEXT: Encoding.Kind
    BYTES: Encoding.Kind
    INT: Encoding.Kind
    KIND_FIELD_NUMBER: _ClassVar[int]
    UNIT_SIZE_FIELD_NUMBER: _ClassVar[int]
    MAX_LENGTH_FIELD_NUMBER: _ClassVar[int]
    CASE_FOLD_FIELD_NUMBER: _ClassVar[int]
    INT_BITS_FIELD_NUMBER: _ClassVar[int]
    TOKENIZER_FIELD_NUMBER: _ClassVar[int]
    kind: Encoding.Kind
    unit_size: int
    max_length: int
    case_fold: bool
    int_bits: int
    tokenizer: str
    def __init__(self, kind: _Optional[_Union[Encoding.Kind, str]] = ..., unit_size: _Optional[int] = ..., max_length: _Optional[int] = ..., case_fold: _Optional[bool] = ..., int_bits: _Optional[int] = ..., tokenizer: _Optional[str] = ...) -> None: ...

class Trie(_message.Message):
    __slots__ = ("schema_version", "encoding", "levels", "depth")
    class Level(_message.Message):
        __slots__ = ("parents", "units")
        PARENTS_FIELD_NUMBER: _ClassVar[int]
        UNITS_FIELD_NUMBER: _ClassVar[int]
        parents: _containers.RepeatedScalarFieldContainer[int]
        units: _containers.RepeatedScalarFieldContainer[bytes]
        def __init__(self, parents: _Optional[_Iterable[int]] = ..., units: _Optional[_Iterable[bytes]] = ...) -> None: ...
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    LEVELS_FIELD_NUMBER: _ClassVar[int]
    DEPTH_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    encoding: Encoding
    levels: _containers.RepeatedCompositeFieldContainer[Trie.Level]
    depth: int
    def __init__(self, schema_version: _Optional[int] = ..., encoding: _Optional[_Union[Encoding, _Mapping]] = ..., levels: _Optional[_Iterable[_Union[Trie.Level, _Mapping]]] = ..., depth: _Optional[int] = ...) -> None: ...
