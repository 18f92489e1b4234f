"""SkyWalking's v3 agent protocol: the services SkyWalking agents call, served
unchanged. Agents name things (service, instance, endpoint, peer) instead of
asking for ids; the names go through the same registration chain as
``Register`` calls. Segments and logs are stored as records; spans and meters
become metrics (``receiver/segments.py``); bad items are refused as
``receiver/checks.py`` says."""

from __future__ import annotations

import enum
import functools
import json
import logging
import math
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar, assert_never

import grpc
from google.protobuf import descriptor

from skyoap.edge.binding import Undecodable
from skyoap.edge.decoding import DecodeCost
from skyoap.edge.errors import InvalidRequest
from skyoap.edge.server import GrpcServer
from skyoap.model.checks import Reason, Refused, TelemetryLimits
from skyoap.model.layers import LAYERS
from skyoap.model.metrics import ApdexThresholds, MeterMetrics, Metrics, add_to, minute_bucket
from skyoap.model.profiling import MAX_FRAMES, MAX_STACK_BYTES, Operation, ProfileTask
from skyoap.model.records import EventRecord, LogRecord, ProfileSnapshotRecord, Record
from skyoap.model.spans import (
    DETAIL_KEYS,
    ENTRY,
    EXIT,
    SEARCHABLE_LOG_TAGS,
    SEARCHABLE_TRACE_TAGS,
    Segment,
    SegmentRules,
    Span,
    SpanRef,
    searchable_tags,
)
from skyoap.model.stream import StreamData, Text, Words
from skyoap.proto.skywalking import (
    common_pb2,
    configuration_pb2,
    event_pb2,
    logging_pb2,
    management_pb2,
    meter_pb2,
    profile_pb2,
    tracing_pb2,
)
from skyoap.receiver import accelerator
from skyoap.receiver.cardinality import Cardinality
from skyoap.receiver.checks import Refusals, Tally
from skyoap.receiver.profiling import ProfileTasks
from skyoap.receiver.registration import Registrar
from skyoap.receiver.sampling import Sampler
from skyoap.receiver.segments import DEFAULT_APDEX, Aliases, analyse, record_of
from skyoap.receiver.virtual import DEFAULT_SLOW, SlowThresholds
from skyoap.runtime import clock
from skyoap.runtime.batching import BatchPolicy
from skyoap.runtime.budget import MemoryBudget, Overloaded, admitted_size, memory_size
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.periodic import Periodic
from skyoap.runtime.tracebacks import detach
from skyoap.runtime.worker import Worker
from skyoap.storage.api import StorageError

log = logging.getLogger(__name__)

NO_COMMANDS = common_pb2.Commands()


_SEGMENT_COST = DecodeCost(tracing_pb2.SegmentObject)
HOLD_EVERY = 64
"""A call's segments are held in the budget this many at a time (and the
rest when its stream ends): one reservation each would cost more than the
segment. Counted over their bytes joined, a tag that spans two segments
counts once more, which only errs high."""


class _Name(enum.Enum):
    """What a name waiting to be registered is."""

    INSTANCE = "instance"
    SEEN = "seen"
    """An instance that reported telemetry: its heartbeat time moves."""
    ENDPOINT = "endpoint"
    ADDRESS = "address"


