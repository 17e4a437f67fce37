from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DeviceRecord(_message.Message):
    __slots__ = ("user_id", "text", "data", "number", "count")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    text: str
    data: bytes
    number: int
    count: int
    def __init__(self, user_id: _Optional[str] = ..., text: _Optional[str] = ..., data: _Optional[bytes] = ..., number: _Optional[int] = ..., count: _Optional[int] = ...) -> None: ...

class DeviceRecords(_message.Message):
    __slots__ = ("records", "schema_version")
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[DeviceRecord]
    schema_version: int
    def __init__(self, records: _Optional[_Iterable[_Union[DeviceRecord, _Mapping]]] = ..., schema_version: _Optional[int] = ...) -> None: ...
