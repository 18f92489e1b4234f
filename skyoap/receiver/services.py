"""The agent-facing gRPC services: Register and ServiceInstancePing. Messages are
turned into the project's own types here and nowhere further in."""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence

import grpc

from skyoap.edge.errors import InvalidRequest
from skyoap.edge.server import GrpcServer
from skyoap.model.inventory import DETECT_POINT_CODES, EndpointInventory, ServiceInstanceInventory
from skyoap.proto import common_pb2, ping_pb2, register_pb2
from skyoap.receiver.registration import Registrar
from skyoap.receiver.wire import PairEncoder
from skyoap.runtime import clock

RESET_COMMAND = "ServiceMetadataReset"
"""Tells an agent to forget its ids and register again."""

_SERVICE_NAME = operator.attrgetter("serviceName")


def _pairs(kvs: Iterable[common_pb2.KeyStringValuePair]) -> dict[str, str]:
    return {kv.key: kv.value for kv in kvs}


def _properties(
    tags: Sequence[common_pb2.KeyStringValuePair], props: Sequence[common_pb2.KeyStringValuePair]
) -> dict[str, str]:
    return {**_pairs(tags), **_pairs(props)} if tags or props else {}


class RegisterService:
    def __init__(self, registrar: Registrar, answer_cache_size: int = 100_000) -> None:
        self._registrar = registrar
        self._answer = PairEncoder(answer_cache_size).encode

    # The answers of the three calls below are a ``repeated KeyIntValuePair`` in
    # field 1, written as bytes (receiver/wire.py); the edge sends bytes as they are.

    def doServiceRegister(self, request: register_pb2.Services, context: grpc.ServicerContext) -> bytes:
        services = request.services
        names = list(map(_SERVICE_NAME, services))  # a third cheaper than a comprehension
        ids = self._registrar.services(names, lambda i: _properties(services[i].tags, services[i].properties))
        return self._answer(ids.items())

    def doServiceInstanceRegister(
        self, request: register_pb2.ServiceInstances, context: grpc.ServicerContext
    ) -> bytes:
        t = clock.now_ms()
        instances = []
        for i in request.instances:
            props = _properties(i.tags, i.properties)
            instances.append(
                ServiceInstanceInventory(
                    name=props.get("instance_name") or i.instanceUUID,
                    service_id=i.serviceId,
                    instance_uuid=i.instanceUUID,
                    register_time=t,
                    heartbeat_time=t,
                    properties=props,
                )
            )
        ids = self._registrar.instances(instances)
        by_key = {inst.key(): inst.instance_uuid for inst in instances}
        return self._answer(((by_key[k], v) for k, v in ids.items()))

    def doEndpointRegister(
        self, request: register_pb2.Endpoints, context: grpc.ServicerContext
    ) -> register_pb2.EndpointMapping:
        t = clock.now_ms()
        endpoints = []
        for n, e in enumerate(request.endpoints):
            point = getattr(e, "from")  # a Python keyword, so not an attribute name
            if point not in DETECT_POINT_CODES:
                raise InvalidRequest(f"endpoint #{n} has detect point {point}; it must be 0, 1 or 2")
            endpoints.append(
                EndpointInventory(
                    name=e.endpointName,
                    service_id=e.serviceId,
                    detect_point=point,
                    register_time=t,
                    heartbeat_time=t,
                )
            )
        ids = self._registrar.endpoints(endpoints)
        return register_pb2.EndpointMapping(
            elements=[
                register_pb2.EndpointMappingElement(
                    serviceId=e.service_id,
                    endpointName=e.name,
                    endpointId=ids[e.key()],
                    **{"from": e.detect_point},
                )
                for e in endpoints
                if e.key() in ids
            ]
        )

    def doNetworkAddressRegister(
        self, request: register_pb2.NetAddresses, context: grpc.ServicerContext
    ) -> bytes:
        return self._answer(self._registrar.addresses(list(request.addresses)).items())


class PingService:
    def __init__(self, registrar: Registrar) -> None:
        self._registrar = registrar

    def doPing(
        self, request: ping_pb2.ServiceInstancePingPkg, context: grpc.ServicerContext
    ) -> common_pb2.Commands:
        if self._registrar.ping(request.serviceInstanceId, request.serviceInstanceUUID):
            return common_pb2.Commands()
        reset = common_pb2.Command(
            command=RESET_COMMAND,
            args=[
                common_pb2.KeyStringValuePair(key="SerialNumber", value=str(clock.now_ms())),
                common_pb2.KeyStringValuePair(
                    key="Reason", value=f"service instance id {request.serviceInstanceId} is not registered"
                ),
            ],
        )
        return common_pb2.Commands(commands=[reset])


def add_agent_services(server: GrpcServer, registrar: Registrar) -> None:
    """Serves Register and ServiceInstancePing on ``server``."""
    server.add(register_pb2.DESCRIPTOR.services_by_name["Register"], RegisterService(registrar), control=True)
    server.add(
        ping_pb2.DESCRIPTOR.services_by_name["ServiceInstancePing"], PingService(registrar), control=True
    )
