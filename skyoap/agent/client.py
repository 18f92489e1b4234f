"""A reference agent: registers its service, instance, endpoints and peer
addresses, asking again until every id is non-zero, then heart-beats."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import grpc

from skyoap.proto import common_pb2, ping_pb2, ping_pb2_grpc, register_pb2, register_pb2_grpc
from skyoap.runtime import clock

log = logging.getLogger(__name__)

RESET_COMMAND = "ServiceMetadataReset"
ASK_AGAIN = frozenset(
    {grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}
)
"""What a busy or unreachable node answers; the agent asks again later."""


class RegistrationTimeout(TimeoutError):
    pass


@dataclass
class AgentIds:
    service_id: int = 0
    instance_id: int = 0
    endpoint_ids: dict[str, int] = field(default_factory=dict)
    address_ids: dict[str, int] = field(default_factory=dict)


class Agent:
    """One service instance. ``retry_interval_s`` is how long it waits before
    asking again for ids it has not got (SkyWalking's agents wait 3 s)."""

    def __init__(
        self,
        target: str,
        service_name: str,
        instance_uuid: str | None = None,
        properties: dict[str, str] | None = None,
        retry_interval_s: float = 3.0,
        channel: grpc.Channel | None = None,
    ) -> None:
        self.service_name = service_name
        self.instance_uuid = instance_uuid or uuid.uuid4().hex
        self.properties = properties or {}
        self.retry_interval_s = retry_interval_s
        self.ids = AgentIds()
        self.resets = 0
        self._own_channel = channel is None
        self._channel = channel or grpc.insecure_channel(target)
        self._register = register_pb2_grpc.RegisterStub(self._channel)
        self._ping = ping_pb2_grpc.ServiceInstancePingStub(self._channel)
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None

    def _until(self, ask: Callable[[], bool], what: str, timeout_s: float) -> None:
        """Asks until ``ask()`` says it has the id; a node that is busy or
        unreachable is asked again after ``retry_interval_s``, as SkyWalking's
        agents do."""
        deadline = time.monotonic() + timeout_s
        while not self._answered(ask):
            if time.monotonic() + self.retry_interval_s > deadline:
                raise RegistrationTimeout(f"{self.service_name}: no {what} id after {timeout_s:g} s")
            if self._stop.wait(self.retry_interval_s):
                raise RegistrationTimeout(f"{self.service_name}: stopped while waiting for the {what} id")

    @staticmethod
    def _answered(ask: Callable[[], bool]) -> bool:
        try:
            return ask()
        except grpc.RpcError as e:
            # Asking is idempotent (a name's id is the same whenever it is
            # asked for), so a call that ran out of time is asked again too.
            if e.code() not in ASK_AGAIN:
                raise
            log.debug("asking again later: %s", e.details())
            return False

    def _ask_service(self) -> bool:
        answer = self._register.doServiceRegister(
            register_pb2.Services(services=[register_pb2.Service(serviceName=self.service_name)]), timeout=10
        )
        for kv in answer.services:
            if kv.key == self.service_name and kv.value:
                self.ids.service_id = kv.value
        return self.ids.service_id != 0

    def _ask_instance(self) -> bool:
        props = [common_pb2.KeyStringValuePair(key=k, value=v) for k, v in self.properties.items()]
        request = register_pb2.ServiceInstances(
            instances=[
                register_pb2.ServiceInstance(
                    serviceId=self.ids.service_id,
                    instanceUUID=self.instance_uuid,
                    time=clock.now_ms(),
                    properties=props,
                )
            ]
        )
        for kv in self._register.doServiceInstanceRegister(request, timeout=10).serviceInstances:
            if kv.key == self.instance_uuid and kv.value:
                self.ids.instance_id = kv.value
        return self.ids.instance_id != 0

    def register(self, timeout_s: float = 60.0) -> AgentIds:
        """Registers the service, then the instance; returns once both have ids."""
        self._until(self._ask_service, "service", timeout_s)
        self._until(self._ask_instance, "instance", timeout_s)
        return self.ids

    def register_endpoints(self, names: Sequence[str], timeout_s: float = 60.0) -> dict[str, int]:
        def ask() -> bool:
            wanted = [n for n in names if n not in self.ids.endpoint_ids]
            request = register_pb2.Endpoints(
                endpoints=[
                    register_pb2.Endpoint(serviceId=self.ids.service_id, endpointName=n, **{"from": 1})
                    for n in wanted
                ]
            )
            for e in self._register.doEndpointRegister(request, timeout=10).elements:
                if e.endpointId:
                    self.ids.endpoint_ids[e.endpointName] = e.endpointId
            return all(n in self.ids.endpoint_ids for n in names)

        self._until(ask, "endpoint", timeout_s)
        return {n: self.ids.endpoint_ids[n] for n in names}

    def register_addresses(self, addresses: Sequence[str], timeout_s: float = 60.0) -> dict[str, int]:
        def ask() -> bool:
            wanted = [a for a in addresses if a not in self.ids.address_ids]
            answer = self._register.doNetworkAddressRegister(
                register_pb2.NetAddresses(addresses=wanted), timeout=10
            )
            for kv in answer.addressIds:
                if kv.value:
                    self.ids.address_ids[kv.key] = kv.value
            return all(a in self.ids.address_ids for a in addresses)

        self._until(ask, "network address", timeout_s)
        return {a: self.ids.address_ids[a] for a in addresses}

    def ping(self) -> bool:
        """Sends one heartbeat. Returns False if the backend asked to register
        again; the ids are then forgotten and registered anew."""
        commands = self._ping.doPing(
            ping_pb2.ServiceInstancePingPkg(
                serviceInstanceId=self.ids.instance_id,
                time=clock.now_ms(),
                serviceInstanceUUID=self.instance_uuid,
            ),
            timeout=10,
        )
        if any(c.command == RESET_COMMAND for c in commands.commands):
            self.resets += 1
            self.ids = AgentIds()
            return False
        return True

    def start_heartbeat(self, interval_s: float) -> None:
        def run() -> None:
            while not self._stop.wait(interval_s):
                try:
                    if not self.ping():
                        log.info("%s: asked to register again", self.service_name)
                        self.register()
                except (grpc.RpcError, RegistrationTimeout) as e:
                    log.warning("%s: heartbeat failed: %s", self.service_name, e)

        self._heartbeat = threading.Thread(
            target=run, name=f"heartbeat-{self.instance_uuid[:8]}", daemon=True
        )
        self._heartbeat.start()

    def close(self) -> None:
        self._stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join(5)
        if self._own_channel:
            self._channel.close()
