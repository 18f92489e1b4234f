"""The evaluator's second strategy: an expression evaluated for every entity
of a population at once, over arrays of entities by minutes, giving what
``Evaluator`` gives one entity at a time.

It reads each minute's rows of a model once (``Frames``), for all the
expressions of a round; each expression is then a few array operations on the
columns it names, by the operators' one definition (``arithmetic``). What it
evaluates: metrics (plain, and labelled: percentiles), numbers, ``+ - * / %``,
comparisons, ``&&`` and ``||``, ``avg``, ``count``, ``sum``, ``max``, ``min``,
``latest``, ``abs``, ``ceil`` and ``floor``, with the evaluator's rules for
pairing operands, for missing points and for the errors that make an
expression false. An expression with anything else is ``Unsupported``; an
entity one of whose values arrays cannot reproduce exactly (a sum of opposite
infinities, which the evaluator refuses) is marked unsure. Callers evaluate
those entity by entity."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from skyoap.layers import CATALOGUE
from skyoap.model import sketch
from skyoap.model.metrics import CallMetrics, Downsampling, Metrics, rank_at
from skyoap.mqe import syntax as s
from skyoap.mqe.arithmetic import (
    ARITHMETIC,
    COMPARISONS,
    LOGIC,
    MATH,
    Apply,
    ExpressionError,
    Flags,
    Floats,
    paired,
)
from skyoap.mqe.reader import LabelSelector
from skyoap.mqe.results import KeyValue, Series
from skyoap.storage.api import MetricsDAO
from skyoap.vocabulary.catalogue import ENTITY_COLUMNS, PERCENTILE_LABEL, MetricDef, MetricsType
from skyoap.vocabulary.duration import Duration, DurationError
from skyoap.vocabulary.entity import Entity

MAX_MINUTE_ROWS = 200_000
"""The most rows of one model a minute's read takes; the rules reading a
minute with more are evaluated entity by entity."""

_EXACT = 2.0**53
"""Below this, sums of whole numbers in doubles are exact in any order."""


@dataclass(frozen=True, eq=False)
class Population:
    """The entities a rule is evaluated for, in order, with their names as
    the entity columns of their model hold them."""

    entities: Sequence[Entity]
    attrs: tuple[str, ...]
    """The ``Entity`` fields naming them (``ENTITY_COLUMNS``)."""
    names: list[tuple[str, ...]]
    ids: npt.NDArray[np.intp]
    """Each one's number in the ``Frames`` that made it."""
    number: int
    """Its own number there."""

    def __len__(self) -> int:
        return len(self.entities)


@dataclass
class _Minute:
    """A minute's rows of a model (one per entity: of several, the last read,
    as the MQE reader keeps it), by entity number."""

    rows: list[Metrics]
    ids: npt.NDArray[np.intp]
    columns: dict[str, Floats] = field(default_factory=dict)
    sketches: sketch.Many | None = None


class Frames:
    """What one round of evaluation reads: each minute's rows of a model (and
    of its ``where``: a relation's side, a meter's name), read once whatever
    number of rules and windows read them, kept as arrays by entity. Entities
    are numbered in the order they are met, across models."""

    def __init__(self, metrics: MetricsDAO) -> None:
        self._metrics = metrics
        self._ids: dict[tuple[str, ...], int] = {}
        self._minutes: dict[tuple[Any, ...], _Minute | None] = {}
        self._matrices: dict[tuple[Any, ...], tuple[Floats, Flags] | None] = {}
        self._populations = 0

    def population(
        self, entities: Sequence[Entity], model: type[Metrics], names: list[tuple[str, ...]] | None = None
    ) -> Population:
        """``entities`` of ``model``, with their ``names`` if known."""
        attrs = tuple(attr for _, attr in ENTITY_COLUMNS[model])
        if names is None:
            names = [tuple(getattr(e, a) for a in attrs) for e in entities]
        ids = np.fromiter((self._number(n) for n in names), np.intp, len(names))
        self._populations += 1
        return Population(entities, attrs, names, ids, self._populations)

    def _number(self, names: tuple[str, ...]) -> int:
        number = self._ids.get(names)
        if number is None:
            number = self._ids[names] = len(self._ids)
        return number

    def _minute(self, model: type[Metrics], where: Mapping[str, str], bucket: int) -> _Minute | None:
        key = (model, tuple(sorted(where.items())), bucket)
        if key in self._minutes:
            return self._minutes[key]
        rows = self._metrics.query(model, Downsampling.MINUTE, bucket, bucket, where, MAX_MINUTE_ROWS + 1)
        minute = None
        if len(rows) <= MAX_MINUTE_ROWS:
            columns = [column for column, _ in ENTITY_COLUMNS[model]]
            last: dict[int, int] = {}
            for i, row in enumerate(rows):
                last[self._number(tuple(getattr(row, c) for c in columns))] = i
            kept = [rows[i] for i in last.values()] if len(last) < len(rows) else rows
            minute = _Minute(kept, np.fromiter(last, np.intp, len(last)))
        self._minutes[key] = minute
        return minute

    def matrix(
        self, metric: MetricDef, column: str, population: Population, buckets: Sequence[int]
    ) -> tuple[Floats, Flags] | None:
        """``column`` of ``metric`` for each of ``population`` (rows) at each
        of ``buckets`` (columns), and where a row holds it; None if a minute
        has too many rows to read at once."""
        assert metric.model is not None
        key = (metric.model, tuple(sorted(metric.where.items())), column, population.number, tuple(buckets))
        if key in self._matrices:
            return self._matrices[key]
        minutes = [self._minute(metric.model, metric.where, b) for b in buckets]
        found: tuple[Floats, Flags] | None = None
        if all(m is not None for m in minutes):
            place = np.full(len(self._ids), -1, np.intp)
            place[population.ids] = np.arange(len(population))
            values = np.zeros((len(population), len(buckets)))
            present = np.zeros((len(population), len(buckets)), np.bool_)
            for t, minute in enumerate(minutes):
                assert minute is not None
                rows = place[minute.ids]
                mine = rows >= 0
                values[rows[mine], t] = _column(minute, column)[mine]
                present[rows[mine], t] = True
            found = (values, present)
        self._matrices[key] = found
        return found


