"""Metrics: values per entity and time bucket that merge. L1 merges what one
receiver saw, L2 merges that with what is stored, and every minute value is
also merged into its hour and its day (downsampling).

Entities are named, not numbered: a metric needs no sequence id, so the first
segment of a new service is measured like every later one.

Time buckets are UTC and read as numbers: ``202611211905`` is the minute
19:05 of 2026-11-21, ``2026112119`` its hour and ``20261121`` its day.
"""

from __future__ import annotations

import abc
import datetime
import enum
import functools
import math
import operator
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar

from skyoap.model import sketch
from skyoap.model.checks import Reason, Refused, TelemetryLimits, consistent, minute_of
from skyoap.model.inventory import DetectPoint
from skyoap.model.stream import Column, ColumnType, StreamData

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

SEP = "\x1f"
"""Joins the names of an entity into its id; no name can contain it (agents'
names are checked at the edge)."""


class Downsampling(enum.Enum):
    MINUTE = "minute"
    HOUR = "hour"
    DAY = "day"

    def of_minute(self, minute_bucket: int) -> int:
        """The bucket of this precision holding ``minute_bucket``."""
        return minute_bucket // _DIVISORS[self]

    def bucket_of(self, ms: int) -> int:
        return self.of_minute(minute_bucket(ms))


_DIVISORS = {Downsampling.MINUTE: 1, Downsampling.HOUR: 100, Downsampling.DAY: 10_000}


