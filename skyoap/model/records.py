"""Records: what is kept as it came (trace segments, log lines and events
from agents, alarms from the rules), stored once and never merged. A record is
persisted by the node that received or raised it, in its day's index or
partition (see ``day``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from skyoap.model.metrics import Downsampling
from skyoap.model.stream import NO_TEXT, StreamData, Text, Words


@dataclass(frozen=True, slots=True, kw_only=True)
class Record(StreamData):
    KEY: ClassVar[str]
    """The column that identifies a record."""
    TAGS: ClassVar[str] = "tags"
    """The column (of strings) of the ``key=value`` tags records are searched
    and completed by."""

    time_bucket: int
    """The minute (see ``model.metrics``) the record belongs to."""

    def key(self) -> str:
        return str(getattr(self, self.KEY))

    @property
    def day(self) -> int:
        return Downsampling.DAY.of_minute(self.time_bucket)


@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentRecord(Record):
    """One trace segment: the spans one process took part in for one trace.
    The searchable columns summarise it; ``data`` is the segment as the agent
    sent it (protobuf, base64), so that nothing of it is lost."""

    STREAM_ID = 30
    MODEL = "segment"
    KEY = "segment_id"

    segment_id: str
    trace_id: str
    service: str
    instance: str
    endpoint: str
    """The operation of the first entry span, or of the first span if none is an entry."""
    start_time: int
    """Milliseconds since the epoch."""
    end_time: int
    latency_ms: int
    is_error: bool
    spans: int
    data: Text
    tags: tuple[str, ...] = ()
    """The searchable tags of its spans (``--searchable-trace-tags``), each
    ``key=value``, distinct and sorted; empty in a record stored before
    segments had them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LogRecord(Record):
    STREAM_ID = 31
    MODEL = "log"
    KEY = "log_id"

    log_id: str
    """Given by the receiver: agents send none."""
    timestamp: int
    """Milliseconds since the epoch."""
    service: str
    instance: str
    endpoint: str
    trace_id: str
    segment_id: str
    span_id: int
    content_type: str
    """text, json or yaml."""
    content: Words
    tags: Mapping[str, str] = field(default_factory=dict)
    searchable_tags: tuple[str, ...] = ()
    """Its tags of the searchable keys (``--searchable-log-tags``), each
    ``key=value``, sorted; empty in a record stored before logs had them."""

    TAGS = "searchable_tags"


@dataclass(frozen=True, slots=True, kw_only=True)
class AlarmRecord(Record):
    """A firing a rule raised for an entity, or its recovery: each a record
    of its own, so that the ``alarm`` topic carries both. A recovery repeats
    its firing's columns, with ``recovery_time`` set, and keeps its
    ``time_bucket``: both land in the same day."""

    STREAM_ID = 32
    MODEL = "alarm"
    KEY = "alarm_id"

    alarm_id: str
    """The firing's ``uuid``; for its recovery, that and ``/recovery``."""
    uuid: str
    """The firing's id, which its notices carry."""
    scope: int
    """SkyWalking's scope id (1 service, 2 instance, 3 endpoint, 4-6 their relations)."""
    name: str
    """The entity's name in alarms (``{instance} of {service}``, ...)."""
    id0: str
    id1: str
    service: str
    """The entity's service (a relation's source)."""
    rule_name: str
    message: Words
    start_time: int
    """Milliseconds since the epoch."""
    expression: Text
    """The rule's expression."""
    recovery_time: int = 0
    """Milliseconds since the epoch; 0 in a firing."""
    tags: tuple[str, ...] = ()
    """The rule's tags, each ``key=value``, sorted."""
    snapshot: Text = NO_TEXT
    """What the expression read when it fired, each metric's values (JSON);
    "" in a recovery and in firings stored before snapshots were kept."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EventRecord(Record):
    """One report of an event (a start, an upgrade, a crash): of its start,
    of its end, or of both. The reports of one event share its ``uuid`` and
    are merged when read (``query/events.py``)."""

    STREAM_ID = 33
    MODEL = "event"
    KEY = "event_id"

    event_id: str
    """``uuid/startTime/endTime``: a report sent twice is stored once."""
    uuid: str
    service: str
    instance: str
    endpoint: str
    name: str
    type: str
    """``Normal`` or ``Error``."""
    message: Text
    parameters: Mapping[str, str] = field(default_factory=dict)
    start_time: int
    """Milliseconds since the epoch; 0 in a report of the end alone."""
    end_time: int
    """Milliseconds since the epoch; 0 while the event lasts."""
    timestamp: int
    """Its start, else its end: what a Duration finds the report by."""
    layer: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SampledRecord(Record):
    """A slow call kept as a sample of its kind (SkyWalking's sampled
    records): a database statement or a cache command that took longer than
    its threshold, with the trace it was made in. ``metric`` names the list
    it belongs to (``top_n_database_statement``, ...); ``service`` the
    entity whose list it is, a virtual service (``normal`` false) or the
    calling one."""

    STREAM_ID = 34
    MODEL = "sampled_record"
    KEY = "record_id"

    record_id: str
    """``metric/segmentId/spanIndex``: a segment sent again samples nothing twice."""
    metric: str
    service: str
    normal: bool
    statement: Text
    latency: int
    """Milliseconds."""
    trace_id: str
    timestamp: int
    """Milliseconds since the epoch of the call's start."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfileSnapshotRecord(Record):
    """One dump of the thread stack of a profiled segment, taken by its agent
    for a profiling task (``model/profiling.py``) while the segment ran."""

    STREAM_ID = 37
    MODEL = "profile"
    KEY = "snapshot_id"

    snapshot_id: str
    """``segmentId/sequence``: a dump sent again is stored once."""
    task_id: str
    segment_id: str
    service: str
    """The task's service."""
    dump_time: int
    """Milliseconds since the epoch."""
    sequence: int
    """The dump's number in its segment, from 0: consecutive numbers are dumps one period apart."""
    stack: Text
    """The code signatures of the stack, outermost first (a JSON list)."""


AGENT_RECORD_TYPES: tuple[type[Record], ...] = (
    SegmentRecord,
    LogRecord,
    EventRecord,
    SampledRecord,
    ProfileSnapshotRecord,
)
"""The records agents report, which the node that received them stores."""
RECORD_TYPES: tuple[type[Record], ...] = (*AGENT_RECORD_TYPES, AlarmRecord)
RECORD_MODELS: dict[str, type[Record]] = {r.MODEL: r for r in RECORD_TYPES}