def _column(minute: _Minute, column: str) -> Floats:
    """A column of a minute's rows as the MQE reader takes it: an attribute
    or a derived value (``Metrics.derived``), as a float."""
    values = minute.columns.get(column)
    if values is not None:
        return values
    rows = minute.rows
    if column in _PERCENTILES and rows and all(isinstance(r, CallMetrics) for r in rows):
        values = _percentile(minute, _PERCENTILES[column])
    elif rows and hasattr(type(rows[0]), column):
        values = np.fromiter((float(getattr(r, column)) for r in rows), np.float64, len(rows))
    else:
        values = np.fromiter((float(r.derived()[column]) for r in rows), np.float64, len(rows))
    minute.columns[column] = values
    return values


_PERCENTILES = {f"p{p}": p for p in range(1, 100)}


def _percentile(minute: _Minute, p: int) -> Floats:
    """``CallMetrics.percentile`` of every row."""
    rows: list[CallMetrics] = minute.rows  # type: ignore[assignment]
    if sum(r.calls for r in rows) >= 2**56:  # a sketch holds as many values as calls
        return np.fromiter((float(r.percentile(p)) for r in rows), np.float64, len(rows))  # past int64
    if minute.sketches is None:
        minute.sketches = sketch.Many([r.histogram for r in rows])
    calls = np.fromiter((r.calls for r in rows), np.int64, len(rows))
    return minute.sketches.values_at(rank_at(p, calls))


@dataclass(frozen=True, slots=True)
class _Series:
    """Values (a row per entity, a column per point; a single value has one
    point) and where they are data. Arrays broadcast: a number is one row of one."""

    labels: tuple[KeyValue, ...]
    values: Floats
    present: Flags
    exists: Flags | None = None
    """Which entities have the series: a labelled value's series exists for
    an entity with rows of its metric; an unlabelled one's is None (all)."""

    def with_values(self, values: Floats, present: Flags) -> _Series:
        return _Series(self.labels, values, present, self.exists)


@dataclass(frozen=True, slots=True)
class _Value:
    single: bool
    """SINGLE_VALUE; else TIME_SERIES_VALUES."""
    labeled: bool
    series: tuple[_Series, ...]
    """In the order of their labels."""


class Unsupported(Exception):
    """What arrays do not evaluate: the expression is evaluated entity by entity."""


def _some(flags: Flags) -> Flags:
    """Each row's any."""
    return np.logical_or.reduce(flags, axis=1)


def supported(node: s.Expression) -> bool:
    """Whether arrays evaluate ``node``: only the constructs above, and metrics
    of skyoap's catalogue, one value or percentiles."""
    match node:
        case s.Metric():
            d = CATALOGUE.get(node.name)
            return (
                d is not None
                and d.model is not None
                and (
                    d.type is MetricsType.REGULAR_VALUE
                    or (d.type is MetricsType.LABELED_VALUE and bool(d.label_columns))
                )
            )
        case s.Scalar():
            return True
        case s.Binary() | s.Compare() | s.BoolOp():
            return supported(node.left) and supported(node.right)
        case s.Aggregate() | s.Mathematical():
            return supported(node.operand)
        case _:
            return False


