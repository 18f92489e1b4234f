"""PromQL over skyoap's metrics, as SkyWalking's PromQL service names them:
a selector reads a metric of the catalogue (``layers.CATALOGUE``) through
the MQE reader, for the entity its labels name (``layer`` always;
``service``, ``service_instance``, ``endpoint`` and their ``dest_`` twins as
its scope needs; ``p`` for a percentile's ranks; ``top_n``, ``order`` and
``parent_service`` for a top list), and each series carries SkyWalking's
labels (``__name__``, ``layer``, ``scope``, the entity's names).

Expressions are evaluated at Prometheus's evaluation times (one for an
instant query, every ``step`` from ``start`` for a range query): a metric's
value at a time is its bucket's holding that time (an instant query, at
the minute still being written, falls back on the minute before, as
SkyWalking's looks two minutes back). Buckets are minutes, or hours or days
when the times span more than ``MAX_STEPS`` minutes.

Parsed by ``promql_parser`` (Prometheus's own grammar). What it parses and
skyoap does not evaluate is refused with ``BadData`` saying why."""

from __future__ import annotations

import bisect
import datetime
import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import promql_parser as pp

from skyoap.layers import CATALOGUE
from skyoap.model.layers import LAYERS
from skyoap.mqe import results, syntax
from skyoap.mqe.arithmetic import ExpressionError
from skyoap.mqe.evaluator import RANKED_SCOPES, Evaluator
from skyoap.mqe.reader import MetricReader
from skyoap.vocabulary.catalogue import PERCENTILE_LABEL, MetricDef, MetricsType
from skyoap.vocabulary.duration import MAX_STEPS, SERVER_ZONE, Duration, DurationError, Step
from skyoap.vocabulary.entity import Entity, Scope

Labels = tuple[tuple[str, str], ...]
"""A series' labels, sorted by name."""

NAME = "__name__"
LOOK_BACK_MS = 120_000
"""How far an instant query looks back for a value, as SkyWalking's does."""
MAX_SERIES = 10_000
"""Most series one expression yields (a selector, or what combines them)."""


class BadData(ValueError):
    """A query skyoap cannot answer: Prometheus's ``bad_data``, with why."""


@dataclass(frozen=True, slots=True)
class Series:
    labels: Labels
    values: tuple[float | None, ...]
    """One per evaluation time; None where the series has no value."""


@dataclass(frozen=True, slots=True)
class Vector:
    series: tuple[Series, ...]
    ordered: bool = False
    """Whether the order of ``series`` is the answer's (``sort``, ``topk``)."""


@dataclass(frozen=True, slots=True)
class Samples:
    labels: Labels
    points: tuple[tuple[int, float], ...]
    """Each bucket's start (epoch ms) and value."""


@dataclass(frozen=True, slots=True)
class Matrix:
    """A range selector's samples: those of the buckets starting within
    ``range_ms`` up to each evaluation time."""

    series: tuple[Samples, ...]
    range_ms: int


@dataclass(frozen=True, slots=True)
class Scalar:
    values: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class String:
    value: str


Value = Vector | Matrix | Scalar | String

_SCOPE_LABELS: Mapping[Scope, tuple[tuple[str, str], ...]] = {
    Scope.SERVICE: (("service", "service_name"),),
    Scope.SERVICE_INSTANCE: (("service", "service_name"), ("service_instance", "service_instance_name")),
    Scope.ENDPOINT: (("service", "service_name"), ("endpoint", "endpoint_name")),
    Scope.SERVICE_RELATION: (("service", "service_name"), ("dest_service", "dest_service_name")),
    Scope.SERVICE_INSTANCE_RELATION: (
        ("service", "service_name"), ("service_instance", "service_instance_name"),
        ("dest_service", "dest_service_name"), ("dest_service_instance", "dest_service_instance_name"),
    ),
    Scope.ENDPOINT_RELATION: (
        ("service", "service_name"), ("endpoint", "endpoint_name"),
        ("dest_service", "dest_service_name"), ("dest_endpoint", "dest_endpoint_name"),
    ),
}  # fmt: skip
"""The labels naming an entity of each scope, and the ``Entity`` field each fills."""

