"""A rule's expression evaluated for every entity of a window at once, over
arrays of entities by minutes, giving what ``held`` gives one entity at a time.

A round of evaluation reads each minute's rows of a model once (``Frames``),
for all its rules; each rule's expression is then a few array operations on
the columns it names. What this evaluates: metrics (plain, and labelled:
percentiles), numbers, ``+ - * / %``, comparisons, ``&&`` and ``||``,
``avg``, ``count``, ``sum``, ``max``, ``min``, ``latest``, ``abs``, ``ceil``
and ``floor``, with the MQE engine's rules for pairing operands, for missing
points and for the errors that make an expression false. An expression with
anything else is handed to ``held``, entity by entity; so is an entity one of
whose values arrays cannot reproduce exactly (a sum of opposite infinities,
which the engine refuses, or the sign of a zero ``max`` or ``min`` picks)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

from skyoap.alarm.evaluation import Watched, entity_name, entity_names, entity_of_names, held
from skyoap.alarm.settings import Rule
from skyoap.model.metrics import LATENCY_BUCKETS_MS, SEP, CallMetrics, Downsampling, Metrics
from skyoap.mqe import syntax as s
from skyoap.mqe.arithmetic import ExpressionError
from skyoap.mqe.catalogue import CATALOGUE, ENTITY_COLUMNS, PERCENTILE_LABEL, MetricDef, MetricsType
from skyoap.mqe.duration import Duration, DurationError
from skyoap.mqe.entity import Entity
from skyoap.mqe.reader import LabelSelector
from skyoap.mqe.results import KeyValue
from skyoap.mqe.stored import StoredMetrics
from skyoap.storage.api import MetricsDAO

Floats: TypeAlias = npt.NDArray[np.float64]
Flags: TypeAlias = npt.NDArray[np.bool_]

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
    histograms: npt.NDArray[np.int64] | None = None


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
_BOUNDS = np.array(LATENCY_BUCKETS_MS, np.float64)


def _percentile(minute: _Minute, p: int) -> Floats:
    """``CallMetrics.percentile`` of every row: the lower bound of the first
    latency bucket holding calls whose running count reaches the rank
    ceil(p% of calls); 0 where there is none."""
    rows: list[CallMetrics] = minute.rows  # type: ignore[assignment]
    calls = np.fromiter((r.calls for r in rows), np.int64, len(rows))
    if minute.histograms is None:
        width = len(LATENCY_BUCKETS_MS)
        padded = (tuple(r.histogram[:width]) + (0,) * (width - len(r.histogram)) for r in rows)
        minute.histograms = np.array(list(padded), np.int64).reshape(len(rows), width)
    histograms = minute.histograms
    if np.abs(calls).max(initial=0) >= 2**56 or np.abs(histograms).sum(axis=1).max(initial=0) >= 2**56:
        return np.fromiter((float(r.percentile(p)) for r in rows), np.float64, len(rows))  # past int64
    rank = (p * calls + 99) // 100
    reached = (histograms != 0) & (np.cumsum(histograms, axis=1) >= rank[:, None])
    return np.where(reached.any(axis=1), _BOUNDS[reached.argmax(axis=1)], 0.0)


@dataclass(frozen=True, slots=True)
class _Series:
    """Values (a row per entity, a column per point; a single value has one
    point) and where they are data. Arrays broadcast: a number is one row of one."""

    values: Floats
    present: Flags
    exists: Flags | None = None
    """Which entities have the series (a labelled value's series exists for
    an entity with rows of its metric); None: all."""


@dataclass(frozen=True, slots=True)
class _Value:
    single: bool
    """SINGLE_VALUE; else TIME_SERIES_VALUES."""
    labeled: bool
    series: tuple[tuple[tuple[KeyValue, ...], _Series], ...]
    """By their labels, in the order of their labels."""


class _Unsupported(Exception):
    """What arrays do not evaluate: the expression is evaluated entity by entity."""


_Apply = Callable[[Floats, Floats], Floats]


def _some(flags: Flags) -> Flags:
    """Each row's any."""
    return np.logical_or.reduce(flags, axis=1)