def holding(
    tree: s.Expression, frames: Frames, population: Population, duration: Duration
) -> tuple[Flags, Flags]:
    """Which entities of ``population`` ``tree`` is true (1) for over
    ``duration`` (with labelled values: any of them), as ``Evaluator`` would
    find it for each; and which are unsure, to be evaluated one by one. An
    expression that cannot be evaluated is true for none. Unsupported if
    ``tree`` is not ``supported``, or a minute has too many rows to read at once."""
    if not supported(tree):
        raise Unsupported(str(tree))
    arrays = _Arrays(frames, population, duration)
    out = np.zeros(len(population), np.bool_)
    try:
        with np.errstate(all="ignore"):  # IEEE's infinities and NaN are the evaluator's too
            value = arrays.evaluate(tree)
    except ExpressionError:
        return out, arrays.unsure
    for series in value.series:
        hit = ((series.values == 1) & series.present).any(axis=1)
        if series.exists is not None:
            hit = hit & series.exists
        out |= np.broadcast_to(hit, out.shape)
    return out, arrays.unsure


def series_of(
    metric: s.Metric, frames: Frames, population: Population, duration: Duration
) -> list[tuple[Series, ...]]:
    """The series ``Evaluator`` reads of ``metric`` for each entity of
    ``population``, from the round's arrays. Unsupported where arrays do not
    read it (a meter, a metric not measured, a minute of too many rows);
    ExpressionError where the evaluator's read fails for every entity."""
    definition = CATALOGUE.get(metric.name)
    if definition is None or not supported(metric) or not definition.measured:
        raise Unsupported(metric.name)
    if any(e.missing(definition.scope) for e in population.entities):
        raise Unsupported(f"an entity lacks a name {metric.name} needs")
    value = _Arrays(frames, population, duration)._metric(metric)
    ids = duration.point_ids
    read = []
    for i in range(len(population)):
        read.append(tuple(
            Series(one.labels, ids, tuple([v if p else None for v, p in zip(
                one.values[i].tolist(), one.present[i].tolist(), strict=True)]))
            for one in value.series
            if one.exists is None or one.exists[i]
        ))  # fmt: skip
    return read