def minute_bucket(ms: int) -> int:
    return _minute(ms // 60_000)


def minutes_in(bucket: int) -> int:
    """How many minutes a minute, hour or day bucket spans."""
    return 1 if bucket > 9_999_999_999 else 60 if bucket > 99_999_999 else 1440


def day_of(bucket: int) -> datetime.date | None:
    """The day of a minute, hour or day bucket; None for a bucket of no real day."""
    day = bucket
    while day > 99_999_999:  # a minute or an hour bucket
        day //= 100
    try:
        return datetime.date(day // 10_000, day // 100 % 100, day % 100)
    except ValueError:
        return None


@functools.lru_cache(maxsize=4096)
def _minute(minutes_since_epoch: int) -> int:
    return minute_of(minutes_since_epoch * 60)


@dataclass(frozen=True, slots=True, kw_only=True)
class Metrics(StreamData):
    """A metric of one entity in one time bucket."""

    time_bucket: int

    @abc.abstractmethod
    def entity(self) -> str:
        """The entity's id: its names joined by ``SEP``."""

    def key(self) -> str:
        return f"{self.time_bucket}{SEP}{self.entity()}"

    def routing_key(self) -> str:
        # Every bucket of an entity goes to the same node, so that one node
        # merges its hours and days as well as its minutes.
        return self.entity()

    @abc.abstractmethod
    def combine(self, other: Self) -> Self:
        """The sum of two values of the same key."""

    @classmethod
    def combine_all(cls, items: list[Self]) -> Self:
        """The sum of several values of the same key (what L1 and L2 do with a
        drained batch; a type may do it in one step rather than pairwise)."""
        total = items[0]
        for item in items[1:]:
            total = total.combine(item)
        return total

    def downsampled(self, level: Downsampling) -> Self:
        """The same value in the bucket of ``level`` holding this minute."""
        return replace(self, time_bucket=level.of_minute(self.time_bucket))

    OPTIONAL_NAMES: ClassVar[frozenset[str]] = frozenset()
    """String columns that may be empty; every other one is a required name."""

    def check(self, limits: TelemetryLimits, now_ms: int) -> None:
        """Raises ``Refused`` for a value no receiver makes. Its time is not
        judged against ``now_ms``: the receiver judged the telemetry's times
        against its own clock when it took them, and a value spends seconds
        to minutes on its way to an aggregator, whose clock may differ."""
        limits.minute(lambda: f"the time bucket of {self.MODEL}", self.time_bucket)
        for column in self.columns():
            if column.type is ColumnType.STRING:
                limits.name(column.name, getattr(self, column.name), column.name not in self.OPTIONAL_NAMES)

    def describe(self) -> str:
        return f"{self.MODEL} {self.entity().replace(SEP, ' ')!r} at {self.time_bucket}"


M = TypeVar("M", bound=Metrics)


def merge_into(target: dict[str, M], items: Iterable[M]) -> list[tuple[M, Refused]]:
    """Adds ``items`` to ``target`` by key, the items of each key summed in one
    step. Returns the items left out, each with why: those whose sum with the
    others of their key would pass what storage can hold (``combine`` refuses
    it); their key's value is what it would be without them."""
    groups: dict[str, list[M]] = {}
    for item in items:
        k = item.key()
        group = groups.get(k)
        if group is None:
            prev = target.get(k)
            groups[k] = [item] if prev is None else [prev, item]
        else:
            group.append(item)
    refused: list[tuple[M, Refused]] = []
    for k, group in groups.items():
        try:
            target[k] = type(group[0]).combine_all(group)
        except Refused:  # rare: sum them one by one, leaving out each that overflows
            target[k] = _fold(group, refused)
    return refused


def _fold(group: list[M], refused: list[tuple[M, Refused]]) -> M:
    """``group`` summed, but for the items whose sum with those before them
    ``combine`` refuses (added to ``refused``); the first, which may be what a
    target held already, is always kept."""
    total = group[0]
    for item in group[1:]:
        try:
            total = total.combine(item)
        except Refused as e:
            refused.append((item, e))
    return total


def add_to(totals: dict[str, M], item: M) -> None:
    """Adds ``item`` to the value of its key in ``totals``; Refused, leaving
    that value as it was, if ``combine`` refuses the sum."""
    key = item.key()
    prev = totals.get(key)
    totals[key] = item if prev is None else prev.combine(item)


def not_finite(row: Mapping[str, Any]) -> str | None:
    """Which column of a stored row holds a float that is not finite, if one
    does: no storage keeps it (Elasticsearch stores it as null, read back as
    0), so such a row is refused rather than written."""
    for name, value in row.items():
        if isinstance(value, float) and not math.isfinite(value):
            return f"{name} is {value}: no storage keeps a number that is not finite"
    return None


PERCENTILES = (50, 75, 90, 95, 99)


N = TypeVar("N", int, "npt.NDArray[np.int64]")


def rank_at(p: int, calls: N) -> N:
    """The rank of the call at p% of ``calls``: ceil(p% of calls), as whole numbers."""
    return (p * calls + 99) // 100


@dataclass(frozen=True, slots=True, kw_only=True)
class CallMetrics(Metrics):
    """Calls into (or out of) an entity in one bucket: how many, how many
    failed, how long they took in all and as a histogram."""

    calls: int = 0
    errors: int = 0
    latency_sum_ms: int = 0
    histogram: sketch.Sketch = ()
    """How long the calls took, as a sketch (``model/sketch.py``)."""

    DERIVED = (
        Column("cpm", ColumnType.FLOAT),
        Column("resp_time", ColumnType.INT),
        Column("sla", ColumnType.INT),
        *(Column(f"p{p}", ColumnType.INT) for p in PERCENTILES),
    )
    """SkyWalking's names: calls per minute, the mean response time (ms), the
    share of calls that succeeded (1/100 %), and the percentiles."""

    def combine(self, other: Self) -> Self:
        return self.combine_all([self, other])

    SUMMED: ClassVar[tuple[str, ...]] = ("calls", "errors", "latency_sum_ms")
    """The counts several values of one entity and bucket add up (besides the histogram)."""

    UNITED: ClassVar[tuple[str, ...]] = ()
    """The sets (ascending tuples) several values of one entity and bucket unite."""

    OPERATIONS: ClassVar[tuple[str, ...]] = ()
    """What a model of calls by operation takes in its ``operation`` column."""

    @classmethod
    def combine_all(cls, items: list[Self]) -> Self:
        if len(items) == 1:
            return items[0]
        counts = operator.attrgetter(*cls.SUMMED)
        totals = map(sum, zip(*map(counts, items), strict=True))
        changes: dict[str, Any] = dict(zip(cls.SUMMED, totals, strict=True))
        for name in cls.UNITED:
            changes[name] = tuple(sorted({v for item in items for v in getattr(item, name)}))
        return replace(items[0], **changes, histogram=sketch.merged(item.histogram for item in items))

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Self:
        """As ``StreamData.from_row``; a row of an earlier release, whose
        histogram has fixed buckets, reads as their sketch."""
        item = super(CallMetrics, cls).from_row(row)
        if len(item.histogram) == len(sketch.EARLIER_BOUNDS_MS):
            return replace(item, histogram=sketch.of_stored(item.histogram))
        return item

    def percentile(self, p: int) -> int:
        """The latency of the call of rank ceil(p% of calls) in whole ms,
        within 1%; 0 with no calls."""
        return sketch.value_at(self.histogram, rank_at(p, self.calls))

    @property
    def cpm(self) -> float:
        """Calls per minute of the bucket (a minute, an hour or a day)."""
        return self.calls / minutes_in(self.time_bucket)

    @property
    def resp_time(self) -> int:
        """The mean response time in whole ms (0 with no calls), as SkyWalking's ``resp_time``."""
        return self.latency_sum_ms // self.calls if self.calls else 0

    @property
    def sla(self) -> int:
        """The share of calls that did not fail, in 1/100 % (10000 with no calls)."""
        return (self.calls - self.errors) * 10_000 // self.calls if self.calls else 10_000

    def check(self, limits: TelemetryLimits, now_ms: int) -> None:
        Metrics.check(self, limits, now_ms)  # dataclasses with slots cannot use super()
        consistent(
            self.calls >= 0 and 0 <= self.errors <= self.calls and self.latency_sum_ms >= 0,
            lambda: (
                f"{self.describe()} counts {self.calls} calls, {self.errors} errors "
                f"and {self.latency_sum_ms} ms"
            ),
        )
        wrong = sketch.problem(self.histogram, self.calls)
        consistent(wrong is None, lambda: f"{self.describe()}: its latency sketch {wrong}")
        if self.OPERATIONS:
            operation = getattr(self, "operation")  # noqa: B009 (the column of the models with OPERATIONS)
            consistent(
                operation in self.OPERATIONS,
                lambda: f"{self.describe()}: the operation is not one of {list(self.OPERATIONS)}",
            )

    def derived(self) -> dict[str, Any]:
        values: dict[str, Any] = {"cpm": self.cpm, "resp_time": self.resp_time, "sla": self.sla}
        values.update({f"p{p}": self.percentile(p) for p in PERCENTILES})
        return values


_THRESHOLD_LINE = re.compile(r"""\s*(?:"([^"]+)"|'([^']+)'|([^\s#"'][^#]*?))\s*:\s*(?P<ms>\d+)\s*(?:#.*)?""")
"""``SERVICE: MS``, the name quoted if it holds ':' or '#', a comment after it."""


@dataclass(frozen=True)
class ApdexThresholds:
    """The response time T per service that satisfies its users: a call that
    took at most T is satisfied, at most 4T tolerating, longer or failed
    frustrated (SkyWalking's ``service-apdex-threshold.yml``, 500 ms unless
    told otherwise)."""

    default_ms: int = 500
    services: Mapping[str, int] = field(default_factory=dict)

    def of(self, service: str) -> int:
        return self.services.get(service, self.default_ms)

    @classmethod
    def parse(cls, text: str, source: str) -> ApdexThresholds:
        """Lines ``SERVICE: MS`` (a name holding ':' in quotes), ``default: MS``
        for the rest, ``#`` comments; ValueError saying which line is wrong."""
        default, services = cls.default_ms, {}
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip() or line.strip().startswith("#"):
                continue
            found = _THRESHOLD_LINE.fullmatch(line)
            if found is None or int(found["ms"]) < 1:
                raise ValueError(
                    f"{source}, line {n}: {line.strip()[:100]!r} is not 'SERVICE: MS' with a whole "
                    "number of ms above 0"
                )
            name = next(g for g in found.group(1, 2, 3) if g)
            if name == "default":
                default = int(found["ms"])
            else:
                services[name] = int(found["ms"])
        return cls(default, services)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceMetrics(CallMetrics):
    """Calls a service served (its entry spans), with how many satisfied and
    how many tolerated its apdex threshold (``ApdexThresholds``)."""

    STREAM_ID = 20
    MODEL = "service_metrics"

    service: str
    apdex_satisfied: int = 0
    apdex_tolerating: int = 0

    DERIVED = (*CallMetrics.DERIVED, Column("apdex", ColumnType.INT))
    SUMMED = (*CallMetrics.SUMMED, "apdex_satisfied", "apdex_tolerating")

    def entity(self) -> str:
        return self.service

    @property
    def apdex(self) -> int:
        """(satisfied + tolerating / 2) / calls, in 1/10000 (10000 with no calls), as SkyWalking's."""
        return (
            (2 * self.apdex_satisfied + self.apdex_tolerating) * 5_000 // self.calls if self.calls else 10_000
        )

    def check(self, limits: TelemetryLimits, now_ms: int) -> None:
        CallMetrics.check(self, limits, now_ms)
        s, t = self.apdex_satisfied, self.apdex_tolerating
        consistent(
            s >= 0 and t >= 0 and s + t <= self.calls - self.errors,
            lambda: (
                f"{self.describe()} counts {s} satisfied and {t} tolerating calls of {self.calls}, "
                f"{self.errors} failed: failed calls are frustrated"
            ),
        )

    def derived(self) -> dict[str, Any]:
        return {**CallMetrics.derived(self), "apdex": self.apdex}


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceInstanceMetrics(CallMetrics):
    STREAM_ID = 21
    MODEL = "service_instance_metrics"

    service: str
    instance: str

    def entity(self) -> str:
        return f"{self.service}{SEP}{self.instance}"


@dataclass(frozen=True, slots=True, kw_only=True)
class EndpointMetrics(CallMetrics):
    STREAM_ID = 22
    MODEL = "endpoint_metrics"

    service: str
    endpoint: str

    def entity(self) -> str:
        return f"{self.service}{SEP}{self.endpoint}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceRelationMetrics(CallMetrics):
    """Calls from ``source`` to ``dest`` as one side saw them (``detect_point``)."""

    STREAM_ID = 23
    MODEL = "service_relation_metrics"

    source: str
    dest: str
    detect_point: str
    components: tuple[int, ...] = ()
    """The libraries the calls were made through, by SkyWalking's ids, ascending:
    the server's components on the server side, the client's on the client side."""

    UNITED = ("components",)

    def entity(self) -> str:
        return f"{self.source}{SEP}{self.dest}{SEP}{self.detect_point}"

    def check(self, limits: TelemetryLimits, now_ms: int) -> None:
        CallMetrics.check(self, limits, now_ms)
        _check_side(self, self.detect_point)


SIDES = (DetectPoint.SERVER.value, DetectPoint.CLIENT.value)
"""The sides a relation is measured from."""


def _check_side(metric: Metrics, detect_point: str) -> None:
    consistent(
        detect_point in SIDES, lambda: f"{metric.describe()}: the detect point is not one of {list(SIDES)}"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceInstanceRelationMetrics(CallMetrics):
    """Calls from one instance of ``source_service`` to one of ``dest_service``
    as one side saw them (``detect_point``): the callee's entry span (its
    reference names the caller), or the caller's exit span (the callee is the
    instance an alias of the address called names, else the address itself)."""

    STREAM_ID = 25
    MODEL = "service_instance_relation_metrics"

    source_service: str
    source_instance: str
    dest_service: str
    dest_instance: str
    detect_point: str = DetectPoint.SERVER.value
    """Rows stored before instance relations had a client side are the server's."""

    def entity(self) -> str:
        names = SEP.join((self.source_service, self.source_instance, self.dest_service, self.dest_instance))
        # The server's side keeps the entity it had before the client's was
        # measured: rows an earlier release stored go on merging under their keys.
        return names if self.detect_point == DetectPoint.SERVER.value else f"{names}{SEP}{self.detect_point}"

    def check(self, limits: TelemetryLimits, now_ms: int) -> None:
        CallMetrics.check(self, limits, now_ms)
        _check_side(self, self.detect_point)


@dataclass(frozen=True, slots=True, kw_only=True)
class EndpointRelationMetrics(CallMetrics):
    """Calls from an endpoint of ``source_service`` (the entry the call was made
    in) to an endpoint of ``dest_service``, as the callee saw them."""

    STREAM_ID = 26
    MODEL = "endpoint_relation_metrics"

    source_service: str
    source_endpoint: str
    dest_service: str
    dest_endpoint: str

    def entity(self) -> str:
        return SEP.join((self.source_service, self.source_endpoint, self.dest_service, self.dest_endpoint))


@dataclass(frozen=True, slots=True, kw_only=True)
class DatabaseAccessMetrics(CallMetrics):
    """Calls into a database as the spans of its callers measured them
    (SkyWalking's ``DatabaseAccess``): ``service`` is the address called, a
    service of the ``VIRTUAL_DATABASE`` layer nobody reports from."""

    STREAM_ID = 28
    MODEL = "database_access_metrics"

    service: str
    type: str = ""
    """The ``db.type`` its callers' spans name (``PostgreSQL``), if any: not part of its entity."""

    OPTIONAL_NAMES = frozenset({"type"})

    def entity(self) -> str:
        return self.service

    @classmethod
    def combine_all(cls, items: list[Self]) -> Self:
        """As ``CallMetrics``'; of the types named, the greatest (one named beats none)."""
        total = CallMetrics.combine_all.__func__(cls, items)  # type: ignore[attr-defined]
        return replace(total, type=max(item.type for item in items))


CACHE_OPERATIONS = ("read", "write", "all")
"""What a cache's calls are counted by: those that read, those that wrote,
and all of them (others too: SkyWalking's ``Others``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheAccessMetrics(CallMetrics):
    """Calls into a cache as the spans of its callers measured them
    (SkyWalking's ``CacheAccess``), of one of ``CACHE_OPERATIONS``:
    ``service`` is the address called (or ``{cache.type}-local``), a service
    of the ``VIRTUAL_CACHE`` layer."""

    STREAM_ID = 29
    MODEL = "cache_access_metrics"
    OPERATIONS = CACHE_OPERATIONS

    service: str
    operation: str

    def entity(self) -> str:
        return f"{self.service}{SEP}{self.operation}"


MQ_OPERATIONS = ("consume", "produce")


@dataclass(frozen=True, slots=True, kw_only=True)
class MQAccessMetrics(CallMetrics):
    """Messages a queue's producers sent or its consumers took, as their spans
    measured them (SkyWalking's ``MQAccess``): ``service`` is the broker's
    address, a service of the ``VIRTUAL_MQ`` layer. Its latency is a
    message's time in transit (the consumer's ``transmission.latency``
    tag), not a span's."""

    STREAM_ID = 35
    MODEL = "mq_access_metrics"
    OPERATIONS = MQ_OPERATIONS

    service: str
    operation: str

    def entity(self) -> str:
        return f"{self.service}{SEP}{self.operation}"


@dataclass(frozen=True, slots=True, kw_only=True)
class MQEndpointAccessMetrics(CallMetrics):
    """``MQAccessMetrics`` of one topic or queue of the broker (SkyWalking's
    ``MQEndpointAccess``): ``endpoint`` is ``{mq.topic}/{mq.queue}``, of
    those the spans name."""

    STREAM_ID = 36
    MODEL = "mq_endpoint_access_metrics"
    OPERATIONS = MQ_OPERATIONS

    service: str
    endpoint: str
    operation: str

    def entity(self) -> str:
        return f"{self.service}{SEP}{self.endpoint}{SEP}{self.operation}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Meter(Metrics):
    """A meter in one bucket: one an agent or OpenTelemetry reports (a gauge,
    a counter or a histogram), or one the meter rules make of them (its
    ``layer`` that of its rule): the sum and number of the values, the
    greatest, the least and the latest. A histogram's bucket counts are
    those of its latest report (agents report histograms as running totals,
    so adding reports up would count twice). Its entity is a service's
    (``ServiceMeterMetrics``) or an instance's (``MeterMetrics``)."""

    name: str
    labels: str
    """``key=value`` pairs sorted by key, joined by commas."""
    samples: int = 0
    value_sum: float = 0.0
    last_value: float = 0.0
    last_time: int = 0
    """Milliseconds since the epoch of the latest report."""
    buckets: Mapping[str, str] = field(default_factory=dict)
    """A histogram's count per bucket (by its lower bound), from the latest report."""
    value_max: float = 0.0
    value_min: float = 0.0
    layer: str = ""
    """The layer of the rule that made it; '' for a meter as it was reported."""

    DERIVED = (Column("value_avg", ColumnType.FLOAT), Column("value_per_min", ColumnType.FLOAT))

    def combine(self, other: Self) -> Self:
        """The two summed; Refused (OVERFLOW) if their sum passes what a float
        holds, since storage could not keep it: the caller keeps ``self``."""
        value_sum = self.value_sum + other.value_sum
        if not math.isfinite(value_sum):
            raise Refused(
                Reason.OVERFLOW,
                f"{other.describe()}: its sum {other.value_sum!r} added to the {self.value_sum!r} of the "
                "others would pass the largest number a float holds",
            )
        latest = other if other.last_time >= self.last_time else self
        return replace(
            latest,
            samples=self.samples + other.samples,
            value_sum=value_sum,
            value_max=max(self.value_max, other.value_max),
            value_min=min(self.value_min, other.value_min),
        )

    OPTIONAL_NAMES = frozenset({"labels", "layer"})

    def check(self, limits: TelemetryLimits, now_ms: int) -> None:
        """As ``Metrics.check``; run by the receivers on every meter they
        make and by the RemoteService on every meter another node sends."""
        Metrics.check(self, limits, now_ms)
        what = self.describe
        consistent(self.samples >= 1, lambda: f"{what()} has {self.samples} samples")
        values = (self.value_sum, self.last_value, self.value_max, self.value_min)
        if not all(map(math.isfinite, values)):
            raise Refused(Reason.NOT_A_NUMBER, f"{what()} has the values {', '.join(map(str, values))}")
        start = limits.minute(lambda: f"the time bucket of {what()}", self.time_bucket)
        consistent(
            start <= self.last_time < start + 60_000,
            lambda: f"{what()} was last reported at {self.last_time} ms since the epoch, not in its minute",
        )
        limits.at_most(
            lambda: f"buckets of {what()}",
            len(self.buckets),
            limits.max_histogram_buckets,
            "--max-histogram-buckets",
        )
        for bound, count in self.buckets.items():
            if not (bound == "-inf" or _finite(bound)):
                raise Refused(
                    Reason.NOT_A_NUMBER,
                    f"{what()} has a bucket bounded by {bound[:40]!r}: a bound is a finite number "
                    "(or -inf, the first bucket's)",
                )
            # isdigit alone takes '²', which int() does not read.
            if not (count.isascii() and count.isdigit()):
                raise Refused(
                    Reason.INCONSISTENT, f"{what()} counts {count[:40]!r} in its bucket {bound!r}: 0 or more"
                )

    def derived(self) -> dict[str, Any]:
        return {
            "value_avg": self.value_sum / self.samples if self.samples else 0.0,
            "value_per_min": self.value_sum / minutes_in(self.time_bucket),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class MeterMetrics(Meter):
    """A meter of a service instance."""

    STREAM_ID = 24
    MODEL = "meter_metrics"

    service: str
    instance: str

    def entity(self) -> str:
        return f"{self.service}{SEP}{self.instance}{SEP}{self.name}{SEP}{self.labels}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceMeterMetrics(Meter):
    """A meter of a service as a whole: what a rule of service scope makes."""

    STREAM_ID = 38
    MODEL = "service_meter_metrics"

    service: str

    def entity(self) -> str:
        return f"{self.service}{SEP}{self.name}{SEP}{self.labels}"


def _finite(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


@dataclass(frozen=True, slots=True, kw_only=True)
class NetworkAddressAlias(Metrics):
    """An address callers reach a service at, and the service and instance it
    stands for (SkyWalking's network address alias): an entry span's
    reference names the address its caller used (``networkAddressUsedAtPeer``).
    A row per address and bucket, like every metric's, holds the latest
    sighting of its bucket; so the newest row of an address is its alias."""

    STREAM_ID = 27
    MODEL = "network_address_alias"

    address: str
    service: str
    instance: str
    last_seen: int = 0
    """Milliseconds since the epoch of the latest span that named it."""

    def entity(self) -> str:
        return self.address

    def combine(self, other: Self) -> Self:
        """The later sighting (of two at the same time, the one of the greater
        names, so that every node keeps the same)."""
        return other if other.recency() >= self.recency() else self

    def recency(self) -> tuple[int, str, str]:
        """What orders two sightings of an address: the later one is the alias."""
        return self.last_seen, self.service, self.instance

    def check(self, limits: TelemetryLimits, now_ms: int) -> None:
        Metrics.check(self, limits, now_ms)
        start = limits.minute(lambda: f"the time bucket of {self.describe()}", self.time_bucket)
        consistent(
            start <= self.last_seen < start + 60_000,
            lambda: (
                f"{self.describe()} was last seen at {self.last_seen} ms since the epoch, not in its minute"
            ),
        )


CALL_METRICS: tuple[type[CallMetrics], ...] = (
    ServiceMetrics,
    ServiceInstanceMetrics,
    EndpointMetrics,
    ServiceRelationMetrics,
    ServiceInstanceRelationMetrics,
    EndpointRelationMetrics,
    DatabaseAccessMetrics,
    CacheAccessMetrics,
    MQAccessMetrics,
    MQEndpointAccessMetrics,
)
METRICS_TYPES: tuple[type[Metrics], ...] = (
    *CALL_METRICS,
    MeterMetrics,
    ServiceMeterMetrics,
    NetworkAddressAlias,
)