_ARITHMETIC: dict[s.BinaryOperator, _Apply] = {
    s.BinaryOperator.ADD: np.add,
    s.BinaryOperator.SUB: np.subtract,
    s.BinaryOperator.MUL: np.multiply,
    s.BinaryOperator.DIV: np.divide,  # IEEE, as Java: x / 0 infinite, 0 / 0 NaN
    s.BinaryOperator.MOD: np.fmod,  # the dividend's sign; NaN for x % 0 and inf % x
}


def _truth(test: Callable[[Floats, Floats], Flags]) -> _Apply:
    return lambda a, b: test(a, b).astype(np.float64)


_COMPARISONS: dict[s.Comparison, _Apply] = {
    s.Comparison.DEQ: _truth(np.equal),
    s.Comparison.NEQ: _truth(np.not_equal),
    s.Comparison.LTE: _truth(np.less_equal),
    s.Comparison.LT: _truth(np.less),
    s.Comparison.GTE: _truth(np.greater_equal),
    s.Comparison.GT: _truth(np.greater),
}

_LOGIC: dict[s.BoolOperator, _Apply] = {
    s.BoolOperator.AND: _truth(lambda a, b: (a == 1) & (b == 1)),
    s.BoolOperator.OR: _truth(lambda a, b: (a == 1) | (b == 1)),
}

_MATH: dict[s.MathFunction, Callable[[Floats], Floats]] = {
    s.MathFunction.ABS: np.abs,
    # + 0.0: Java's (and the engine's) ceil(-0.5) is 0, not -0.
    s.MathFunction.CEIL: lambda v: np.ceil(v) + 0.0,
    s.MathFunction.FLOOR: lambda v: np.floor(v) + 0.0,
}


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
                return _Value(
                    True, False, (((), _Series(np.full((1, 1), node.value), np.ones((1, 1), bool))),)
                )
            case s.Binary():
                return _combine(self.evaluate(node.left), self.evaluate(node.right), _ARITHMETIC[node.op])
            case s.Compare():
                return _combine(self.evaluate(node.left), self.evaluate(node.right), _COMPARISONS[node.op])
            case s.BoolOp():
                for operand in (node.left, node.right):
                    if not isinstance(operand, s.Compare | s.BoolOp):
                        raise ExpressionError("a bool operation's operand is not a comparison")
                return _combine(self.evaluate(node.left), self.evaluate(node.right), _LOGIC[node.op])
            case s.Aggregate():
                return self._aggregate(self.evaluate(node.operand), node.func)
            case s.Mathematical():
                value = self.evaluate(node.operand)
                apply = _MATH[node.func]
                series = tuple((k, _Series(apply(v.values), v.present, v.exists)) for k, v in value.series)
                return _Value(value.single, value.labeled, series)
            case _:
                raise _Unsupported(str(node))

    def _metric(self, metric: s.Metric) -> _Value:
        definition = CATALOGUE[metric.name]
        assert definition.model is not None
        if tuple(a for _, a in ENTITY_COLUMNS[definition.model]) != self.population.attrs:
            raise _Unsupported(f"{metric.name} names its entities otherwise")
        try:
            self.duration.step.downsampling()
            buckets = [p.bucket for p in self.duration.points()]
        except DurationError as e:
            raise ExpressionError(str(e)) from None
        if definition.type is MetricsType.REGULAR_VALUE:
            return _Value(False, False, (((), self._read(definition, definition.column, buckets, False)),))
        selector = LabelSelector.of(metric.labels)
        series = []
        for rank, column in definition.label_columns.items():
            labels = (KeyValue(PERCENTILE_LABEL, rank),)
            if selector.selects(labels):
                series.append((labels, self._read(definition, column, buckets, True)))
        return _Value(False, True, tuple(sorted(series, key=lambda x: x[0])))

    def _read(self, definition: MetricDef, column: str, buckets: list[int], labeled: bool) -> _Series:
        found = self.frames.matrix(definition, column, self.population, buckets)
        if found is None:
            raise _Unsupported(f"a minute of {definition.name} has more than {MAX_MINUTE_ROWS} rows")
        values, present = found
        # A labelled metric's series are there for an entity with rows in the Duration.
        return _Series(values, present, _some(present) if labeled else None)

    def _aggregate(self, value: _Value, func: s.Aggregation) -> _Value:
        if func is s.Aggregation.LATEST and value.single:
            raise ExpressionError("latest needs a time series")
        out = []
        for labels, series in value.series:
            values, present = np.broadcast_arrays(series.values, series.present)
            one, has = _AGGREGATIONS[func](self, values, present)
            out.append((labels, _Series(one[:, None], has[:, None], series.exists)))
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
        self._unsure(refused)
        return sums, np.ones(len(sums), np.bool_)

    def _unsure(self, rows: Flags) -> None:
        """Marks ``rows`` to be evaluated one by one (a number's one row: every entity)."""
        self.unsure |= np.broadcast_to(rows, self.unsure.shape)

    def _average(self, values: Floats, present: Flags) -> tuple[Floats, Flags]:
        sums, _ = self._sum(values, present)
        counts = present.sum(axis=1)
        return sums / counts, counts > 0

    def _count(self, values: Floats, present: Flags) -> tuple[Floats, Flags]:
        return present.sum(axis=1).astype(np.float64), np.ones(len(values), np.bool_)

    def _extreme(self, values: Floats, present: Flags, greatest: bool) -> tuple[Floats, Flags]:
        """max or min in Java's order of doubles, NaN above every number."""
        nan = present & np.isnan(values)
        numbers = present & ~nan
        if greatest:
            found = np.where(numbers, values, -np.inf).max(axis=1)
            found = np.where(nan.any(axis=1), np.nan, found)
        else:
            found = np.where(numbers, values, np.inf).min(axis=1)
            found = np.where(nan.any(axis=1) & ~numbers.any(axis=1), np.nan, found)
        # Of 0 and -0, which compare equal, the engine keeps the first: its sign may tell.
        zeros = numbers & (values == 0)
        signs = (zeros & np.signbit(values)).any(axis=1) & (zeros & ~np.signbit(values)).any(axis=1)
        self._unsure((found == 0) & signs)
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