RESERVED = frozenset({NAME, "layer", "scope", "dest_layer", "top_n", "order", "parent_service",
                      *(label for labels in _SCOPE_LABELS.values() for label, _ in labels)})  # fmt: skip
"""The labels a selector names what it reads by; any other selects a labelled value."""

RANKED_LABEL = {
    Scope.SERVICE: "service",
    Scope.SERVICE_INSTANCE: "service_instance",
    Scope.ENDPOINT: "endpoint",
}


@dataclass(frozen=True)
class Times:
    """The evaluation times of a query (epoch ms), and how far back a value is looked for."""

    at_ms: tuple[int, ...]
    look_back_ms: int = 0

    def duration(self, reach_ms: int = 0) -> Duration:
        """The Duration of the buckets holding every time, and ``reach_ms``
        before the first: minutes, or the finest step that keeps within ``MAX_STEPS``."""
        first = min(self.at_ms) - reach_ms - self.look_back_ms
        last = max(self.at_ms)
        for step in (Step.MINUTE, Step.HOUR, Step.DAY):
            if (last - first) // (step.width // datetime.timedelta(milliseconds=1)) < MAX_STEPS:
                break
        else:
            raise BadData(f"the query spans more than {MAX_STEPS} days: ask for a shorter range")
        start, end = (datetime.datetime.fromtimestamp(ms / 1000, SERVER_ZONE) for ms in (first, last))
        try:
            return Duration(step.format(start), step.format(end), step)
        except DurationError as e:
            raise BadData(str(e)) from None

    def values_at(
        self, ids: Sequence[int], values: Sequence[float | None], width_ms: int
    ) -> tuple[float | None, ...]:
        """A bucket series (its starts ``ids``, ascending) at each time: the
        value of the bucket holding it, else of the latest within the look back."""
        found: list[float | None] = []
        for at in self.at_ms:
            i, value = bisect.bisect_right(ids, at) - 1, None
            while i >= 0 and at - ids[i] < width_ms + self.look_back_ms:
                if values[i] is not None:
                    value = values[i]
                    break
                i -= 1
            found.append(value)
        return tuple(found)