class NamesByService:
    """Registers the names agents report. Instances and endpoints need their
    service's id, which L2 allocates moments after the service is first seen;
    until then they wait here and are tried again every ``retry_s``, at most
    ``size`` at a time."""

    def __init__(self, registrar: Registrar, retry_s: float = 0.5, size: int = 100_000) -> None:
        self._registrar = registrar
        self._size = size
        self._waiting: dict[tuple[str, _Name, str], dict[str, str]] = {}
        self._lock = threading.Lock()
        self._task = Periodic("v3-waiting-names", retry_s, self.retry, "registering names that waited")

    def instance(self, service: str, instance: str, properties: dict[str, str]) -> None:
        """``instance`` of ``service`` is alive (and has these properties)."""
        if not self._registrar.alive(service, instance, properties):
            self._wait((service, _Name.INSTANCE, instance), properties)

    def seen(self, service: str, instance: str) -> None:
        """``instance`` of ``service`` reported telemetry: registered if new."""
        if not self._try(lambda: self._registrar.seen(service, instance)):
            self._wait((service, _Name.SEEN, instance), {})

    def endpoints(self, service: str, names: Iterable[str]) -> None:
        names = sorted(set(names))
        if names and not self._try(lambda: self._registrar.endpoints_by_name(service, names)):
            for name in names:
                self._wait((service, _Name.ENDPOINT, name), {})

    def addresses(self, addresses: Sequence[str]) -> None:
        """Peers telemetry named, registered in calls of at most the batch limit."""
        for chunk in BatchPolicy(max_items=self._registrar.limits.max_batch_items).chunks(addresses):
            if not self._try(functools.partial(self._registrar.addresses, list(chunk))):
                for address in chunk:
                    self._wait(("", _Name.ADDRESS, address), {})

    @staticmethod
    def _try(register: Callable[[], object]) -> bool:
        """Whether ``register()`` did not say False (an id it needs is not
        there yet) nor fail because storage or the queues cannot take the
        names now: telemetry already taken must not fail for its names, they
        wait here instead."""
        try:
            return register() is not False
        except (StorageError, Overloaded) as e:
            log.debug("names wait to be registered: %s", e)
            return False

    def _wait(self, key: tuple[str, _Name, str], properties: dict[str, str]) -> None:
        with self._lock:
            if len(self._waiting) >= self._size and key not in self._waiting:
                log.warning("%d names wait for their service's id already; %s not kept", self._size, key)
                return
            self._waiting[key] = {**self._waiting.get(key, {}), **properties}

    def retry(self) -> None:
        with self._lock:
            waiting, self._waiting = self._waiting, {}
        for (service, kind, name), properties in waiting.items():
            match kind:
                case _Name.INSTANCE:
                    self.instance(service, name, properties)
                case _Name.SEEN:
                    self.seen(service, name)
                case _Name.ENDPOINT:
                    self.endpoints(service, [name])
                case _Name.ADDRESS:
                    self.addresses([name])
                case _:
                    assert_never(kind)

    def start(self) -> None:
        self._task.start()

    def close(self, timeout_s: float = 5.0) -> None:
        self._task.close(timeout_s)


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


class ConfigurationDiscoveryService:
    """No dynamic configuration is pushed: agents poll and get none."""

    def fetchConfigurations(
        self, request: configuration_pb2.ConfigurationSyncRequest, context: grpc.ServicerContext
    ) -> common_pb2.Commands:
        return NO_COMMANDS


@dataclass(frozen=True)
class Sinks:
    """Where the telemetry services hand what they take: the first worker of
    each metrics and record chain on this node, behind the node's memory
    budget."""

    metrics: Callable[[type[Metrics]], Worker[Metrics]]
    records: Callable[[type[Record]], Worker[Record]]
    budget: MemoryBudget
    wait_s: float
    """How long a call waits for room before it is refused."""

    def take(self, records: Sequence[Record], metrics: Sequence[Metrics]) -> None:
        """Hands on everything one call carries, or nothing: raises Overloaded
        (RESOURCE_EXHAUSTED for the agent, which sends the call again) when
        the budget has no room for all of it within ``wait_s``."""
        with self.budget.admission(admitted_size([*records, *metrics]), self.wait_s):
            for r_model, r_items in _by_type(records).items():
                self.records(r_model).accept_many(r_items)
            for m_model, m_items in _by_type(metrics).items():
                self.metrics(m_model).accept_many(m_items)

    def hold(self, nbytes: int) -> None:
        """Counts ``nbytes`` more held by the call being served (what it made
        of its requests), once they fit in the budget; refuses the call
        (Overloaded) when no room comes in time, while it is still coming in."""
        self.budget.reserve(nbytes, self.wait_s)


