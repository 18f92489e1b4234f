"""SkyWalking's v3 agent protocol: the services SkyWalking agents call, served
unchanged. Agents name things (service, instance, endpoint, peer) instead of
asking for ids; the names go through the same registration chain as
``Register`` calls. Segments and logs are stored as records; spans and meters
become metrics (``receiver/traces.py``, ``receiver/segments.py``); bad items
are refused as ``receiver/checks.py`` says. A module per service, each
taking what it carries into the intake every protocol shares
(``receiver/intake.py``); ``add_skywalking_services`` serves them all."""

from __future__ import annotations

import logging

from google.protobuf import descriptor

from skyoap.edge.server import GrpcServer
from skyoap.layers.spans import DEFAULT_SLOW, SlowThresholds
from skyoap.model.metrics import ApdexThresholds
from skyoap.model.spans import SEARCHABLE_TRACE_TAGS
from skyoap.proto.skywalking import (
    configuration_pb2,
    event_pb2,
    logging_pb2,
    management_pb2,
    meter_pb2,
    profile_pb2,
    tracing_pb2,
)
from skyoap.receiver import accelerator
from skyoap.receiver.intake import Intake
from skyoap.receiver.profiling import ProfileTasks
from skyoap.receiver.sampling import Sampler
from skyoap.receiver.segments import Aliases
from skyoap.receiver.skywalking.configuration import ConfigurationDiscoveryService
from skyoap.receiver.skywalking.events import EventService
from skyoap.receiver.skywalking.logs import LogReportService
from skyoap.receiver.skywalking.management import ManagementService
from skyoap.receiver.skywalking.meters import MeterReportService
from skyoap.receiver.skywalking.profiling import ProfileTaskService
from skyoap.receiver.skywalking.tracing import TraceSegmentReportService

log = logging.getLogger(__name__)


def add_skywalking_services(
    server: GrpcServer,
    intake: Intake,
    tasks: ProfileTasks,
    aliases: Aliases,
    apdex: ApdexThresholds,
    searchable: frozenset[str] = frozenset(SEARCHABLE_TRACE_TAGS),
    slow: SlowThresholds = DEFAULT_SLOW,
    sampler: Sampler | None = None,
) -> TraceSegmentReportService:
    """Serves SkyWalking's v3 agent services on ``server``, taking what agents
    report into ``intake`` (exit spans measured through ``aliases``, the tags
    of ``searchable`` keys kept for searches, calls past ``slow`` sampled,
    segments stored as ``sampler`` keeps them, profiling ``tasks`` served);
    returns the segments' service, which takes OTLP's spans too."""
    segments = TraceSegmentReportService(intake, aliases, apdex, searchable, slow, sampler)
    reader = "the C accelerator" if accelerator.scanner else "protobuf alone (pure Python)"
    log.info("segments are read by %s", reader)
    management = ManagementService(intake.names, intake.limits, intake.cardinality)
    configuration = ConfigurationDiscoveryService()
    # (file, service, servicer, whether it carries names and commands only)
    services: list[tuple[descriptor.FileDescriptor, str, object, bool]] = [
        (management_pb2.DESCRIPTOR, "ManagementService", management, True),
        (tracing_pb2.DESCRIPTOR, "TraceSegmentReportService", segments, False),
        (logging_pb2.DESCRIPTOR, "LogReportService", LogReportService(intake), False),
        (meter_pb2.DESCRIPTOR, "MeterReportService", MeterReportService(intake), False),
        (event_pb2.DESCRIPTOR, "EventService", EventService(intake), False),
        (profile_pb2.DESCRIPTOR, "ProfileTask", ProfileTaskService(intake, tasks), False),
        (configuration_pb2.DESCRIPTOR, "ConfigurationDiscoveryService", configuration, True),
    ]
    for file, name, servicer, control in services:
        # Telemetry streams count a message that does not decode and go on.
        server.add(file.services_by_name[name], servicer, keep_undecodable=True, control=control)
    return segments
