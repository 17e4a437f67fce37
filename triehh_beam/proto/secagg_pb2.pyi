from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SecAggMember(_message.Message):
    __slots__ = ("index", "cipher_public_key", "mask_public_key")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    CIPHER_PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    MASK_PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    index: int
    cipher_public_key: bytes
    mask_public_key: bytes
    def __init__(self, index: _Optional[int] = ..., cipher_public_key: _Optional[bytes] = ..., mask_public_key: _Optional[bytes] = ...) -> None: ...

class SecAggCiphertext(_message.Message):
    __slots__ = ("peer", "ciphertext")
    PEER_FIELD_NUMBER: _ClassVar[int]
    CIPHERTEXT_FIELD_NUMBER: _ClassVar[int]
    peer: int
    ciphertext: bytes
    def __init__(self, peer: _Optional[int] = ..., ciphertext: _Optional[bytes] = ...) -> None: ...

class SecAggUnmaskShare(_message.Message):
    __slots__ = ("owner", "kind", "share")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        KIND_UNSPECIFIED: _ClassVar[SecAggUnmaskShare.Kind]
        SELF_MASK: _ClassVar[SecAggUnmaskShare.Kind]
        MASK_KEY: _ClassVar[SecAggUnmaskShare.Kind]
    KIND_UNSPECIFIED: SecAggUnmaskShare.Kind
    SELF_MASK: SecAggUnmaskShare.Kind
    MASK_KEY: SecAggUnmaskShare.Kind
    OWNER_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    SHARE_FIELD_NUMBER: _ClassVar[int]
    owner: int
    kind: SecAggUnmaskShare.Kind
    share: bytes
    def __init__(self, owner: _Optional[int] = ..., kind: _Optional[_Union[SecAggUnmaskShare.Kind, str]] = ..., share: _Optional[bytes] = ...) -> None: ...

class SecAggRequest(_message.Message):
    __slots__ = ("schema_version", "job_id", "round_index", "token", "setup", "roster", "inbox", "survivors")
    class Setup(_message.Message):
        __slots__ = ("cohort", "index", "size", "threshold", "alphabet", "slots", "invitation")
        COHORT_FIELD_NUMBER: _ClassVar[int]
        INDEX_FIELD_NUMBER: _ClassVar[int]
        SIZE_FIELD_NUMBER: _ClassVar[int]
        THRESHOLD_FIELD_NUMBER: _ClassVar[int]
        ALPHABET_FIELD_NUMBER: _ClassVar[int]
        SLOTS_FIELD_NUMBER: _ClassVar[int]
        INVITATION_FIELD_NUMBER: _ClassVar[int]
        cohort: int
        index: int
        size: int
        threshold: int
        alphabet: _containers.RepeatedScalarFieldContainer[bytes]
        slots: int
        invitation: bytes
        def __init__(self, cohort: _Optional[int] = ..., index: _Optional[int] = ..., size: _Optional[int] = ..., threshold: _Optional[int] = ..., alphabet: _Optional[_Iterable[bytes]] = ..., slots: _Optional[int] = ..., invitation: _Optional[bytes] = ...) -> None: ...
    class Roster(_message.Message):
        __slots__ = ("members",)
        MEMBERS_FIELD_NUMBER: _ClassVar[int]
        members: _containers.RepeatedCompositeFieldContainer[SecAggMember]
        def __init__(self, members: _Optional[_Iterable[_Union[SecAggMember, _Mapping]]] = ...) -> None: ...
    class Inbox(_message.Message):
        __slots__ = ("shares",)
        SHARES_FIELD_NUMBER: _ClassVar[int]
        shares: _containers.RepeatedCompositeFieldContainer[SecAggCiphertext]
        def __init__(self, shares: _Optional[_Iterable[_Union[SecAggCiphertext, _Mapping]]] = ...) -> None: ...
    class Survivors(_message.Message):
        __slots__ = ("indices",)
        INDICES_FIELD_NUMBER: _ClassVar[int]
        indices: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, indices: _Optional[_Iterable[int]] = ...) -> None: ...
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_INDEX_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    SETUP_FIELD_NUMBER: _ClassVar[int]
    ROSTER_FIELD_NUMBER: _ClassVar[int]
    INBOX_FIELD_NUMBER: _ClassVar[int]
    SURVIVORS_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    job_id: str
    round_index: int
    token: bytes
    setup: SecAggRequest.Setup
    roster: SecAggRequest.Roster
    inbox: SecAggRequest.Inbox
    survivors: SecAggRequest.Survivors
    def __init__(self, schema_version: _Optional[int] = ..., job_id: _Optional[str] = ..., round_index: _Optional[int] = ..., token: _Optional[bytes] = ..., setup: _Optional[_Union[SecAggRequest.Setup, _Mapping]] = ..., roster: _Optional[_Union[SecAggRequest.Roster, _Mapping]] = ..., inbox: _Optional[_Union[SecAggRequest.Inbox, _Mapping]] = ..., survivors: _Optional[_Union[SecAggRequest.Survivors, _Mapping]] = ...) -> None: ...

class SecAggReport(_message.Message):
    __slots__ = ("schema_version", "job_id", "round_index", "token", "keys", "shares", "masked", "unmask")
    class Keys(_message.Message):
        __slots__ = ("cipher_public_key", "mask_public_key")
        CIPHER_PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
        MASK_PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
        cipher_public_key: bytes
        mask_public_key: bytes
        def __init__(self, cipher_public_key: _Optional[bytes] = ..., mask_public_key: _Optional[bytes] = ...) -> None: ...
    class Shares(_message.Message):
        __slots__ = ("shares",)
        SHARES_FIELD_NUMBER: _ClassVar[int]
        shares: _containers.RepeatedCompositeFieldContainer[SecAggCiphertext]
        def __init__(self, shares: _Optional[_Iterable[_Union[SecAggCiphertext, _Mapping]]] = ...) -> None: ...
    class Masked(_message.Message):
        __slots__ = ("vector",)
        VECTOR_FIELD_NUMBER: _ClassVar[int]
        vector: bytes
        def __init__(self, vector: _Optional[bytes] = ...) -> None: ...
    class Unmask(_message.Message):
        __slots__ = ("shares",)
        SHARES_FIELD_NUMBER: _ClassVar[int]
        shares: _containers.RepeatedCompositeFieldContainer[SecAggUnmaskShare]
        def __init__(self, shares: _Optional[_Iterable[_Union[SecAggUnmaskShare, _Mapping]]] = ...) -> None: ...
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_INDEX_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    SHARES_FIELD_NUMBER: _ClassVar[int]
    MASKED_FIELD_NUMBER: _ClassVar[int]
    UNMASK_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    job_id: str
    round_index: int
    token: bytes
    keys: SecAggReport.Keys
    shares: SecAggReport.Shares
    masked: SecAggReport.Masked
    unmask: SecAggReport.Unmask
    def __init__(self, schema_version: _Optional[int] = ..., job_id: _Optional[str] = ..., round_index: _Optional[int] = ..., token: _Optional[bytes] = ..., keys: _Optional[_Union[SecAggReport.Keys, _Mapping]] = ..., shares: _Optional[_Union[SecAggReport.Shares, _Mapping]] = ..., masked: _Optional[_Union[SecAggReport.Masked, _Mapping]] = ..., unmask: _Optional[_Union[SecAggReport.Unmask, _Mapping]] = ...) -> None: ...