S = TypeVar("S", bound=StreamData)


def _by_type(items: Sequence[S]) -> dict[type[S], list[S]]:
    grouped: dict[type[S], list[S]] = {}
    for item in items:
        grouped.setdefault(type(item), []).append(item)
    return grouped


def _taking(requests: Iterator[Any], tally: Tally, context: grpc.ServicerContext) -> Iterator[Any]:
    """The messages of an agent's stream that decode; the ones that do not are
    refused, and a stream that breaks ends the iteration, keeping what came.

    gRPC may report a cancelled stream as an ordinary end when the end
    overtakes the cancellation; such a break is counted only if the call is
    already known to be dead when the stream ends."""
    try:
        for request in requests:
            if isinstance(request, Undecodable):
                tally.refuse(Refused(Reason.UNDECODABLE, request.describe()))
            else:
                yield request
    except grpc.RpcError as e:  # the agent cancelled or lost the call
        detach(e)  # or this frame, and the last request, stay until collected
        tally.refuse(Refused(Reason.BROKEN_STREAM, "the stream ended with an error"))
        return
    if not context.is_active():
        tally.refuse(Refused(Reason.BROKEN_STREAM, "the agent cancelled the call"))


def segment_of(pb: tracing_pb2.SegmentObject, rules: SegmentRules | None = None) -> Segment:
    """The segment ``pb`` carries, with its tags whose keys are searchable
    (``rules.searchable``, SkyWalking's defaults without rules). With
    ``rules``, a segment of more spans, or a span of more references, than
    they allow is refused before they become objects.

    One pass over the spans reads each field once: every read of a decoded
    message's field makes a Python object, and this runs for every span."""
    if rules:
        rules.at_most_spans(pb.traceSegmentId, len(pb.spans))
    read = []
    pairs: list[tuple[str, str]] = []
    for s in pb.spans:
        given, tags = s.refs, s.tags
        details: tuple[tuple[str, str], ...] = ()
        if tags:
            mine = [(t.key, t.value) for t in tags]
            pairs += mine
            details = tuple([pair for pair in mine if pair[0] in _DETAIL_KEYS])
        refs: tuple[SpanRef, ...] = ()
        if given:
            if rules:
                rules.at_most_refs(pb.traceSegmentId, len(given))
            refs = tuple([
                _new(SpanRef, (r.refType, r.parentService, r.parentServiceInstance, r.parentEndpoint,
                               r.networkAddressUsedAtPeer))
                for r in given
            ])  # fmt: skip
        read.append(
            _new(Span, (s.spanType, s.spanLayer, s.startTime, s.endTime, s.operationName, s.peer, s.isError,
                        s.skipAnalysis, refs, len(tags), s.componentId, details))
        )  # fmt: skip
    return Segment(
        trace_id=pb.traceId,
        segment_id=pb.traceSegmentId,
        service=pb.service,
        instance=pb.serviceInstance,
        spans=tuple(read),
        data=pb.SerializeToString(),
        tags=searchable_tags(pairs, rules.searchable if rules else _SEARCHABLE) if pairs else (),
    )


def checked_segment(pb: tracing_pb2.SegmentObject, rules: SegmentRules, now_ms: int) -> Segment:
    """``segment_of`` the message, checked (Refused if it breaks a rule).

    Where the accelerator is built, the segment is read from its bytes by
    ``accelerator.scanner`` without reading the message's fields one object
    at a time; a segment it does not take (one that breaks a rule, or holds
    what only protobuf reads) is read here, which says what was wrong."""
    if accelerator.scanner is not None:
        data = pb.SerializeToString()
        fields = accelerator.scanner.scan(data, rules.scan_args, now_ms)
        if fields is not None:
            trace_id, segment_id, service, instance, taken, tags = fields
            return Segment(trace_id, segment_id, service, instance, taken, data, tags)
    segment = segment_of(pb, rules)
    rules.check(segment, now_ms)
    return segment