def _combine(left: _Value, right: _Value, apply: _Apply) -> _Value:
    """``arithmetic.combine``'s pairing: labelled series with the unlabelled
    operand's one series, or with the other operand's series of the same
    labels (none: no data); the result has the labelled operand's series."""
    single = left.single and right.single
    if left.labeled and right.labeled:
        partners = {frozenset(labels): series for labels, series in right.series}
        pairs = [(labels, series, partners.get(frozenset(labels))) for labels, series in left.series]
        out = tuple((labels, _pair(a, b, apply, a.exists, b)) for labels, a, b in pairs)
    elif left.labeled:
        only = right.series[0][1]
        out = tuple((labels, _pair(a, only, apply, a.exists, None)) for labels, a in left.series)
    elif right.labeled:
        only = left.series[0][1]
        out = tuple((labels, _pair(only, b, apply, b.exists, None)) for labels, b in right.series)
    else:
        out = (((), _pair(left.series[0][1], right.series[0][1], apply, None, None)),)
    return _Value(single, left.labeled or right.labeled, out)


def _pair(
    a: _Series, b: _Series | None, apply: _Apply, exists: Flags | None, partner: _Series | None
) -> _Series:
    """``a`` and ``b`` point by point (a single value with each point); no
    data where either has none, or, for labelled pairs, where ``partner`` (the
    right operand's series) is missing for an entity."""
    if b is None:
        return _Series(np.zeros_like(a.values), np.zeros_like(a.present), exists)
    values = apply(a.values, b.values)
    present = a.present & b.present
    if partner is not None and partner.exists is not None:
        present = present & partner.exists[:, None]
    return _Series(values, present, exists)


def _holding(value: _Value, entities: int) -> Flags:
    """The entities for which some point of some series is 1."""
    out = np.zeros(entities, np.bool_)
    for _, series in value.series:
        hit = ((series.values == 1) & series.present).any(axis=1)
        if series.exists is not None:
            hit = hit & series.exists
        out |= np.broadcast_to(hit, (entities,))
    return out


