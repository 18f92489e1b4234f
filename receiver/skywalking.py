"""SkyWalking's v3 agent protocol: the services SkyWalking agents call, served
unchanged. Agents name things (service, instance, endpoint, peer) instead of
asking for ids; the names go through the same registration chain as
``Register`` calls. Segments, logs and meters are counted and their names
registered; storing them as records and metrics is not built yet."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator

import grpc
from google.protobuf import descriptor

from pipeline.grpc_server import GrpcServer
from pipeline.instruments import Instruments
from pipeline.periodic import Periodic
from proto.skywalking import (
    common_pb2,
    configuration_pb2,
    logging_pb2,
    management_pb2,
    meter_pb2,
    profile_pb2,
    tracing_pb2,
)
from receiver.registration import Registrar

log = logging.getLogger(__name__)

NO_COMMANDS = common_pb2.Commands()


class NamesByService:
    """Registers the names agents report. Instances and endpoints need their
    service's id, which L2 allocates moments after the service is first seen;
    until then they wait here and are tried again every ``retry_s``, at most
    ``size`` at a time."""

    def __init__(self, registrar: Registrar, retry_s: float = 0.5, size: int = 100_000) -> None:
        self._registrar = registrar
        self._size = size
        self._waiting: dict[tuple[str, str, str], dict[str, str]] = {}
        self._lock = threading.Lock()
        self._task = Periodic("v3-waiting-names", retry_s, self.retry, "registering names that waited")

    def instance(self, service: str, instance: str, properties: dict[str, str]) -> None:
        """``instance`` of ``service`` is alive (and has these properties)."""
        if not self._registrar.alive(service, instance, properties):
            self._wait((service, "instance", instance), properties)

    def endpoints(self, service: str, names: Iterable[str]) -> None:
        names = sorted(set(names))
        if names and not self._registrar.endpoints_by_name(service, names):
            for name in names:
                self._wait((service, "endpoint", name), {})

    def _wait(self, key: tuple[str, str, str], properties: dict[str, str]) -> None:
        with self._lock:
            if len(self._waiting) >= self._size and key not in self._waiting:
                log.warning("%d names wait for their service's id already; %s not kept", self._size, key)
                return
            self._waiting[key] = {**self._waiting.get(key, {}), **properties}

    def retry(self) -> None:
        with self._lock:
            waiting, self._waiting = self._waiting, {}
        for (service, kind, name), properties in waiting.items():
            if kind == "instance":
                self.instance(service, name, properties)
            else:
                self.endpoints(service, [name])

    def start(self) -> None:
        self._task.start()

    def close(self) -> None:
        self._task.close()


class ManagementService:
    def __init__(self, names: NamesByService) -> None:
        self._names = names

    def reportInstanceProperties(
        self, request: management_pb2.InstanceProperties, context: grpc.ServicerContext
    ) -> common_pb2.Commands:
        properties = {kv.key: kv.value for kv in request.properties}
        if request.layer:
            properties["layer"] = request.layer
        self._names.instance(request.service, request.serviceInstance, properties)
        return NO_COMMANDS

    def keepAlive(
        self, request: management_pb2.InstancePingPkg, context: grpc.ServicerContext
    ) -> common_pb2.Commands:
        self._names.instance(request.service, request.serviceInstance, {})
        return NO_COMMANDS


class ProfileTaskService:
    """No profiling tasks are scheduled: agents poll and get none. Agents still
    flush their (empty) snapshot queue when they exit; that is taken and counted."""

    def __init__(self, instruments: Instruments) -> None:
        self._ignored = instruments.counter(
            "v3_profile_snapshots_ignored_total", "thread snapshots sent although no profiling task was given"
        )

    def getProfileTaskCommands(
        self, request: profile_pb2.ProfileTaskCommandQuery, context: grpc.ServicerContext
    ) -> common_pb2.Commands:
        return NO_COMMANDS

    def collectSnapshot(
        self, requests: Iterator[profile_pb2.ThreadSnapshot], context: grpc.ServicerContext
    ) -> common_pb2.Commands:
        self._ignored.inc(sum(1 for _ in requests))
        return NO_COMMANDS


class ConfigurationDiscoveryService:
    """No dynamic configuration is pushed: agents poll and get none."""

    def fetchConfigurations(
        self, request: configuration_pb2.ConfigurationSyncRequest, context: grpc.ServicerContext
    ) -> common_pb2.Commands:
        return NO_COMMANDS


class TraceSegmentReportService:
    """Takes segments and registers the names in them: the service and instance,
    the endpoints entry spans serve, and the peers exit spans call."""

    def __init__(self, names: NamesByService, registrar: Registrar, instruments: Instruments) -> None:
        self._names = names
        self._registrar = registrar
        self._segments = instruments.counter("v3_segments_received_total", "trace segments agents reported")

    def _take(self, segment: tracing_pb2.SegmentObject) -> None:
        endpoints, peers = set(), set()
        for span in segment.spans:
            if span.spanType == tracing_pb2.Entry and span.operationName:
                endpoints.add(span.operationName)
            elif span.spanType == tracing_pb2.Exit and span.peer:
                peers.add(span.peer)
            peers.update(r.networkAddressUsedAtPeer for r in span.refs if r.networkAddressUsedAtPeer)
        self._names.instance(segment.service, segment.serviceInstance, {})
        self._names.endpoints(segment.service, endpoints)
        if peers:
            self._registrar.addresses(sorted(peers))
        self._segments.inc()

    def collect(
        self, requests: Iterator[tracing_pb2.SegmentObject], context: grpc.ServicerContext
    ) -> common_pb2.Commands:
        for segment in requests:
            self._take(segment)
        return NO_COMMANDS

    def collectInSync(
        self, request: tracing_pb2.SegmentCollection, context: grpc.ServicerContext
    ) -> common_pb2.Commands:
        for segment in request.segments:
            self._take(segment)
        return NO_COMMANDS


class LogReportService:
    """Takes logs and registers the service, instance and endpoint they name."""

    def __init__(self, names: NamesByService, instruments: Instruments) -> None:
        self._names = names
        self._logs = instruments.counter("v3_logs_received_total", "log records agents reported")

    def collect(
        self, requests: Iterator[logging_pb2.LogData], context: grpc.ServicerContext
    ) -> common_pb2.Commands:
        for record in requests:
            if record.serviceInstance:
                self._names.instance(record.service, record.serviceInstance, {})
            if record.endpoint:
                self._names.endpoints(record.service, [record.endpoint])
            self._logs.inc()
        return NO_COMMANDS


class MeterReportService:
    """Takes meters and registers the service and instance they come from
    (named in the first message of a stream only)."""

    def __init__(self, names: NamesByService, instruments: Instruments) -> None:
        self._names = names
        self._meters = instruments.counter("v3_meters_received_total", "meter values agents reported")

    def _take(self, meters: Iterable[meter_pb2.MeterData]) -> None:
        source: tuple[str, str] | None = None
        for meter in meters:
            if meter.service and (meter.service, meter.serviceInstance) != source:
                source = (meter.service, meter.serviceInstance)
                self._names.instance(*source, {})
            self._meters.inc()

    def collect(
        self, requests: Iterator[meter_pb2.MeterData], context: grpc.ServicerContext
    ) -> common_pb2.Commands:
        self._take(requests)
        return NO_COMMANDS

    def collectBatch(
        self, requests: Iterator[meter_pb2.MeterDataCollection], context: grpc.ServicerContext
    ) -> common_pb2.Commands:
        for batch in requests:
            self._take(batch.meterData)
        return NO_COMMANDS


def add_skywalking_services(
    server: GrpcServer, registrar: Registrar, instruments: Instruments
) -> NamesByService:
    """Serves SkyWalking's v3 agent services on ``server``; returns the names
    that wait for their service's id, which the caller starts and closes."""
    names = NamesByService(registrar)
    services: list[tuple[descriptor.FileDescriptor, str, object]] = [
        (management_pb2.DESCRIPTOR, "ManagementService", ManagementService(names)),
        (
            tracing_pb2.DESCRIPTOR,
            "TraceSegmentReportService",
            TraceSegmentReportService(names, registrar, instruments),
        ),
        (logging_pb2.DESCRIPTOR, "LogReportService", LogReportService(names, instruments)),
        (meter_pb2.DESCRIPTOR, "MeterReportService", MeterReportService(names, instruments)),
        (profile_pb2.DESCRIPTOR, "ProfileTask", ProfileTaskService(instruments)),
        (configuration_pb2.DESCRIPTOR, "ConfigurationDiscoveryService", ConfigurationDiscoveryService()),
    ]
    for file, name, servicer in services:
        server.add(file.services_by_name[name], servicer)
    return names