class PromQL:
    """Evaluates parsed PromQL at ``times``, reading through ``reader``."""

    def __init__(self, reader: MetricReader, times: Times) -> None:
        self.reader, self.times = reader, times

    def evaluate(self, node: Any) -> Value:
        match node:
            case pp.NumberLiteral():
                return Scalar((node.val,) * len(self.times.at_ms))
            case pp.StringLiteral():
                return String(node.val)
            case pp.ParenExpr():
                return self.evaluate(node.expr)
            case pp.UnaryExpr():
                return _apply(self.evaluate(node.expr), operator.neg, keep_name=False)
            case pp.VectorSelector():
                return self._select(node)
            case pp.MatrixSelector():
                return self._range(node)
            case pp.BinaryExpr():
                return self._binary(node)
            case pp.AggregateExpr():
                return self._aggregate(node)
            case pp.Call():
                return self._call(node)
            case pp.SubqueryExpr():
                raise BadData("subqueries are not supported: ask a range query instead")
        raise BadData(f"{type(node).__name__} is not supported")

    def vector(self, node: Any) -> Vector:
        value = self.evaluate(node)
        if not isinstance(value, Vector):
            raise BadData(f"expected an instant vector, got {_kind(value)} ({node})")
        return value

    def _select(self, node: pp.VectorSelector) -> Vector:
        read = _Read.of(node)
        duration = self.times.duration()
        width = _width_ms(duration)
        series = [
            Series(labels, self.times.values_at(ids, values, width))
            for labels, ids, values in self._bucket_series(read, duration)
        ]
        return Vector(tuple(series), ordered=read.top is not None)  # a top list in its order

    def _range(self, node: pp.MatrixSelector) -> Matrix:
        read = _Read.of(node.vector_selector)
        range_ms = int(node.range / datetime.timedelta(milliseconds=1))
        duration = self.times.duration(range_ms)
        found = []
        for labels, ids, values in self._bucket_series(read, duration):
            points = tuple((t, v) for t, v in zip(ids, values, strict=True) if v is not None)
            found.append(Samples(labels, points))
        return Matrix(tuple(found), range_ms)

    def _bucket_series(
        self, read: _Read, duration: Duration
    ) -> list[tuple[Labels, list[int], list[float | None]]]:
        """``read``'s series over ``duration``: labels, bucket starts, values."""
        try:
            if read.top is not None:
                evaluated = Evaluator(self.reader, read.entity, duration).evaluate(read.top)
                return _ranked(read, evaluated.series, duration)
            evaluated = Evaluator(self.reader, read.entity, duration).evaluate(read.metric)
        except ExpressionError as e:
            raise BadData(str(e)) from None
        found = []
        for one in evaluated.series:
            extra = {kv.key: kv.value for kv in one.labels}
            ids = [int(i) for i in one.ids if i is not None]
            found.append((read.labels(extra), ids, list(one.values)))
        if len(found) > MAX_SERIES:
            raise BadData(
                f"{read.definition.name} has more than {MAX_SERIES} series here: narrow the selector"
            )
        return found

    def _binary(self, node: pp.BinaryExpr) -> Value:
        op = str(node.op)
        modifier = node.modifier
        lhs, rhs = self.evaluate(node.lhs), self.evaluate(node.rhs)
        if op in ("and", "or", "unless"):
            return _set_operation(op, _as_vector(lhs), _as_vector(rhs), modifier)
        function = _OPERATORS.get(op)
        if function is None:
            raise BadData(f"the operator {op} is not supported")
        as_bool = bool(modifier and modifier.return_bool)  # the parser refuses scalars compared without it
        return _combine(lhs, rhs, function, modifier, op in _COMPARISONS, as_bool)

    def _aggregate(self, node: pp.AggregateExpr) -> Vector:
        op = str(node.op)
        vector = self.vector(node.expr)
        modifier = node.modifier
        by = None if modifier is None else (str(modifier.type).endswith("By"), tuple(modifier.labels))
        if op in ("topk", "bottomk"):
            k = self._number(node.param, op)
            return _ranked_k(vector, int(k), op == "topk", by)
        reduce = _AGGREGATIONS.get(op)
        if reduce is None:
            raise BadData(
                f"the aggregation {op} is not supported: sum, avg, min, max, count, group, topk, bottomk are"
            )
        return _grouped(vector, reduce, by)

    def _number(self, node: Any, what: str) -> float:
        value = self.evaluate(node)
        if not isinstance(value, Scalar):
            raise BadData(f"{what} takes a number, not {_kind(value)}")
        return value.values[0]

    def _call(self, node: pp.Call) -> Value:
        name = node.func.name
        if name in _MATH:
            (argument,) = node.args
            return _apply(self.evaluate(argument), _MATH[name], keep_name=False)
        if name in _OVER_TIME:
            return self._over_time(node.args[0], _OVER_TIME[name])
        if name in ("sort", "sort_desc"):
            return _sorted(self.vector(node.args[0]), descending=name == "sort_desc")
        if name == "round":
            nearest = self._number(node.args[1], "round") if len(node.args) > 1 else 1.0
            return _apply(
                self.evaluate(node.args[0]), lambda v: math.floor(v / nearest + 0.5) * nearest, False
            )
        if name == "label_replace":
            return self._label_replace(node.args)
        if name == "time":
            return Scalar(tuple(t / 1000 for t in self.times.at_ms))
        if name == "vector":
            scalar = self.evaluate(node.args[0])
            assert isinstance(scalar, Scalar)
            return Vector((Series((), tuple(scalar.values)),))
        if name in _COUNTER_FUNCTIONS:
            raise BadData(
                f"{name} reads counters; skyoap's metrics are values per bucket (service_cpm is already "
                "calls per minute): use sum_over_time, avg_over_time or the metric itself"
            )
        raise BadData(f"the function {name} is not supported")

    def _over_time(self, argument: Any, reduce: Callable[[list[float]], float]) -> Vector:
        matrix = self.evaluate(argument)
        if not isinstance(matrix, Matrix):
            raise BadData(f"the function takes a range vector (a selector with [range]), not {_kind(matrix)}")
        found = []
        for one in matrix.series:
            values = []
            for at in self.times.at_ms:
                window = [v for t, v in one.points if at - matrix.range_ms < t <= at]
                values.append(reduce(window) if window else None)
            found.append(Series(_without_name(one.labels), tuple(values)))
        return Vector(tuple(found))

    def _label_replace(self, arguments: Sequence[Any]) -> Vector:
        vector = self.vector(arguments[0])
        texts: list[str] = []
        for argument in arguments[1:]:
            text = self.evaluate(argument)
            if not isinstance(text, String):
                raise BadData("label_replace takes a vector and four strings")
            texts.append(text.value)
        destination, replacement, source, pattern = texts
        try:
            regex = re.compile(f"^(?:{pattern})$")
        except re.error as e:
            raise BadData(f"label_replace's regex {pattern!r} is not valid: {e}") from None
        found = []
        for one in vector.series:
            labels = dict(one.labels)
            matched = regex.match(labels.get(source, ""))
            if matched is not None:
                value = matched.expand(re.sub(r"\$(\d+)", r"\\\1", replacement))
                labels.pop(destination, None)
                if value:
                    labels[destination] = value
            found.append(Series(tuple(sorted(labels.items())), one.values))
        return Vector(tuple(found), vector.ordered)


