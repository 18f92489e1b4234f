"""Evaluates MQE expressions, as SkyWalking's ``execExpression`` does, over a
``MetricReader``.

What cannot be evaluated (an expression that is not MQE, an unknown metric, a
type mismatch, an operation skyoap cannot answer) gives a result of type
UNKNOWN, no values and an error saying what is wrong, rather than an
exception. A reader's own failure (storage out of reach) is no fault of the
expression's: it propagates, for the caller to report as it reports others.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from skyoap.layers import CATALOGUE
from skyoap.mqe import operations as ops
from skyoap.mqe import syntax as s
from skyoap.mqe.arithmetic import (
    ARITHMETIC,
    COMPARISONS,
    LOGIC,
    SERIES,
    SINGLE,
    Apply,
    ExpressionError,
    combine,
)
from skyoap.mqe.parser import MQEError, parse
from skyoap.mqe.reader import (
    AttrCondition,
    LabeledValues,
    LabelSelector,
    MetricReader,
    Ranked,
    TopNCondition,
)
from skyoap.mqe.results import Evaluated, ExpressionResult, ExpressionResultType, Owner, Point, Series
from skyoap.vocabulary.catalogue import MetricDef, MetricsType
from skyoap.vocabulary.duration import Duration, DurationError
from skyoap.vocabulary.entity import Entity, Scope
from skyoap.vocabulary.ids import endpoint_id, instance_id, service_id

RANKED_SCOPES = frozenset({Scope.SERVICE, Scope.SERVICE_INSTANCE, Scope.ENDPOINT})
"""What ``top_n`` ranks (SkyWalking's top lists of other scopes name no one)."""


def execute(expression: str, entity: Entity, duration: Duration, reader: MetricReader) -> ExpressionResult:
    """``execExpression(expression, entity, duration)``."""
    try:
        tree = parse(expression)
    except MQEError as e:
        return ExpressionResult.failed(str(e))
    return Evaluator(reader, entity, duration).run(tree)


_EVERY = LabelSelector({})
"""What an unlabeled metric's read selects."""


@functools.lru_cache(maxsize=1024)
def _scalar(text: str) -> Evaluated:
    """A number's value (immutable: the same for every entity an expression is evaluated of)."""
    return Evaluated(SINGLE, (Series.single(s.Scalar(text).value),))


def reads(tree: s.Expression, duration: Duration) -> Iterator[tuple[s.Metric, Duration]]:
    """The metrics ``tree`` reads of its entity, each with the Duration it
    reads it over (a trend reaches back): what a reader may read before
    evaluating it. Top lists, which rank every entity, are left out."""
    if isinstance(tree, s.Metric):
        yield tree, duration
    elif isinstance(tree, s.Trend):
        with contextlib.suppress(DurationError):  # the trend's own error, when it is evaluated
            if tree.range >= 1:
                yield tree.metric, duration.extended_back(tree.range)
    elif not isinstance(tree, s.TopN | s.TopNOf | s.Baseline):
        for f in dataclasses.fields(tree):
            value = getattr(tree, f.name)
            for child in value if isinstance(value, tuple) else (value,):
                if dataclasses.is_dataclass(child):
                    yield from reads(child, duration)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class Evaluator:
    reader: MetricReader
    entity: Entity
    duration: Duration

    def run(self, tree: s.Expression) -> ExpressionResult:
        try:
            return self.evaluate(tree).formatted()
        except ExpressionError as e:
            return ExpressionResult.failed(str(e))

    def evaluate(self, node: s.Expression) -> Evaluated:
        """``node``'s value; ExpressionError if it has none."""
        match node:
            case s.Metric():
                return self._metric(node)
            case s.Scalar():
                return _scalar(node.text)
            case s.Binary():
                return self._operands(node, ARITHMETIC[node.op], "binary")
            case s.Compare():
                return self._operands(node, COMPARISONS[node.op], "compare")
            case s.BoolOp():
                return self._bool(node)
            case s.Aggregate():
                return ops.aggregate(self.evaluate(node.operand), node.func, node.operand)
            case s.Mathematical():
                return ops.mathematical(self.evaluate(node.operand), node.func)
            case s.Round():
                return ops.rounded(self.evaluate(node.operand), node.places)
            case s.Trend():
                return self._trend(node)
            case s.Logical():
                return self._logical(node)
            case s.TopN():
                return self._top_n(node)
            case s.TopNOf():
                return ops.top_n_of([self._top_n(q) for q in node.queries], node.limit, node.order)
            case s.Relabels():
                return ops.relabel(
                    self.evaluate(node.operand), node.target, node.replacement, str(node.operand)
                )
            case s.AggregateLabels():
                return ops.aggregate_labels(
                    self.evaluate(node.operand), node.func, node.by, str(node.operand)
                )
            case s.SortValues():
                result = self.evaluate(node.operand)
                return ops.sort_values(result, node.limit, node.order, node.aggregation, str(node.operand))
            case s.SortLabelValues():
                return ops.sort_label_values(self.evaluate(node.operand), node.order, node.labels)
            case s.Baseline():
                self._definition(node.metric.name)
                raise ExpressionError(
                    f"{node} needs the baseline SkyWalking's AI pipeline predicts for [{node.metric.name}]; "
                    "skyoap predicts no baselines."
                )

    def _operands(self, node: s.Binary | s.Compare | s.BoolOp, apply: Apply, operation: str) -> Evaluated:
        return combine(self.evaluate(node.left), self.evaluate(node.right), apply, operation)

    def _bool(self, node: s.BoolOp) -> Evaluated:
        # SkyWalking decides this from the tree: a comparison's result is a
        # truth value only where a bool operation takes it, parentheses aside.
        for side, operand in (("left", node.left), ("right", node.right)):
            if not isinstance(operand, s.Compare | s.BoolOp):
                raise ExpressionError(
                    f"Bool operation: the {side} operand [{operand}] is not a comparison; && and || combine "
                    "comparisons (a > b, a == b, …)."
                )
        return self._operands(node, LOGIC[node.op], "bool")

    def _definition(self, name: str) -> MetricDef:
        definition = CATALOGUE.get(name) or self.reader.meter(name)
        if definition is None:
            raise ExpressionError(f"Metric: [{name}] does not exist.")
        return definition

    def _metric(self, metric: s.Metric, duration: Duration | None = None) -> Evaluated:
        definition = self._definition(metric.name)
        if definition.type is MetricsType.SAMPLED_RECORD:
            raise ExpressionError(f"Metric: [{metric.name}] is topN record, need top_n function for query.")
        missing = self.entity.missing(definition.scope)
        if missing:
            raise ExpressionError(
                f"Metric: [{metric.name}] is of scope {definition.scope.value}: the entity needs "
                f"{', '.join(missing)}."
            )
        return self._read(definition, metric, duration or self.duration)

    def _read(self, definition: MetricDef, metric: s.Metric, duration: Duration) -> Evaluated:
        try:
            duration.step.downsampling()
            ids = duration.point_ids
        except DurationError as e:
            raise ExpressionError(str(e)) from None
        labeled = definition.type is MetricsType.LABELED_VALUE
        if not definition.measured:
            nothing = () if labeled else (Series((), ids, (None,) * len(ids)),)
            return Evaluated(SERIES, nothing, labeled)
        if not labeled:
            read = self.reader.values(definition, self.entity, duration, _EVERY)
            if len(read) != 1:
                raise ExpressionError(f"Metric: [{metric.name}] was read as {len(read)} series, not one.")
            return Evaluated(SERIES, (_series(metric, ids, read[0]),))
        selector = LabelSelector.of(metric.labels)
        read = self.reader.values(definition, self.entity, duration, selector)
        series = [_series(metric, ids, values) for values in read if selector.selects(values.labels)]
        # Series in the order of their labels, as SkyWalking gives them.
        return Evaluated(SERIES, tuple(sorted(series, key=lambda x: x.labels)), labeled)

    def _trend(self, node: s.Trend) -> Evaluated:
        if node.range < 1:
            raise ExpressionError("The trend range must be greater than 0.")
        # The first point needs the value `range` steps before it.
        try:
            extended = self.duration.extended_back(node.range)
        except DurationError as e:
            raise ExpressionError(str(e)) from None
        result = self._metric(node.metric, extended)
        return ops.trend(result, node.func, node.range, self.duration.step)

    def _logical(self, node: s.Logical) -> Evaluated:
        """``view_as_seq``: the first operand with data (else the first's
        result); ``is_present``: 1 if any operand has data, else 0. An
        operand that cannot be evaluated counts as one without data."""
        first: Evaluated | ExpressionError | None = None
        for operand in node.operands:
            try:
                result: Evaluated | ExpressionError = self.evaluate(operand)
            except ExpressionError as e:
                result = e
            if first is None:
                first = result
            if isinstance(result, Evaluated) and result.has_values():
                if node.func is s.LogicalFunction.VIEW_AS_SEQ:
                    return result
                return Evaluated(SINGLE, (Series.single(1.0),))
        if node.func is s.LogicalFunction.IS_PRESENT:
            return Evaluated(SINGLE, (Series.single(0.0),))
        if isinstance(first, ExpressionError):
            raise first
        assert first is not None  # the grammar takes at least one operand
        return first

    def _top_n(self, node: s.TopN) -> Evaluated:
        definition = self._definition(node.metric.name)
        name, scope = node.metric.name, definition.scope
        if definition.type is MetricsType.LABELED_VALUE:
            raise ExpressionError(f"Metric: [{name}] is labeled value, does not support top_n query.")
        if node.limit <= 0:
            raise ExpressionError("TopN value must be > 0.")
        if scope not in RANKED_SCOPES:
            raise ExpressionError(
                f"top_n ranks services, instances and endpoints; [{name}] is a metric of scope {scope.value}."
            )
        if definition.type is MetricsType.SAMPLED_RECORD:
            return self._records(definition, node)
        attributes = _attributes(definition, node.attributes)
        if not definition.measured or attributes is None:
            return Evaluated(ExpressionResultType.SORTED_LIST, (Series((), (), ()),))
        try:
            self.duration.step.downsampling()
        except DurationError as e:
            raise ExpressionError(str(e)) from None
        parent = self.entity.service_name or None
        condition = TopNCondition(
            limit=node.limit,
            order=node.order,
            parent_service=parent,
            normal=self.entity.normal,
            attributes=attributes,
        )
        ranked = self.reader.top(definition, self.duration, condition)
        points = [Point(ranked_name(scope, r, parent is None), r.value, _owner(scope, r)) for r in ranked]
        return Evaluated(ExpressionResultType.SORTED_LIST, (Series.of((), points),))

    def _records(self, definition: MetricDef, node: s.TopN) -> Evaluated:
        """The slowest (or fastest) records of the entity's service sampled
        in the Duration: each statement, its latency and its trace. A record
        list is a service's: without one, it is empty."""
        service = self.entity.service_name
        found = (
            self.reader.samples(definition, service, self.duration, node.limit, node.order) if service else ()
        )
        series = Series(
            (),
            tuple(r.statement for r in found),
            tuple(float(r.latency) for r in found),
            None,
            tuple(r.trace_id for r in found),
        )
        return Evaluated(ExpressionResultType.RECORD_LIST, (series,))


def _series(metric: s.Metric, ids: tuple[str, ...], read: LabeledValues) -> Series:
    """A series read, its labels sorted by key (as SkyWalking sorts them)."""
    if len(read.values) != len(ids):
        raise ExpressionError(
            f"Metric: [{metric.name}] was read with {len(read.values)} values for {len(ids)} points."
        )
    return Series(tuple(sorted(read.labels)) if read.labels else (), ids, read.values)


def _attributes(definition: MetricDef, filters: tuple[s.AttrFilter, ...]) -> tuple[AttrCondition, ...] | None:
    """``top_n``'s filters on what the metric's attributes hold; None if no
    entity can pass them: ``attrN='x'`` on an attribute the metric does not
    have. ``attrN!='x'`` on one it does not have passes every entity."""
    conditions = []
    for f in filters:
        if f.index < len(definition.attributes):
            conditions.append(AttrCondition(definition.attributes[f.index], f.value, f.equal))
        elif f.equal:
            return None
    return tuple(conditions)


def _instance_name(r: Ranked, everywhere: bool) -> str:
    # A top list of every service's instances names each with its service.
    return f"{r.service} - {r.instance}" if everywhere else str(r.instance)


def _endpoint_name(r: Ranked, everywhere: bool) -> str:
    return f"{r.service} - {r.endpoint}" if everywhere else str(r.endpoint)


_RANKED_NAMES: dict[Scope, Callable[[Ranked, bool], str]] = {
    Scope.SERVICE: lambda r, _: r.service,
    Scope.SERVICE_INSTANCE: _instance_name,
    Scope.ENDPOINT: _endpoint_name,
}


def ranked_name(scope: Scope, ranked: Ranked, everywhere: bool) -> str:
    """An entity's name in a top list of ``scope``'s; ``everywhere``: of every
    service's instances or endpoints, each named with its service."""
    return _RANKED_NAMES[scope](ranked, everywhere)


def _owner(scope: Scope, r: Ranked) -> Owner:
    owner = Owner(
        scope=scope, service_id=service_id(r.service, r.normal), service_name=r.service, normal=r.normal
    )
    if scope is Scope.SERVICE_INSTANCE and r.instance is not None:
        instance = instance_id(r.service, r.normal, r.instance)
        return replace(owner, service_instance_id=instance, service_instance_name=r.instance)
    if scope is Scope.ENDPOINT and r.endpoint is not None:
        endpoint = endpoint_id(r.service, r.normal, r.endpoint)
        return replace(owner, endpoint_id=endpoint, endpoint_name=r.endpoint)
    return owner