def held_all(
    w: Watched,
    population: Population,
    duration: Duration,
    frames: Frames,
    reader: StoredMetrics,
    wanted: Flags,
) -> Flags:
    """``held(w, e, duration, reader)`` for each entity ``e`` of ``population``
    that is ``wanted``; False for the others."""
    arrays = _Arrays(frames, population, duration)
    try:
        if not supported(w.tree):
            raise _Unsupported(str(w.tree))
        try:
            with np.errstate(all="ignore"):  # IEEE's infinities and NaN are the engine's too
                out = _holding(arrays.evaluate(w.tree), len(population)) & wanted
        except ExpressionError:
            out = np.zeros(len(population), np.bool_)
        one_by_one = arrays.unsure & wanted
    except _Unsupported:
        out, one_by_one = np.zeros(len(population), np.bool_), wanted
    for i in np.flatnonzero(one_by_one).tolist():
        out[i] = held(w, population.entities[i], duration, reader)
    return out


@dataclass(eq=False)
class Listing:
    """The entities of a scope with rows in a window, as a round of alarms
    takes them: each one's routing key (``entity_key``), alarm bucket and
    name, where it is by key, and whether this node evaluates its bucket."""

    population: Population
    keys: list[str]
    place: dict[str, int]
    """By key."""
    buckets: list[int]
    mine: Flags
    names: list[str]
    """SkyWalking's names of the entities, which rules include and exclude by."""

    @functools.cached_property
    def _by_name(self) -> dict[str, list[int]]:
        found: dict[str, list[int]] = {}
        for i, name in enumerate(self.names):
            found.setdefault(name, []).append(i)
        return found

    def covered(self, rule: Rule) -> Flags:
        """The entities ``rule`` watches (``Rule.covers``)."""
        everyone = len(self.keys)
        named = rule.include_names or rule.exclude_names
        if not (named or rule.include_names_regex or rule.exclude_names_regex):
            return np.ones(everyone, np.bool_)
        out = np.zeros(everyone, np.bool_)
        if rule.include_names:  # no other name is covered: look those up
            for name in rule.include_names:
                for i in self._by_name.get(name, ()):
                    out[i] = rule.covers(name)
            return out
        for i, name in enumerate(self.names):
            out[i] = rule.covers(name)
        return out


class Listings:
    """The entities each rule of a round watches, listed once for each model
    and window start (``evaluation.entities``), each entity's bucket and name
    found once for the round."""

    def __init__(
        self, frames: Frames, metrics: MetricsDAO, bucket_of: Callable[[str], int], owned: Collection[int]
    ) -> None:
        self._frames, self._metrics, self._bucket_of, self._owned = frames, metrics, bucket_of, owned
        self._listed: dict[tuple[Any, int], Listing] = {}
        self._entities: dict[tuple[Any, str], tuple[Entity, int, str]] = {}
        """Each entity, its bucket and its name, by scope and key (an instance
        and an endpoint may have the same key)."""

    def of(self, w: Watched, duration: Duration) -> Listing:
        found = self._listed.get((w.metric.model, duration.start_bucket))
        if found is None:
            found = self._listed[(w.metric.model, duration.start_bucket)] = self._list(w, duration)
        return found

    def _list(self, w: Watched, duration: Duration) -> Listing:
        assert w.metric.model is not None
        names = entity_names(self._metrics, w, duration)
        keys = [SEP.join(n) for n in names]
        known = [
            self._entities.get((w.scope, k)) or self._entity(w, k, n)
            for k, n in zip(keys, names, strict=True)
        ]
        population = self._frames.population([e for e, _, _ in known], w.metric.model, names)
        buckets = [b for _, b, _ in known]
        mine = np.fromiter((b in self._owned for b in buckets), np.bool_, len(buckets))
        place = {k: i for i, k in enumerate(keys)}
        return Listing(population, keys, place, buckets, mine, [name for _, _, name in known])

    def _entity(self, w: Watched, key: str, names: tuple[str, ...]) -> tuple[Entity, int, str]:
        e = entity_of_names(w, names)
        found = self._entities[(w.scope, key)] = (e, self._bucket_of(key), entity_name(w.scope, e))
        return found