_DETAIL_KEYS = frozenset(DETAIL_KEYS)
_SEARCHABLE = frozenset(SEARCHABLE_TRACE_TAGS)

_new = tuple.__new__
"""Builds a named tuple from a tuple of its fields, without the call its
constructor makes to do the same."""


@dataclass(frozen=True)
class Intake:
    """What a receiver's telemetry services share: where they register the
    names they see and hand on what they take, the rules items are checked
    by, the guards on their names, and the node's instruments."""

    names: NamesByService
    sinks: Sinks
    limits: TelemetryLimits
    cardinality: Cardinality
    instruments: Instruments
    log_tags: frozenset[str] = frozenset(SEARCHABLE_LOG_TAGS)
    """The keys of the tags log lines are searched by."""


class TelemetryService:
    """A service of the intake's, counting what agents reported and what was
    refused under ``KIND``."""

    KIND: ClassVar[str]

    def __init__(self, intake: Intake) -> None:
        self._names = intake.names
        self._sinks = intake.sinks
        self._limits = intake.limits
        self._cardinality = intake.cardinality
        self._log_tags = intake.log_tags
        instruments = intake.instruments
        self._received = instruments.counter(
            "skyoap_v3_received_total", "telemetry items agents reported", ["kind"]
        ).labels(kind=self.KIND)
        self._refusals = Refusals(self.KIND, instruments)


class TraceSegmentReportService(TelemetryService):
    """Takes segments: registers the names in them (the service and instance,
    the endpoints entry spans serve, the peers exit spans call), stores each as
    a record, and measures its spans' calls (each service's apdex by its
    threshold in ``apdex``, exit spans through the node's ``aliases``), its
    tags of the ``searchable`` keys kept for searches."""

    KIND = "segments"

    def __init__(
        self,
        intake: Intake,
        aliases: Aliases | None = None,
        apdex: ApdexThresholds = DEFAULT_APDEX,
        searchable: frozenset[str] = frozenset(SEARCHABLE_TRACE_TAGS),
        slow: SlowThresholds = DEFAULT_SLOW,
        sampler: Sampler | None = None,
    ) -> None:
        super().__init__(intake)
        self._aliases = aliases
        self._apdex = apdex
        self._slow = slow
        self._sampler = sampler
        self._rules = SegmentRules(self._limits, searchable)

    def take(
        self, segments: Iterable[tracing_pb2.SegmentObject], tally: Tally
    ) -> list[tuple[tracing_pb2.SegmentObject, Segment | None]]:
        """Takes the good segments of one call, all at once: their records and
        metrics are queued together (or the call is refused whole, raising
        Overloaded), then the names in them are registered. Returns each
        segment with what was taken of it, None for one refused (counted in
        ``tally``)."""
        now_ms = clock.now_ms()
        outcome: list[tuple[tracing_pb2.SegmentObject, Segment | None]] = []
        unheld: list[bytes] = []
        try:
            for pb in segments:
                try:
                    segment = checked_segment(pb, self._rules, now_ms)
                except Refused as e:
                    tally.refuse(e)
                    outcome.append((pb, None))
                    continue
                segment = self._cardinality.segment(segment)
                outcome.append((pb, segment))
                unheld.append(segment.data)
                if len(unheld) == HOLD_EVERY:
                    self._hold(unheld)
            self._hold(unheld)
        finally:
            self._received.inc(len(outcome))
        taken = [s for _, s in outcome if s is not None]
        if taken:
            metrics, samples = analyse(taken, self._apdex, self._aliases, self._slow)
            records = list(map(record_of, taken))
            if self._sampler is not None:
                records = self._sampler.kept(records)
            self._sinks.take([*records, *samples], metrics)
            tally.taken += len(taken)
            self._register_names(taken)
        return outcome

    def _hold(self, unheld: list[bytes]) -> None:
        """Holds what the segments of ``unheld`` became, about what their
        decoded messages do, in the budget (Overloaded if no room comes)."""
        if unheld:
            self._sinks.hold(_SEGMENT_COST.of(b"".join(unheld)))
            unheld.clear()

    def _register_names(self, segments: list[Segment]) -> None:
        instances: set[tuple[str, str]] = set()
        endpoints: dict[str, set[str]] = {}
        peers: set[str] = set()
        for segment in segments:
            instances.add((segment.service, segment.instance))
            for span in segment.spans:
                if span.kind == ENTRY and span.operation:
                    endpoints.setdefault(segment.service, set()).add(span.operation)
                elif span.kind == EXIT and span.peer:
                    peers.add(span.peer)
                if span.refs:
                    peers.update([r.address for r in span.refs if r.address])
        for service, instance in sorted(instances):
            self._names.seen(service, instance)
        for service, names in endpoints.items():
            self._names.endpoints(service, names)
        if peers:
            self._names.addresses(sorted(peers))

    def collect(
        self, requests: Iterator[tracing_pb2.SegmentObject], context: grpc.ServicerContext
    ) -> common_pb2.Commands:
        tally = self._refusals.tally()
        return self._answer(_taking(requests, tally, context), tally)

    def collectInSync(
        self, request: tracing_pb2.SegmentCollection, context: grpc.ServicerContext
    ) -> common_pb2.Commands:
        return self._answer(request.segments, self._refusals.tally())

    def _answer(self, segments: Iterable[tracing_pb2.SegmentObject], tally: Tally) -> common_pb2.Commands:
        self.take(segments, tally)
        tally.check()
        return NO_COMMANDS


