"""SkyWalking's ``ManagementService``: instances' properties and heartbeats."""

from __future__ import annotations

import grpc

from skyoap.model.checks import Refused, TelemetryLimits
from skyoap.proto.skywalking import common_pb2, management_pb2
from skyoap.receiver.cardinality import Cardinality
from skyoap.receiver.registration import NamesByService
from skyoap.receiver.skywalking.streams import NO_COMMANDS


class ManagementService:
    def __init__(self, names: NamesByService, limits: TelemetryLimits, cardinality: Cardinality) -> None:
        self._names = names
        self._limits = limits
        self._cardinality = cardinality

    def _source(self, service: str, instance: str) -> tuple[str, str]:
        """The service and instance as they count against their bounds; bad
        names are left for registration to refuse, and never counted."""
        try:
            self._limits.name("service", service)
            self._limits.name("serviceInstance", instance)
        except Refused:
            return service, instance
        return self._cardinality.source(service, instance)

    def reportInstanceProperties(
        self, request: management_pb2.InstanceProperties, context: grpc.ServicerContext
    ) -> common_pb2.Commands:
        properties = {kv.key: kv.value for kv in request.properties}
        if request.layer:
            properties["layer"] = request.layer
        self._names.instance(*self._source(request.service, request.serviceInstance), properties)
        return NO_COMMANDS

    def keepAlive(
        self, request: management_pb2.InstancePingPkg, context: grpc.ServicerContext
    ) -> common_pb2.Commands:
        self._names.instance(*self._source(request.service, request.serviceInstance), {})
        return NO_COMMANDS