class _Arrays:
    """Evaluates an expression for a population over a Duration."""

    def __init__(self, frames: Frames, population: Population, duration: Duration) -> None:
        self.frames, self.population, self.duration = frames, population, duration
        self.unsure = np.zeros(len(population), np.bool_)
        """Entities to evaluate one by one."""

    def evaluate(self, node: s.Expression) -> _Value:
        match node:
            case s.Metric():
                return self._metric(node)
            case s.Scalar():
                return _Value(True, False, (_Series((), np.full((1, 1), node.value), np.ones((1, 1), bool)),))
            case s.Binary():
                return _combine(self.evaluate(node.left), self.evaluate(node.right), ARITHMETIC[node.op])
            case s.Compare():
                return _combine(self.evaluate(node.left), self.evaluate(node.right), COMPARISONS[node.op])
            case s.BoolOp():
                for operand in (node.left, node.right):
                    if not isinstance(operand, s.Compare | s.BoolOp):
                        raise ExpressionError("a bool operation's operand is not a comparison")
                return _combine(self.evaluate(node.left), self.evaluate(node.right), LOGIC[node.op])
            case s.Aggregate():
                return self._aggregate(self.evaluate(node.operand), node.func)
            case s.Mathematical():
                value, apply = self.evaluate(node.operand), MATH[node.func]
                series = tuple(v.with_values(apply(v.values), v.present) for v in value.series)
                return _Value(value.single, value.labeled, series)
            case _:
                raise Unsupported(str(node))

    def _metric(self, metric: s.Metric) -> _Value:
        definition = CATALOGUE[metric.name]
        assert definition.model is not None
        if tuple(a for _, a in ENTITY_COLUMNS[definition.model]) != self.population.attrs:
            raise Unsupported(f"{metric.name} names its entities otherwise")
        try:
            self.duration.step.downsampling()
            buckets = [p.bucket for p in self.duration.points()]
        except DurationError as e:
            raise ExpressionError(str(e)) from None
        if definition.type is MetricsType.REGULAR_VALUE:
            return _Value(False, False, (self._read(definition, (), definition.column, buckets),))
        selector = LabelSelector.of(metric.labels)
        series = []
        for rank, column in definition.label_columns.items():
            labels = (KeyValue(PERCENTILE_LABEL, rank),)
            if selector.selects(labels):
                series.append(self._read(definition, labels, column, buckets))
        return _Value(False, True, tuple(sorted(series, key=lambda x: x.labels)))

    def _read(
        self, definition: MetricDef, labels: tuple[KeyValue, ...], column: str, buckets: list[int]
    ) -> _Series:
        found = self.frames.matrix(definition, column, self.population, buckets)
        if found is None:
            raise Unsupported(f"a minute of {definition.name} has more than {MAX_MINUTE_ROWS} rows")
        values, present = found
        # A labelled metric's series are there for an entity with rows in the Duration.
        return _Series(labels, values, present, _some(present) if labels else None)

    def _aggregate(self, value: _Value, func: s.Aggregation) -> _Value:
        if func is s.Aggregation.LATEST and value.single:
            raise ExpressionError("latest needs a time series")
        out = []
        for series in value.series:
            values, present = np.broadcast_arrays(series.values, series.present)
            one, has = _AGGREGATIONS[func](self, values, present)
            out.append(series.with_values(one[:, None], has[:, None]))
        return _Value(True, value.labeled, tuple(out))

    def _sum(self, values: Floats, present: Flags) -> tuple[Floats, Flags]:
        """Each row's sum of its data, exactly as ``math.fsum`` gives it: at
        once where the terms are whole numbers small enough for any order to
        be exact, else row by row; a row fsum refuses (inf + -inf) is unsure."""
        data = np.where(present, values, 0.0)
        whole = np.isfinite(data) & (data == np.floor(data)) & ~((data == 0) & np.signbit(data))
        exact = whole.all(axis=1) & (np.abs(data).sum(axis=1) < _EXACT)
        sums = data.sum(axis=1)
        refused = np.zeros(len(sums), np.bool_)
        for i in np.flatnonzero(~exact):
            try:
                sums[i] = math.fsum(values[i][present[i]])
            except ValueError:
                refused[i] = True
        # A number's one row stands for every entity.
        self.unsure |= np.broadcast_to(refused, self.unsure.shape)
        return sums, np.ones(len(sums), np.bool_)

    def _average(self, values: Floats, present: Flags) -> tuple[Floats, Flags]:
        sums, _ = self._sum(values, present)
        counts = present.sum(axis=1)
        return sums / counts, counts > 0

    def _count(self, values: Floats, present: Flags) -> tuple[Floats, Flags]:
        return present.sum(axis=1).astype(np.float64), np.ones(len(values), np.bool_)

    def _extreme(self, values: Floats, present: Flags, greatest: bool) -> tuple[Floats, Flags]:
        """max or min in Java's order of doubles, NaN above every number: the
        first point holding it (of 0 and -0, which compare equal, the first)."""
        nan = present & np.isnan(values)
        numbers = present & ~nan
        if greatest:
            best = np.where(numbers, values, -np.inf).max(axis=1)
            nan_wins = nan.any(axis=1)
        else:
            best = np.where(numbers, values, np.inf).min(axis=1)
            nan_wins = nan.any(axis=1) & ~numbers.any(axis=1)
        first = (numbers & (values == best[:, None])).argmax(axis=1)
        found = np.where(nan_wins, np.nan, values[np.arange(len(values)), first])
        return found, _some(present)

    def _latest(self, values: Floats, present: Flags) -> tuple[Floats, Flags]:
        last = present.shape[1] - 1 - present[:, ::-1].argmax(axis=1)
        return values[np.arange(len(values)), last], _some(present)


_AGGREGATIONS: dict[s.Aggregation, Callable[[_Arrays, Floats, Flags], tuple[Floats, Flags]]] = {
    s.Aggregation.SUM: _Arrays._sum,
    s.Aggregation.AVG: _Arrays._average,
    s.Aggregation.COUNT: _Arrays._count,
    s.Aggregation.MAX: lambda a, v, p: a._extreme(v, p, greatest=True),
    s.Aggregation.MIN: lambda a, v, p: a._extreme(v, p, greatest=False),
    s.Aggregation.LATEST: _Arrays._latest,
}


def _combine(left: _Value, right: _Value, apply: Apply) -> _Value:
    """The operands' series paired as the evaluator pairs them
    (``arithmetic.paired``), combined point by point."""
    pairs = paired(left.series, left.labeled, right.series, right.labeled, lambda series, _: series[0])
    both = left.labeled and right.labeled
    out = tuple(_pair(labels, a, b, apply, both) for labels, a, b in pairs)
    return _Value(left.single and right.single, left.labeled or right.labeled, out)


def _pair(labels: tuple[KeyValue, ...], a: _Series, b: _Series | None, apply: Apply, both: bool) -> _Series:
    """``a`` and ``b`` point by point (a single value with each point); no
    data where either has none. The result exists where its labelled operand
    does; of two labelled ones, it has data only where the right one exists."""
    exists = a.exists if a.exists is not None or b is None else b.exists  # a labelled one's
    if b is None:
        return _Series(labels, np.zeros_like(a.values), np.zeros_like(a.present), exists)
    present = a.present & b.present
    if both and b.exists is not None:
        present = present & b.exists[:, None]
    return _Series(labels, apply(a.values, b.values), present, exists)