class RecordReportService(TelemetryService):
    """A service each of whose messages is one record: each is checked into
    its record (``_record``) and held in the budget, and the good ones of a
    call are handed on together."""

    def _record(self, pb: Any, now_ms: int) -> Record:
        raise NotImplementedError

    def _register(self, records: list[Any]) -> None:
        """Registers the names ``records`` carry, once they are handed on."""

    def collect(self, requests: Iterator[Any], context: grpc.ServicerContext) -> common_pb2.Commands:
        tally = self._refusals.tally()
        now_ms = clock.now_ms()
        records: list[Record] = []
        for pb in _taking(requests, tally, context):
            self._received.inc()
            try:
                record = self._record(pb, now_ms)
            except Refused as e:
                tally.refuse(e)
                continue
            records.append(record)
            self._sinks.hold(memory_size([record]))
        if records:
            self._sinks.take(records, ())
            tally.taken += len(records)
            self._register(records)
        tally.check()
        return NO_COMMANDS


class LogReportService(RecordReportService):
    """Takes log lines: registers the service, instance and endpoint they name
    and stores each as a record."""

    KIND = "logs"

    def _record(self, pb: logging_pb2.LogData, now_ms: int) -> LogRecord:
        lim = self._limits
        timestamp = lim.time("timestamp", pb.timestamp, now_ms) if pb.timestamp else now_ms
        lim.at_most("bytes of a log body", pb.body.ByteSize(), lim.max_log_body_bytes, "--max-log-body-bytes")
        lim.at_most("tags of a log line", len(pb.tags.data), lim.max_tags_per_item, "--max-tags-per-item")
        kind = pb.body.WhichOneof("content") or "text"
        body = getattr(pb.body, kind)
        ctx = pb.traceContext
        service = lim.name("service", pb.service)
        instance = lim.name("serviceInstance", pb.serviceInstance, required=False)
        endpoint = lim.name("endpoint", pb.endpoint, required=False)
        trace_id = lim.name("traceId", ctx.traceId, required=False)
        segment_id = lim.name("traceSegmentId", ctx.traceSegmentId, required=False)
        tags = [(kv.key, kv.value) for kv in pb.tags.data]
        # Guarded once every check passed: a refused line counts against no bound.
        guard = self._cardinality
        service, instance = guard.source(service, instance)
        return LogRecord(
            time_bucket=minute_bucket(timestamp),
            log_id=uuid.uuid4().hex,
            timestamp=timestamp,
            service=service,
            instance=instance,
            endpoint=guard.endpoint(service, endpoint) if endpoint else "",
            trace_id=trace_id,
            segment_id=segment_id,
            span_id=ctx.spanId,
            content_type=kind,
            content=Words(getattr(body, kind)),
            tags=dict(tags),
            searchable_tags=searchable_tags(tags, self._log_tags),
        )

    def _register(self, records: list[LogRecord]) -> None:
        for record in records:
            if record.instance:
                self._names.seen(record.service, record.instance)
            if record.endpoint:
                self._names.endpoints(record.service, [record.endpoint])


