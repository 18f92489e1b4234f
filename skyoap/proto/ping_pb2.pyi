from skyoap.proto import common_pb2 as _common_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class ServiceInstancePingPkg(_message.Message):
    __slots__ = ("serviceInstanceId", "time", "serviceInstanceUUID")
    SERVICEINSTANCEID_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    SERVICEINSTANCEUUID_FIELD_NUMBER: _ClassVar[int]
    serviceInstanceId: int
    time: int
    serviceInstanceUUID: str
    def __init__(self, serviceInstanceId: _Optional[int] = ..., time: _Optional[int] = ..., serviceInstanceUUID: _Optional[str] = ...) -> None: ...
