from skyoap.proto import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Services(_message.Message):
    __slots__ = ("services",)
    SERVICES_FIELD_NUMBER: _ClassVar[int]
    services: _containers.RepeatedCompositeFieldContainer[Service]
    def __init__(self, services: _Optional[_Iterable[_Union[Service, _Mapping]]] = ...) -> None: ...

class Service(_message.Message):
    __slots__ = ("serviceName", "tags", "properties")
    SERVICENAME_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    serviceName: str
    tags: _containers.RepeatedCompositeFieldContainer[_common_pb2.KeyStringValuePair]
    properties: _containers.RepeatedCompositeFieldContainer[_common_pb2.KeyStringValuePair]
    def __init__(self, serviceName: _Optional[str] = ..., tags: _Optional[_Iterable[_Union[_common_pb2.KeyStringValuePair, _Mapping]]] = ..., properties: _Optional[_Iterable[_Union[_common_pb2.KeyStringValuePair, _Mapping]]] = ...) -> None: ...

class ServiceRegisterMapping(_message.Message):
    __slots__ = ("services",)
    SERVICES_FIELD_NUMBER: _ClassVar[int]
    services: _containers.RepeatedCompositeFieldContainer[_common_pb2.KeyIntValuePair]
    def __init__(self, services: _Optional[_Iterable[_Union[_common_pb2.KeyIntValuePair, _Mapping]]] = ...) -> None: ...

class ServiceInstances(_message.Message):
    __slots__ = ("instances",)
    INSTANCES_FIELD_NUMBER: _ClassVar[int]
    instances: _containers.RepeatedCompositeFieldContainer[ServiceInstance]
    def __init__(self, instances: _Optional[_Iterable[_Union[ServiceInstance, _Mapping]]] = ...) -> None: ...

class ServiceInstance(_message.Message):
    __slots__ = ("serviceId", "instanceUUID", "time", "tags", "properties")
    SERVICEID_FIELD_NUMBER: _ClassVar[int]
    INSTANCEUUID_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    serviceId: int
    instanceUUID: str
    time: int
    tags: _containers.RepeatedCompositeFieldContainer[_common_pb2.KeyStringValuePair]
    properties: _containers.RepeatedCompositeFieldContainer[_common_pb2.KeyStringValuePair]
    def __init__(self, serviceId: _Optional[int] = ..., instanceUUID: _Optional[str] = ..., time: _Optional[int] = ..., tags: _Optional[_Iterable[_Union[_common_pb2.KeyStringValuePair, _Mapping]]] = ..., properties: _Optional[_Iterable[_Union[_common_pb2.KeyStringValuePair, _Mapping]]] = ...) -> None: ...

class ServiceInstanceRegisterMapping(_message.Message):
    __slots__ = ("serviceInstances",)
    SERVICEINSTANCES_FIELD_NUMBER: _ClassVar[int]
    serviceInstances: _containers.RepeatedCompositeFieldContainer[_common_pb2.KeyIntValuePair]
    def __init__(self, serviceInstances: _Optional[_Iterable[_Union[_common_pb2.KeyIntValuePair, _Mapping]]] = ...) -> None: ...

class Endpoints(_message.Message):
    __slots__ = ("endpoints",)
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    endpoints: _containers.RepeatedCompositeFieldContainer[Endpoint]
    def __init__(self, endpoints: _Optional[_Iterable[_Union[Endpoint, _Mapping]]] = ...) -> None: ...

class Endpoint(_message.Message):
    __slots__ = ("serviceId", "endpointName")
    SERVICEID_FIELD_NUMBER: _ClassVar[int]
    ENDPOINTNAME_FIELD_NUMBER: _ClassVar[int]
    FROM_FIELD_NUMBER: _ClassVar[int]
    serviceId: int
    endpointName: str
    def __init__(self, serviceId: _Optional[int] = ..., endpointName: _Optional[str] = ..., **kwargs) -> None: ...

class EndpointMapping(_message.Message):
    __slots__ = ("elements",)
    ELEMENTS_FIELD_NUMBER: _ClassVar[int]
    elements: _containers.RepeatedCompositeFieldContainer[EndpointMappingElement]
    def __init__(self, elements: _Optional[_Iterable[_Union[EndpointMappingElement, _Mapping]]] = ...) -> None: ...

class EndpointMappingElement(_message.Message):
    __slots__ = ("serviceId", "endpointName", "endpointId")
    SERVICEID_FIELD_NUMBER: _ClassVar[int]
    ENDPOINTNAME_FIELD_NUMBER: _ClassVar[int]
    ENDPOINTID_FIELD_NUMBER: _ClassVar[int]
    FROM_FIELD_NUMBER: _ClassVar[int]
    serviceId: int
    endpointName: str
    endpointId: int
    def __init__(self, serviceId: _Optional[int] = ..., endpointName: _Optional[str] = ..., endpointId: _Optional[int] = ..., **kwargs) -> None: ...

class NetAddresses(_message.Message):
    __slots__ = ("addresses",)
    ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    addresses: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, addresses: _Optional[_Iterable[str]] = ...) -> None: ...

class NetAddressMapping(_message.Message):
    __slots__ = ("addressIds",)
    ADDRESSIDS_FIELD_NUMBER: _ClassVar[int]
    addressIds: _containers.RepeatedCompositeFieldContainer[_common_pb2.KeyIntValuePair]
    def __init__(self, addressIds: _Optional[_Iterable[_Union[_common_pb2.KeyIntValuePair, _Mapping]]] = ...) -> None: ...