class EventService(RecordReportService):
    """Takes events: each report (of an event's start, its end, or both) is
    stored as a record of its own; the reports of one event share its uuid
    and are merged when read. The names an event carries are not registered:
    an event says something happened to a service, not that it reports."""

    KIND = "events"

    def _record(self, pb: event_pb2.Event, now_ms: int) -> EventRecord:
        lim = self._limits
        start = lim.time("startTime", pb.startTime, now_ms) if pb.startTime else 0
        end = lim.time("endTime", pb.endTime, now_ms) if pb.endTime else 0
        if not start and not end:
            raise Refused(Reason.MISSING_TIME, "an event has neither a startTime nor an endTime")
        if start and end and end < start:
            raise Refused(Reason.END_BEFORE_START, f"an event ends ({end}) before it starts ({start})")
        if not pb.layer:
            raise Refused(
                Reason.MISSING_NAME, "an event's layer is empty: events name their layer (GENERAL, ...)"
            )
        if pb.layer not in LAYERS:
            raise Refused(Reason.UNKNOWN_ENUM, f"layer {pb.layer[:100]!r} is none of SkyWalking's layers")
        if pb.type not in event_pb2.Type.values():
            raise Refused(Reason.UNKNOWN_ENUM, f"event type {pb.type} is not Normal (0) or Error (1)")
        message = pb.message.encode()
        lim.at_most(
            "bytes of an event's message", len(message), lim.max_log_body_bytes, "--max-log-body-bytes"
        )
        lim.at_most(
            "parameters of an event", len(pb.parameters), lim.max_tags_per_item, "--max-tags-per-item"
        )
        source = pb.source
        uuid_ = lim.name("uuid", pb.uuid)
        service = lim.name("service", source.service)
        instance = lim.name("serviceInstance", source.serviceInstance, required=False)
        endpoint = lim.name("endpoint", source.endpoint, required=False)
        service, instance = self._cardinality.source(service, instance)
        return EventRecord(
            time_bucket=minute_bucket(start or end),
            event_id=f"{uuid_}/{start}/{end}",
            uuid=uuid_,
            service=service,
            instance=instance,
            endpoint=self._cardinality.endpoint(service, endpoint) if endpoint else "",
            name=lim.name("name", pb.name),
            type=event_pb2.Type.Name(pb.type),
            message=Text(pb.message),
            parameters=dict(pb.parameters),
            start_time=start,
            end_time=end,
            timestamp=start or end,
            layer=pb.layer,
        )


