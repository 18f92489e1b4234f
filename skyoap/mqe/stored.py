"""The metrics storage holds, as the metrics language reads them:
``StoredMetrics``, the MetricReader of a node.

A read takes the rows of one metric's entity in the Duration's buckets at
its step's downsampling: one storage query per metric an expression names.
What several expressions read can be read at once for all their entities
(``StoredMetrics.read_ahead``). A read past ``MAX_ROWS`` rows fails with a
message saying so, rather than holding the query's thread for what a client
cannot draw anyway."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from skyoap.model.metrics import Downsampling, Meter, MeterMetrics, Metrics, minute_bucket
from skyoap.model.records import SampledRecord
from skyoap.mqe.reader import LabeledValues, LabelSelector, Ranked, Sample, TopNCondition
from skyoap.mqe.results import KeyValue
from skyoap.mqe.syntax import Order
from skyoap.storage.api import Equal, MetricsDAO, RecordDAO, RecordSearch
from skyoap.vocabulary.catalogue import (
    ENTITY_COLUMNS,
    PERCENTILE_LABEL,
    Attribute,
    MetricDef,
    MetricsType,
    meter,
)
from skyoap.vocabulary.duration import Duration
from skyoap.vocabulary.entity import GENERAL, Entity, Scope

MAX_ROWS = 9_999
"""The most rows one read of a metric may take: one more is asked for, to
tell a read past it, and Elasticsearch answers at most 10,000 hits a search
(its ``index.max_result_window``). An entity's series is at most 501 rows
(``duration.MAX_STEPS``); a top list over 30 minutes ranks some 300
entities within it."""

_LAYERS = {Attribute.LAYER: GENERAL}
"""What each attribute holds for every entity skyoap measures."""


class TooManyRows(ValueError):
    pass


_WINDOWS = "metrics.windows"
"""Where a request keeps the windows it read whole (``QueryContext.shared``)."""
_AHEAD = "metrics.ahead"
"""Where a request keeps the rows it read ahead, by window and entity."""

RowsByEntity = dict[tuple[str, ...], list[Metrics]]
"""A metric's rows in a window, by the names of their entity."""

_TOO_MANY: RowsByEntity = {}
"""A window with more rows than one read takes: each entity is read alone."""