@dataclass(frozen=True)
class _Read:
    """What a selector reads: a metric of an entity, or a top list."""

    definition: MetricDef
    layer: str
    entity: Entity
    metric: syntax.Metric
    top: syntax.TopN | None = None

    @classmethod
    def of(cls, node: pp.VectorSelector) -> _Read:
        if node.offset is not None or node.at is not None:
            raise BadData("offset and @ are not supported: ask for the time the query is evaluated at")
        given: dict[str, str] = {}
        for m in node.matchers.matchers:
            if m.op != pp.MatchOp.Equal:
                raise BadData(
                    f"label {m.name} is matched with {_MATCH_OPS.get(str(m.op), m.op)}: a metric's labels "
                    "are "
                    "matched with = (several values of a labelled value separated by commas)"
                )
            given[m.name] = m.value
        name = node.name or given.get(NAME, "")
        given.pop(NAME, None)
        definition = CATALOGUE.get(name)
        if definition is None or definition.type is MetricsType.SAMPLED_RECORD:
            raise BadData(f"Metric: [{name}] does not exist.")
        layer = given.pop("layer", "")
        if not layer:
            raise BadData("Metrics expression missing label: layer")
        if layer not in LAYERS:
            raise BadData(f"Layer:[{layer}] is missing or illegal.")
        given.pop("dest_layer", None)
        if "top_n" in given:
            return cls._top(definition, layer, given)
        return cls._of_entity(definition, layer, given)

    @classmethod
    def _of_entity(cls, definition: MetricDef, layer: str, given: dict[str, str]) -> _Read:
        names = _SCOPE_LABELS.get(definition.scope)
        if names is None:
            raise BadData(
                f"{definition.name} is of scope {definition.scope.value}, which PromQL does not read"
            )
        missing = [label for label, _ in names if not given.get(label)]
        if missing:
            raise BadData(f"Metrics expression missing label: {','.join(missing)}")
        fields: dict[str, Any] = {attr: given.pop(label) for label, attr in names}
        if definition.scope in (
            Scope.SERVICE_RELATION,
            Scope.SERVICE_INSTANCE_RELATION,
            Scope.ENDPOINT_RELATION,
        ):
            fields["dest_normal"] = definition.normal
        entity = Entity(normal=definition.normal, **fields)
        return cls(
            definition, layer, entity, syntax.Metric(definition.name, _value_labels(definition, given))
        )

    @classmethod
    def _top(cls, definition: MetricDef, layer: str, given: dict[str, str]) -> _Read:
        if definition.scope not in RANKED_SCOPES:
            raise BadData(f"top_n ranks services, instances and endpoints, not {definition.scope.value}")
        try:
            limit = int(given.pop("top_n"))
            order = syntax.Order[given.pop("order", "").upper()]
        except (ValueError, KeyError):
            raise BadData("a top list takes top_n='N' (a whole number) and order='ASC' or 'DES'") from None
        parent = given.pop("parent_service", None)
        metric = syntax.Metric(definition.name, _value_labels(definition, given))
        entity = Entity(service_name=parent, normal=definition.normal)
        return cls(definition, layer, entity, metric, syntax.TopN(metric, limit, order))

    def labels(self, values: Mapping[str, str]) -> Labels:
        """A series' labels: SkyWalking's, and ``values``' (a labelled value's)."""
        labels = {
            NAME: self.definition.name,
            "layer": self.layer,
            "scope": self.definition.scope.value,
            **values,
        }
        for label, attr in _SCOPE_LABELS[self.definition.scope]:
            if (name := getattr(self.entity, attr)) is not None:
                labels[label] = name
        return tuple(sorted(labels.items()))