class ProfileTaskService(RecordReportService):
    """SkyWalking's trace profiling, on the agents' side: each agent that polls
    is given its service's profiling tasks (``receiver/profiling.py``) that
    have not ended and that it does not have yet (created after the last it
    says it has), and each instance is logged NOTIFIED once per task; the
    thread dumps agents send are stored with their task (a dump of a task
    there is none of, numbered past what the task can take, or of a stack
    too deep or too large is refused); the end an agent reports is logged
    EXECUTION_FINISHED."""

    KIND = "profiles"

    def __init__(self, intake: Intake, tasks: ProfileTasks) -> None:
        super().__init__(intake)
        self._tasks = tasks

    def getProfileTaskCommands(
        self, request: profile_pb2.ProfileTaskCommandQuery, context: grpc.ServicerContext
    ) -> common_pb2.Commands:
        service, instance = self._source(request.service, request.serviceInstance)
        now = clock.now_ms()
        commands = []
        for task in self._tasks.of(service):
            if task.create_time > request.lastCommandTime and now < task.end_time:
                if not task.logged(instance, Operation.NOTIFIED):
                    self._tasks.log(task, instance, Operation.NOTIFIED)
                commands.append(_profile_command(task))
        return common_pb2.Commands(commands=commands)

    def _source(self, service: str, instance: str) -> tuple[str, str]:
        try:
            return self._limits.name("service", service), self._limits.name("serviceInstance", instance)
        except Refused as e:
            raise InvalidRequest(str(e)) from None

    def _record(self, pb: profile_pb2.ThreadSnapshot, now_ms: int) -> ProfileSnapshotRecord:
        lim = self._limits
        task = self._tasks.task(pb.taskId)
        if task is None:
            raise Refused(Reason.UNKNOWN_TASK, f"there is no profiling task {pb.taskId[:100]!r}")
        segment_id = lim.name("traceSegmentId", pb.traceSegmentId)
        dump_time = lim.time("time", pb.time, now_ms)
        if not 0 <= pb.sequence < task.max_dumps:
            raise Refused(
                Reason.OVER_LIMIT,
                f"dump {pb.sequence} of segment {segment_id[:100]}: task {task.id} dumps a request at "
                f"most {task.max_dumps} times, numbered from 0",
            )
        frames = pb.stack.codeSignatures
        lim.at_most("frames of a thread dump", len(frames), MAX_FRAMES, "skyoap's bound")
        lim.at_most("bytes of a thread dump", pb.stack.ByteSize(), MAX_STACK_BYTES, "skyoap's bound")
        return ProfileSnapshotRecord(
            time_bucket=minute_bucket(dump_time),
            snapshot_id=f"{segment_id}/{pb.sequence}",
            task_id=task.id,
            segment_id=segment_id,
            service=task.service,
            dump_time=dump_time,
            sequence=pb.sequence,
            stack=Text(json.dumps(list(frames))),
        )

    def collectSnapshot(
        self, requests: Iterator[profile_pb2.ThreadSnapshot], context: grpc.ServicerContext
    ) -> common_pb2.Commands:
        return self.collect(requests, context)

    def reportTaskFinish(
        self, request: profile_pb2.ProfileTaskFinishReport, context: grpc.ServicerContext
    ) -> common_pb2.Commands:
        _, instance = self._source(request.service, request.serviceInstance)
        task = self._tasks.task(request.taskId)
        if task is not None and not task.logged(instance, Operation.EXECUTION_FINISHED):
            self._tasks.log(task, instance, Operation.EXECUTION_FINISHED)
        return NO_COMMANDS


def _profile_command(task: ProfileTask) -> common_pb2.Command:
    """The ``ProfileTaskQuery`` command SkyWalking's agents run a task by;
    its serial number is the task's, so that an agent given it twice runs it once."""
    args = {
        "SerialNumber": task.id,
        "TaskId": task.id,
        "EndpointName": task.endpoint,
        "Duration": task.minutes,
        "MinDurationThreshold": task.min_duration_ms,
        "DumpPeriod": task.dump_period_ms,
        "MaxSamplingCount": task.max_sampling_count,
        "StartTime": task.start_time,
        "CreateTime": task.create_time,
    }
    return common_pb2.Command(
        command="ProfileTaskQuery",
        args=[common_pb2.KeyStringValuePair(key=k, value=str(v)) for k, v in args.items()],
    )


