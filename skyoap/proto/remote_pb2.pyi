from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RemoteBatch(_message.Message):
    __slots__ = ("nextWorkerIds", "streamDataIds", "stringCounts", "longCounts", "strings", "longs", "senderId", "sequence", "incarnation")
    NEXTWORKERIDS_FIELD_NUMBER: _ClassVar[int]
    STREAMDATAIDS_FIELD_NUMBER: _ClassVar[int]
    STRINGCOUNTS_FIELD_NUMBER: _ClassVar[int]
    LONGCOUNTS_FIELD_NUMBER: _ClassVar[int]
    STRINGS_FIELD_NUMBER: _ClassVar[int]
    LONGS_FIELD_NUMBER: _ClassVar[int]
    SENDERID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    nextWorkerIds: _containers.RepeatedScalarFieldContainer[int]
    streamDataIds: _containers.RepeatedScalarFieldContainer[int]
    stringCounts: _containers.RepeatedScalarFieldContainer[int]
    longCounts: _containers.RepeatedScalarFieldContainer[int]
    strings: _containers.RepeatedScalarFieldContainer[str]
    longs: _containers.RepeatedScalarFieldContainer[int]
    senderId: str
    sequence: int
    incarnation: str
    def __init__(self, nextWorkerIds: _Optional[_Iterable[int]] = ..., streamDataIds: _Optional[_Iterable[int]] = ..., stringCounts: _Optional[_Iterable[int]] = ..., longCounts: _Optional[_Iterable[int]] = ..., strings: _Optional[_Iterable[str]] = ..., longs: _Optional[_Iterable[int]] = ..., senderId: _Optional[str] = ..., sequence: _Optional[int] = ..., incarnation: _Optional[str] = ...) -> None: ...

class RemoteMessage(_message.Message):
    __slots__ = ("nextWorkerId", "streamDataId", "remoteData")
    NEXTWORKERID_FIELD_NUMBER: _ClassVar[int]
    STREAMDATAID_FIELD_NUMBER: _ClassVar[int]
    REMOTEDATA_FIELD_NUMBER: _ClassVar[int]
    nextWorkerId: int
    streamDataId: int
    remoteData: RemoteData
    def __init__(self, nextWorkerId: _Optional[int] = ..., streamDataId: _Optional[int] = ..., remoteData: _Optional[_Union[RemoteData, _Mapping]] = ...) -> None: ...

class RemoteData(_message.Message):
    __slots__ = ("dataStrings", "dataLongs", "dataDoubles")
    DATASTRINGS_FIELD_NUMBER: _ClassVar[int]
    DATALONGS_FIELD_NUMBER: _ClassVar[int]
    DATADOUBLES_FIELD_NUMBER: _ClassVar[int]
    dataStrings: _containers.RepeatedScalarFieldContainer[str]
    dataLongs: _containers.RepeatedScalarFieldContainer[int]
    dataDoubles: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, dataStrings: _Optional[_Iterable[str]] = ..., dataLongs: _Optional[_Iterable[int]] = ..., dataDoubles: _Optional[_Iterable[float]] = ...) -> None: ...

class RemoteAck(_message.Message):
    __slots__ = ("received", "rejected", "incarnation")
    RECEIVED_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    received: int
    rejected: int
    incarnation: str
    def __init__(self, received: _Optional[int] = ..., rejected: _Optional[int] = ..., incarnation: _Optional[str] = ...) -> None: ...