def _value_labels(definition: MetricDef, given: Mapping[str, str]) -> tuple[syntax.Label, ...]:
    unknown = sorted(set(given) - {PERCENTILE_LABEL} if definition.label_columns else set(given))
    if unknown and definition.type is not MetricsType.LABELED_VALUE:
        raise BadData(f"{definition.name} has no label {unknown[0]}")
    return tuple(syntax.Label(k, v) for k, v in sorted(given.items()))


def _ranked(
    read: _Read, series: Sequence[results.Series], duration: Duration
) -> list[tuple[Labels, list[int], list[float | None]]]:
    """A top list's entities, each with its one value over the whole
    Duration, at every bucket of it (as SkyWalking answers a sorted metric),
    labelled with its name (and its service's, for the instances or
    endpoints of every service, whose names services may share)."""
    (ranked,) = series
    starts = [int(i) for i in duration.point_ids]
    scope = read.definition.scope
    found = []
    for owner, value in zip(ranked.owners or (), ranked.values, strict=True):
        assert owner is not None
        labels = {NAME: read.definition.name, "layer": read.layer, "scope": scope.value}
        names = {"service": owner.service_name, "service_instance": owner.service_instance_name,
                 "endpoint": owner.endpoint_name}  # fmt: skip
        labels[RANKED_LABEL[scope]] = str(names[RANKED_LABEL[scope]])
        if scope is not Scope.SERVICE and read.entity.service_name is None:
            labels["service"] = owner.service_name
        found.append((tuple(sorted(labels.items())), starts, [value] * len(starts)))
    return found


_MATCH_OPS = {"MatchOp.NotEqual": "!=", "MatchOp.Re": "=~", "MatchOp.NotRe": "!~"}
_COMPARISONS = frozenset({"==", "!=", ">", "<", ">=", "<="})


def _divide(a: float, b: float) -> float:
    if b == 0:
        return math.copysign(math.inf, a) if a else math.nan
    return a / b


def _modulo(a: float, b: float) -> float:
    return math.fmod(a, b) if b else math.nan


def _power(a: float, b: float) -> float:
    try:
        return float(a**b)
    except (OverflowError, ZeroDivisionError):
        return math.inf


_OPERATORS: Mapping[str, Callable[[float, float], Any]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": _divide, "%": _modulo, "^": _power,
    "==": operator.eq, "!=": operator.ne, ">": operator.gt, "<": operator.lt,
    ">=": operator.ge, "<=": operator.le,
}  # fmt: skip
_MATH: Mapping[str, Callable[[float], float]] = {
    "abs": abs, "ceil": math.ceil, "floor": math.floor,
    "sqrt": lambda v: math.sqrt(v) if v >= 0 else math.nan,
    "exp": math.exp, "ln": lambda v: math.log(v) if v > 0 else -math.inf if v == 0 else math.nan,
    "log2": lambda v: math.log2(v) if v > 0 else -math.inf if v == 0 else math.nan,
    "log10": lambda v: math.log10(v) if v > 0 else -math.inf if v == 0 else math.nan,
}  # fmt: skip
_OVER_TIME: Mapping[str, Callable[[list[float]], float]] = {
    "sum_over_time": sum, "avg_over_time": lambda v: sum(v) / len(v), "min_over_time": min,
    "max_over_time": max, "count_over_time": len, "last_over_time": lambda v: v[-1],
    "present_over_time": lambda _: 1.0,
}  # fmt: skip
_COUNTER_FUNCTIONS = frozenset({"rate", "irate", "increase", "delta", "idelta", "deriv", "resets", "changes"})
_AGGREGATIONS: Mapping[str, Callable[[list[float]], float]] = {
    "sum": sum, "avg": lambda v: sum(v) / len(v), "min": min, "max": max, "count": len,
    "group": lambda _: 1.0,
}  # fmt: skip