class MeterReportService(TelemetryService):
    """Takes meters: registers the service and instance they come from (named
    in the first message of a stream only) and turns each value into a metric,
    checked as the RemoteService checks it. A value whose sum with the others
    of its meter and minute in the same call would overflow is refused."""

    KIND = "meters"

    def _metric(self, pb: meter_pb2.MeterData, source: tuple[str, str], now_ms: int) -> MeterMetrics:
        lim = self._limits
        timestamp = lim.time("timestamp", pb.timestamp, now_ms) if pb.timestamp else now_ms
        kind = pb.WhichOneof("metric")
        if kind is None:
            raise Refused(Reason.NO_VALUE, "the meter has neither a single value nor a histogram")
        value = getattr(pb, kind)
        labels = ",".join(f"{lab.name}={lab.value}" for lab in sorted(value.labels, key=lambda x: x.name))
        common: dict[str, Any] = {
            "time_bucket": minute_bucket(timestamp),
            "service": source[0],
            "instance": source[1],
            "name": lim.name("meter name", value.name),
            "labels": lim.name("meter labels", labels, required=False),
            "samples": 1,
            "last_time": timestamp,
        }
        if kind == "singleValue":
            if not math.isfinite(value.value):
                raise Refused(Reason.NOT_A_NUMBER, f"meter {value.name} has the value {value.value}")
            meter = MeterMetrics(**common, value_sum=value.value, last_value=value.value)
        else:
            meter = self._histogram(common, value)
        meter.check(lim, now_ms)
        return meter

    def _histogram(self, common: dict[str, Any], value: meter_pb2.MeterHistogram) -> MeterMetrics:
        lim = self._limits
        lim.at_most(
            f"buckets of meter {value.name}",
            len(value.values),
            lim.max_histogram_buckets,
            "--max-histogram-buckets",
        )
        buckets = {"-inf" if b.isNegativeInfinity else repr(b.bucket): str(b.count) for b in value.values}
        if len(buckets) < len(value.values):  # two counts of one bucket: which is right is not known
            raise Refused(Reason.INCONSISTENT, f"histogram {value.name} names a bucket bound twice")
        total = float(sum(b.count for b in value.values))
        return MeterMetrics(**common, value_sum=total, last_value=total, buckets=buckets)

    def _take(
        self,
        meters: Iterable[meter_pb2.MeterData],
        tally: Tally,
        taken: list[MeterMetrics],
        totals: dict[str, MeterMetrics],
    ) -> None:
        """Checks ``meters``, adding the good ones to ``taken`` and to the
        call's ``totals`` by key."""
        now_ms = clock.now_ms()
        source: tuple[str, str] | None = None
        for pb in meters:
            self._received.inc()
            try:
                if pb.service and (pb.service, pb.serviceInstance) != source:
                    service = self._limits.name("service", pb.service)
                    instance = self._limits.name("serviceInstance", pb.serviceInstance)
                    source = self._cardinality.source(service, instance)
                if source is None:
                    raise Refused(Reason.MISSING_NAME, "the first meter of a stream names no service")
                metric = self._metric(pb, source, now_ms)
                add_to(totals, metric)
            except Refused as e:
                tally.refuse(e)
                continue
            taken.append(metric)
            self._sinks.hold(memory_size([metric]))

    def _hand_on(self, taken: list[MeterMetrics], tally: Tally) -> common_pb2.Commands:
        if taken:
            self._sinks.take((), taken)
            tally.taken += len(taken)
        for service, instance in sorted({(m.service, m.instance) for m in taken}):
            self._names.seen(service, instance)
        tally.check()
        return NO_COMMANDS

    def collect(
        self, requests: Iterator[meter_pb2.MeterData], context: grpc.ServicerContext
    ) -> common_pb2.Commands:
        tally = self._refusals.tally()
        taken: list[MeterMetrics] = []
        self._take(_taking(requests, tally, context), tally, taken, {})
        return self._hand_on(taken, tally)

    def collectBatch(
        self, requests: Iterator[meter_pb2.MeterDataCollection], context: grpc.ServicerContext
    ) -> common_pb2.Commands:
        tally = self._refusals.tally()
        taken: list[MeterMetrics] = []
        totals: dict[str, MeterMetrics] = {}
        for batch in _taking(requests, tally, context):
            self._take(batch.meterData, tally, taken, totals)
        return self._hand_on(taken, tally)


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