class StoredMetrics:
    """The MetricReader over a node's metrics storage.

    SkyWalking's UI asks its lists (of services, instances, endpoints) as one
    request of an expression per entity: the rows of all the entities a
    request's expressions read are read at once (``read_ahead``). Within a
    request (``shared``), a metric of an entity not read ahead is read alone
    for its first entity in a window; from its second, the window's rows of
    every entity (at most ``MAX_ROWS``) are read once, and each entity's are
    taken from them (what alarm rules evaluated entity by entity read)."""

    def __init__(
        self, metrics: MetricsDAO, shared: dict[Any, Any] | None = None, records: RecordDAO | None = None
    ) -> None:
        self._metrics = metrics
        self._records = records
        shared = {} if shared is None else shared
        self._windows: dict[Any, RowsByEntity | None] = shared.setdefault(_WINDOWS, {})
        self._ahead: dict[Any, RowsByEntity] = shared.setdefault(_AHEAD, {})

    def read_ahead(self, wanted: Iterable[tuple[MetricDef, Duration, Sequence[Entity]]]) -> None:
        """Reads the rows of each metric over each Duration of every entity
        ``wanted`` at once, in a read per window (a model's rows in a
        Duration) of at most ``MAX_ROWS`` rows: what ``values`` is then asked
        of them is taken from those rows. The entities of a read past
        ``MAX_ROWS`` rows, and what cannot be read, are left to be read as
        ``values`` is asked."""
        windows: dict[Any, tuple[MetricDef, Duration, dict[tuple[str, ...], None]]] = {}
        for metric, duration, of in wanted:
            if metric.model is None or metric.type is MetricsType.SAMPLED_RECORD:
                continue
            try:
                duration.step.downsampling()
                duration.points()
            except ValueError:  # the expression's error, when it is evaluated
                continue
            names = windows.setdefault(_window_key(metric, duration), (metric, duration, {}))[2]
            for entity in of:
                if not entity.missing(metric.scope):
                    names[_names(entity, metric.model)] = None
        for key, (metric, duration, entities) in windows.items():
            ahead = self._ahead.setdefault(key, {})
            unread = [e for e in entities if e not in ahead]
            per_read = max(1, MAX_ROWS // len(duration.points()))
            for first in range(0, len(unread), per_read):
                ahead.update(self._entities_rows(metric, duration, unread[first : first + per_read]))

    def _entities_rows(
        self, metric: MetricDef, duration: Duration, entities: Sequence[tuple[str, ...]]
    ) -> RowsByEntity:
        """The rows of each of ``entities`` (their names in ``ENTITY_COLUMNS``
        order), read at once; none past ``MAX_ROWS`` rows."""
        columns = _columns(metric)
        where: dict[str, Equal] = dict(metric.where)
        for i, column in enumerate(columns):
            values = sorted({names[i] for names in entities})
            where[column] = values[0] if len(values) == 1 else tuple(values)
        try:
            rows = self._rows(metric, duration, where)
        except TooManyRows:
            return {}
        found: RowsByEntity = {names: [] for names in entities}
        names_of = _names_of(columns)
        for row in rows:
            of = found.get(names_of(row))
            if of is not None:  # a read of several columns' values reads their every pairing
                of.append(row)
        return found

    def _entity_rows(self, metric: MetricDef, duration: Duration, entity: Entity) -> list[Metrics]:
        assert metric.model is not None
        key = _window_key(metric, duration)
        ahead = self._ahead.get(key)
        if ahead is not None:
            rows = ahead.get(_names(entity, metric.model))
            if rows is not None:
                return rows
        where = metric.rows_of(entity)
        if key not in self._windows:
            self._windows[key] = None
            return self._rows(metric, duration, where)
        window = self._windows[key]
        columns = _columns(metric)
        if window is None:
            window = _TOO_MANY
            try:
                rows = self._rows(metric, duration, metric.where)
            except TooManyRows:
                pass
            else:
                window = {}
                names_of = _names_of(columns)
                for row in rows:
                    window.setdefault(names_of(row), []).append(row)
            self._windows[key] = window
        if window is _TOO_MANY:
            return self._rows(metric, duration, where)
        return window.get(tuple(where[c] for c in columns), [])

    def _rows(self, metric: MetricDef, duration: Duration, where: Mapping[str, Equal]) -> list[Metrics]:
        assert metric.model is not None, f"{metric.name} is not measured"
        level = duration.step.downsampling()
        rows = self._metrics.query(
            metric.model, level, duration.start_bucket, duration.end_bucket, where, MAX_ROWS + 1
        )
        if len(rows) > MAX_ROWS:
            raise TooManyRows(
                f"{metric.name} has more than {MAX_ROWS} rows in the Duration: "
                "shorten it or take a longer step"
            )
        return rows

    def values(
        self, metric: MetricDef, entity: Entity, duration: Duration, selector: LabelSelector
    ) -> Sequence[LabeledValues]:
        buckets = duration.buckets
        rows = self._entity_rows(metric, duration, entity)
        if metric.type is MetricsType.REGULAR_VALUE:
            return [_series(rows, buckets, metric.column, ())]
        if metric.label_columns:  # percentiles: a series of each rank, when there is data
            return [
                _series(rows, buckets, column, (KeyValue(PERCENTILE_LABEL, rank),))
                for rank, column in metric.label_columns.items()
                if rows
            ]
        by_labels: dict[str, list[Metrics]] = {}
        for row in rows:
            assert isinstance(row, Meter)
            by_labels.setdefault(row.labels, []).append(row)
        return [_series(group, buckets, metric.column, labels_of(text)) for text, group in by_labels.items()]

    def top(self, metric: MetricDef, duration: Duration, condition: TopNCondition) -> Sequence[Ranked]:
        assert metric.model is not None
        if not all((_LAYERS[a.attribute] == a.value) == a.equal for a in condition.attributes):
            return []
        columns = [column for column, _ in ENTITY_COLUMNS[metric.model]]
        where = dict(metric.where)
        if condition.parent_service is not None:
            where[columns[0]] = condition.parent_service
        by_entity: dict[tuple[str, ...], list[float]] = {}
        for row in self._rows(metric, duration, where):
            names = tuple(getattr(row, c) for c in columns)
            by_entity.setdefault(names, []).append(float(_reader_of(type(row), metric.column)(row)))
        means = sorted(((sum(vs) / len(vs), names) for names, vs in by_entity.items()), reverse=True)
        if condition.order is Order.ASC:
            means.reverse()
        return [_ranked(metric, mean, names) for mean, names in means[: condition.limit]]

    def samples(
        self, metric: MetricDef, service: str, duration: Duration, limit: int, order: Order
    ) -> Sequence[Sample]:
        """Read from the records of the Duration's minutes; none without
        ``records`` (what alarm rules evaluate reads no records)."""
        if self._records is None:
            return []
        first_ms = int(duration.start_time.timestamp() * 1000)
        search = RecordSearch(
            first_bucket=minute_bucket(first_ms),
            last_bucket=minute_bucket(duration.end_ms - 1),
            equal={"metric": metric.name, "service": service, "normal": metric.normal},
            at_least={"timestamp": first_ms},
            at_most={"timestamp": duration.end_ms - 1},
            order_by="latency",
            descending=order is Order.DES,
            limit=limit,
        )
        return [
            Sample(r.statement, r.latency, r.trace_id) for r in self._records.search(SampledRecord, search)
        ]

    def meter(self, name: str) -> MetricDef | None:
        found = self._meter_labels().get(name)
        return None if found is None else meter(name, labeled=found)

    def meters(self) -> list[MetricDef]:
        """Every meter agents reported."""
        return [meter(name, labeled=labeled) for name, labeled in sorted(self._meter_labels().items())]

    def _meter_labels(self) -> dict[str, bool]:
        """Each meter's name, and whether its reports carry labels."""
        found: dict[str, bool] = {}
        for name, labels in self._metrics.distinct(MeterMetrics, Downsampling.DAY, 0, ("name", "labels")):
            found[name] = found.get(name, False) or bool(labels)
        return found


def _window_key(metric: MetricDef, duration: Duration) -> tuple[Any, ...]:
    """What every metric read from the same rows of a Duration shares."""
    where = tuple(metric.where.items())
    return metric.model, duration.step, duration.start_bucket, duration.end_bucket, where


def _columns(metric: MetricDef) -> list[str]:
    """The columns naming a metric's entity, in ``ENTITY_COLUMNS`` order."""
    assert metric.model is not None
    return [column for column, _ in ENTITY_COLUMNS[metric.model]]


def _names(entity: Entity, model: type[Metrics]) -> tuple[str, ...]:
    """The names of ``entity`` in ``model``'s rows, in ``ENTITY_COLUMNS`` order."""
    attrs = _ENTITY_NAMES.get(model)
    if attrs is None:
        attrs = _ENTITY_NAMES[model] = operator.attrgetter(*(attr for _, attr in ENTITY_COLUMNS[model]))
    names = attrs(entity)
    return names if isinstance(names, tuple) else (names,)


_ENTITY_NAMES: dict[type[Metrics], Callable[[Entity], Any]] = {}


def _names_of(columns: Sequence[str]) -> Callable[[Metrics], tuple[str, ...]]:
    """The names of a row's entity, its ``columns``' values."""
    if len(columns) == 1:
        (column,) = columns
        return lambda row: (getattr(row, column),)
    return operator.attrgetter(*columns)  # a tuple of two or more


def labels_of(text: str) -> tuple[KeyValue, ...]:
    """A meter's stored labels (``k=v,k=v``) as key-values."""
    return tuple(KeyValue(*pair.split("=", 1)) for pair in text.split(",") if pair)


def _reader_of(model: type[Metrics], column: str) -> Callable[[Metrics], Any]:
    """How to read a column of ``model``'s rows, or one of their derived
    values (a property, or computed only if asked)."""
    found = _READERS.get((model, column))
    if found is None:
        found = operator.attrgetter(column) if hasattr(model, column) else _derived(column)
        _READERS[model, column] = found
    return found


_READERS: dict[tuple[type[Metrics], str], Callable[[Metrics], Any]] = {}


def _derived(column: str) -> Callable[[Metrics], Any]:
    return lambda row: row.derived()[column]


def _series(
    rows: Sequence[Metrics], buckets: Sequence[int], column: str, labels: tuple[KeyValue, ...]
) -> LabeledValues:
    if not rows:
        return LabeledValues(labels, (None,) * len(buckets))
    value = _reader_of(type(rows[0]), column)
    if len(rows) == len(buckets) and tuple(map(_BUCKET, reversed(rows))) == buckets:
        return LabeledValues(labels, tuple([float(value(r)) for r in reversed(rows)]))  # a row at each point
    at = {r.time_bucket: float(value(r)) for r in rows}
    return LabeledValues(labels, tuple(map(at.get, buckets)))


_BUCKET = operator.attrgetter("time_bucket")


def _ranked(metric: MetricDef, mean: float, names: tuple[str, ...]) -> Ranked:
    if metric.scope is Scope.SERVICE_INSTANCE:
        return Ranked(value=mean, service=names[0], normal=True, instance=names[1])
    if metric.scope is Scope.ENDPOINT:
        return Ranked(value=mean, service=names[0], normal=True, endpoint=names[1])
    return Ranked(value=mean, service=names[0], normal=metric.normal)