def _kind(value: Value) -> str:
    return {Vector: "an instant vector", Matrix: "a range vector", Scalar: "a scalar", String: "a string"}[
        type(value)
    ]


def _width_ms(duration: Duration) -> int:
    return duration.step.width // datetime.timedelta(milliseconds=1)


def _without_name(labels: Labels) -> Labels:
    return tuple(kv for kv in labels if kv[0] != NAME)


def _as_vector(value: Value) -> Vector:
    if not isinstance(value, Vector):
        raise BadData(f"and, or and unless take instant vectors, not {_kind(value)}")
    return value


def _apply(value: Value, function: Callable[[float], float], keep_name: bool) -> Value:
    """``function`` of each value of a scalar or a vector."""
    if isinstance(value, Scalar):
        return Scalar(tuple(function(v) for v in value.values))
    if not isinstance(value, Vector):
        raise BadData(f"expected a scalar or an instant vector, not {_kind(value)}")
    found = [
        Series(one.labels if keep_name else _without_name(one.labels),
               tuple(None if v is None else function(v) for v in one.values))
        for one in value.series
    ]  # fmt: skip
    return Vector(tuple(found), value.ordered)


def _combine(
    lhs: Value,
    rhs: Value,
    function: Callable[[float, float], Any],
    modifier: Any,
    comparison: bool,
    as_bool: bool,
) -> Value:
    if isinstance(lhs, Scalar) and isinstance(rhs, Scalar):
        return Scalar(tuple(float(function(a, b)) for a, b in zip(lhs.values, rhs.values, strict=True)))
    pairs: list[_Pair]
    if isinstance(lhs, Vector) and isinstance(rhs, Scalar):
        pairs = [(one, one.values, rhs.values) for one in lhs.series]
    elif isinstance(lhs, Scalar) and isinstance(rhs, Vector):
        pairs = [(one, lhs.values, one.values) for one in rhs.series]
    elif isinstance(lhs, Vector) and isinstance(rhs, Vector):
        pairs = _matched(lhs, rhs, modifier)
    else:
        raise BadData(f"cannot combine {_kind(lhs)} with {_kind(rhs)}")
    found = []
    for one, left, right in pairs:
        values: list[float | None] = []
        for a, b in zip(left, right, strict=True):
            if a is None or b is None:
                values.append(None)
            elif not comparison:
                values.append(float(function(a, b)))
            elif as_bool:
                values.append(1.0 if function(a, b) else 0.0)
            else:
                values.append(a if function(a, b) else None)  # a filter keeps the left side's value
        keep = comparison and not as_bool
        found.append(Series(one.labels if keep else _without_name(one.labels), tuple(values)))
    return Vector(tuple(found))


def _key(labels: Labels, modifier: Any) -> Labels:
    """What a series is matched with another by: its labels but its name, or
    those ``on``/``ignoring`` names."""
    matching = modifier.matching if modifier is not None else None
    if matching is None:
        return _without_name(labels)
    names = set(matching.labels)
    if str(matching.type).endswith("Include"):
        return tuple(kv for kv in labels if kv[0] in names)
    return tuple(kv for kv in labels if kv[0] not in names and kv[0] != NAME)


_Pair = tuple[Series, Sequence[float | None], Sequence[float | None]]
"""A series of a binary operation's answer (its labels), and the values of both sides."""


def _matched(lhs: Vector, rhs: Vector, modifier: Any) -> list[_Pair]:
    if modifier is not None and not str(modifier.card).endswith("OneToOne"):
        raise BadData("group_left and group_right are not supported: match series one to one")
    right: dict[Labels, Series] = {}
    for one in rhs.series:
        if right.setdefault(_key(one.labels, modifier), one) is not one:
            raise BadData("many-to-many matching: several series on the right have the same labels")
    found: list[_Pair] = []
    seen: set[Labels] = set()
    for one in lhs.series:
        key = _key(one.labels, modifier)
        if key in seen:
            raise BadData("many-to-many matching: several series on the left have the same labels")
        seen.add(key)
        if (other := right.get(key)) is not None:
            found.append((Series(key if modifier and modifier.matching else one.labels, one.values),
                          one.values, other.values))  # fmt: skip
    return found


