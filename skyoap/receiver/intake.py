"""The intake every protocol's telemetry services share (SkyWalking's and
OTLP's): where they register the names they see, hand on what they take
behind the node's memory budget, the rules and guards items pass, and the
counting of what agents reported and what was refused."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, TypeVar

from skyoap.model.checks import TelemetryLimits
from skyoap.model.metrics import Metrics, minute_bucket
from skyoap.model.records import LogRecord, Record
from skyoap.model.spans import SEARCHABLE_LOG_TAGS, searchable_tags
from skyoap.model.stream import StreamData, Words
from skyoap.receiver.cardinality import Cardinality
from skyoap.receiver.checks import Refusals
from skyoap.receiver.meter_analysis import MeterAnalyzer
from skyoap.receiver.registration import NamesByService
from skyoap.runtime.budget import MemoryBudget, admitted_size
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.worker import Worker


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
    meters: MeterAnalyzer
    """The meter rules, run over the samples every way in brings."""
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
        self._meters = intake.meters
        instruments = intake.instruments
        self._received = instruments.counter(
            "skyoap_v3_received_total", "telemetry items agents reported", ["kind"]
        ).labels(kind=self.KIND)
        self._refusals = Refusals(self.KIND, instruments)


def log_record(
    cardinality: Cardinality,
    searchable: frozenset[str],
    *,
    timestamp: int,
    service: str,
    instance: str,
    tags: Sequence[tuple[str, str]],
    content_type: str,
    content: str,
    endpoint: str = "",
    trace_id: str = "",
    segment_id: str = "",
    span_id: int = 0,
) -> LogRecord:
    """A log line as it is stored, whichever protocol brought it, once every
    check passed (so that a refused line counts against no bound of the
    guards): its names through the ``cardinality`` guards, a new id, and its
    tags of the ``searchable`` keys kept for searches."""
    service, instance = cardinality.source(service, instance)
    return LogRecord(
        time_bucket=minute_bucket(timestamp),
        log_id=uuid.uuid4().hex,
        timestamp=timestamp,
        service=service,
        instance=instance,
        endpoint=cardinality.endpoint(service, endpoint) if endpoint else "",
        trace_id=trace_id,
        segment_id=segment_id,
        span_id=span_id,
        content_type=content_type,
        content=Words(content),
        tags=dict(tags),
        searchable_tags=searchable_tags(tags, searchable),
    )