def _set_operation(op: str, lhs: Vector, rhs: Vector, modifier: Any) -> Vector:
    present: dict[Labels, list[bool]] = {}
    for one in rhs.series:
        marks = present.setdefault(_key(one.labels, modifier), [False] * len(one.values))
        for i, v in enumerate(one.values):
            marks[i] = marks[i] or v is not None
    found = []
    for one in lhs.series:
        marks = present.get(_key(one.labels, modifier), [False] * len(one.values))
        if op == "or":
            found.append(one)
            continue
        wanted = op == "and"  # a value is kept where the right side has one (and), or has none (unless)
        found.append(
            Series(
                one.labels, tuple(v if m is wanted else None for v, m in zip(one.values, marks, strict=True))
            )
        )
    if op == "or":
        mine = {_key(one.labels, modifier) for one in lhs.series}
        found += [one for one in rhs.series if _key(one.labels, modifier) not in mine]
    return Vector(tuple(found))


def _group_labels(labels: Labels, by: tuple[bool, tuple[str, ...]] | None) -> Labels:
    if by is None:
        return ()
    keep, names = by
    if keep:
        return tuple(kv for kv in labels if kv[0] in names)
    return tuple(kv for kv in labels if kv[0] not in names and kv[0] != NAME)


def _grouped(
    vector: Vector, reduce: Callable[[list[float]], float], by: tuple[bool, tuple[str, ...]] | None
) -> Vector:
    groups: dict[Labels, list[Series]] = {}
    for one in vector.series:
        groups.setdefault(_group_labels(one.labels, by), []).append(one)
    found = []
    for labels, members in groups.items():
        values = []
        for column in zip(*(m.values for m in members), strict=True):
            present = [v for v in column if v is not None]
            values.append(float(reduce(present)) if present else None)
        found.append(Series(labels, tuple(values)))
    return Vector(tuple(found))


def _ranked_k(vector: Vector, k: int, largest: bool, by: tuple[bool, tuple[str, ...]] | None) -> Vector:
    """``topk``/``bottomk``: in each group, at each time, the ``k`` series of
    the largest (smallest) values; the others have none then."""
    groups: dict[Labels, list[int]] = {}
    for i, one in enumerate(vector.series):
        groups.setdefault(_group_labels(one.labels, by), []).append(i)
    chosen = [[False] * len(one.values) for one in vector.series]
    for members in groups.values():
        for t in range(len(vector.series[members[0]].values) if members else 0):
            present = [i for i in members if vector.series[i].values[t] is not None]
            present.sort(key=lambda i: vector.series[i].values[t], reverse=largest)  # type: ignore[arg-type,return-value]
            for i in present[: max(k, 0)]:
                chosen[i][t] = True
    found = [
        Series(one.labels, tuple(v if chosen[i][t] else None for t, v in enumerate(one.values)))
        for i, one in enumerate(vector.series)
    ]
    ordered = sorted((s for s in found if s.values and s.values[-1] is not None),
                     key=lambda s: s.values[-1], reverse=largest)  # type: ignore[arg-type,return-value]  # fmt: skip
    return Vector(tuple(ordered + [s for s in found if s not in ordered]), ordered=True)


def _sorted(vector: Vector, descending: bool) -> Vector:
    present = [s for s in vector.series if s.values[-1] is not None]
    present.sort(key=lambda s: s.values[-1], reverse=descending)  # type: ignore[arg-type,return-value]
    return Vector(tuple(present), ordered=True)


def parse(text: str) -> Any:
    """``text`` parsed; BadData with the parser's reason."""
    if not text.strip():
        raise BadData("the query is empty")
    try:
        return pp.parse(text)
    except ValueError as e:
        raise BadData(f"the query cannot be parsed: {e}") from None
