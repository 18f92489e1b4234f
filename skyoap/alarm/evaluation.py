"""A rule's expression over the minute metrics: the scope its metrics share,
the entities that have rows in a window, and whether the expression held
for one of them in the ``period`` minutes up to a minute. Expressions are
evaluated by the query protocol's MQE engine, as ``execExpression`` would
evaluate them for that entity and Duration."""

from __future__ import annotations

import dataclasses
import datetime
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from skyoap.alarm.settings import Rule
from skyoap.layers import CATALOGUE
from skyoap.model.metrics import SEP, Downsampling
from skyoap.mqe import syntax, vectorized
from skyoap.mqe.arithmetic import ExpressionError, Flags
from skyoap.mqe.evaluator import Evaluator, reads
from skyoap.mqe.parser import parse
from skyoap.mqe.results import Series
from skyoap.mqe.stored import StoredMetrics
from skyoap.mqe.vectorized import Frames, Population
from skyoap.storage.api import MetricsDAO
from skyoap.vocabulary.alarm_identity import AlarmScope
from skyoap.vocabulary.catalogue import ENTITY_COLUMNS, MetricDef
from skyoap.vocabulary.duration import Duration, Step
from skyoap.vocabulary.entity import Entity, Scope


class RuleError(ValueError):
    """A rule whose expression no entity can be watched by."""


@dataclass(frozen=True)
class Watched:
    """A rule, with what its expression reads."""

    rule: Rule
    tree: syntax.Expression
    scope: Scope
    metric: MetricDef
    """The first metric it reads: its rows in a window name the entities."""


def watched(rule: Rule) -> Watched:
    """The rule with its scope; RuleError for a metric skyoap does not
    measure, or metrics of more than one scope."""
    tree = parse(rule.expression)
    defs = []
    for name in _metric_names(tree):
        metric = CATALOGUE.get(name)
        if metric is None:
            raise RuleError(f"there is no metric {name}")
        if not metric.measured:
            raise RuleError(f"{name} is SkyWalking's; skyoap does not measure it")
        defs.append(metric)
    if not defs:
        raise RuleError("the expression reads no metric")
    scopes = {d.scope for d in defs}
    if len(scopes) > 1:
        named = ", ".join(sorted(s.value for s in scopes))
        raise RuleError(f"its metrics are of several scopes ({named}): a rule watches one kind of entity")
    scope = defs[0].scope
    if AlarmScope.of(scope) is None:
        raise RuleError(f"alarms watch services, instances, endpoints and their relations, not {scope.value}")
    return Watched(rule, tree, scope, defs[0])


def _metric_names(node: Any) -> Iterator[str]:
    """The names of the metrics in an expression tree (its nodes are dataclasses)."""
    if isinstance(node, syntax.Metric):
        yield node.name
        return
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        for child in value if isinstance(value, tuple) else (value,):
            if dataclasses.is_dataclass(child):
                yield from _metric_names(child)


def period_ending(minute: int, period: int) -> Duration:
    """The ``period`` minutes up to ``minute`` (minutes since the epoch), both included."""

    def text(m: int) -> str:
        return datetime.datetime.fromtimestamp(m * 60, datetime.UTC).strftime("%Y-%m-%d %H%M")

    return Duration(text(minute - period + 1), text(minute), Step.MINUTE)


def entities(metrics: MetricsDAO, w: Watched, duration: Duration) -> list[Entity]:
    """The entities with rows of the rule's model from the start of ``duration``
    on (those measured only later are at rest in it: nothing holds for them)."""
    return [entity_of_names(w, names) for names in entity_names(metrics, w, duration)]


def entity_names(metrics: MetricsDAO, w: Watched, duration: Duration) -> list[tuple[str, ...]]:
    """``entities``' names, in order: the values of their model's ``ENTITY_COLUMNS``."""
    model = w.metric.model
    assert model is not None
    columns = [c for c, _ in ENTITY_COLUMNS[model]]
    return sorted(metrics.distinct(model, Downsampling.MINUTE, duration.start_bucket, columns))


def entity_of_names(w: Watched, names: tuple[str, ...]) -> Entity:
    """The entity named ``names`` (the values of its model's ``ENTITY_COLUMNS``):
    a database, cache or broker is a service that does not report (``normal``
    false), as its ids say."""
    assert w.metric.model is not None
    given: dict[str, Any] = dict(zip((a for _, a in ENTITY_COLUMNS[w.metric.model]), names, strict=True))
    return Entity(**given) if w.metric.normal else Entity(**given, normal=False)


def entity_key(w: Watched, entity: Entity) -> str:
    """The entity as its metrics are routed (``Metrics.entity``): its names joined."""
    assert w.metric.model is not None
    return SEP.join(getattr(entity, attr) for _, attr in ENTITY_COLUMNS[w.metric.model])


def entity_of_key(w: Watched, key: str) -> Entity:
    """The entity whose routing key is ``key`` (``entity_key``'s inverse)."""
    return entity_of_names(w, tuple(key.split(SEP)))


def entity_name(scope: Scope, e: Entity) -> str:
    """SkyWalking's name of an entity in alarms: ``{instance} of {service}``,
    ``{endpoint} in {service}``, ``{source} to {dest}``."""
    match scope:
        case Scope.SERVICE:
            return str(e.service_name)
        case Scope.SERVICE_INSTANCE:
            return f"{e.service_instance_name} of {e.service_name}"
        case Scope.ENDPOINT:
            return f"{e.endpoint_name} in {e.service_name}"
        case Scope.SERVICE_RELATION:
            return f"{e.service_name} to {e.dest_service_name}"
        case Scope.SERVICE_INSTANCE_RELATION:
            return (
                f"{e.service_instance_name} of {e.service_name} to "
                f"{e.dest_service_instance_name} of {e.dest_service_name}"
            )
        case _:
            return f"{e.endpoint_name} in {e.service_name} to {e.dest_endpoint_name} in {e.dest_service_name}"


def held(w: Watched, entity: Entity, duration: Duration, reader: StoredMetrics) -> bool:
    """Whether the rule's expression is true (1) for ``entity`` over
    ``duration``: with labelled values (percentiles), any of them. A reader
    made for a round (``StoredMetrics(metrics, {})``) reads each window once
    for all its entities."""
    try:
        result = Evaluator(reader, entity, duration).evaluate(w.tree)
    except ExpressionError:
        return False
    return any(p.value == 1 for series in result.series for p in series.points)


def snapshots(
    w: Watched,
    entities: Sequence[Entity],
    duration: Duration,
    reader: StoredMetrics,
    frames: Frames | None = None,
) -> list[str]:
    """What the rule's expression read of each of ``entities`` over
    ``duration``, as SkyWalking keeps it with a firing: each metric's
    values, as the query endpoint answers them (JSON, a list of ``{name,
    results}``). Read from the round's ``frames`` where arrays read the
    metric, else entity by entity, what they read read at once."""
    if not entities:
        return []
    metrics = _read_metrics(w, duration)
    at_once = _read_at_once(w, metrics, entities, duration, frames) if frames is not None else {}
    rest = [m for m in metrics if m not in at_once]
    reader.read_ahead([(CATALOGUE[m.name], duration, entities) for m in rest if m.name in CATALOGUE])
    taken = []
    for i, entity in enumerate(entities):
        evaluator = Evaluator(reader, entity, duration)
        read = []
        for metric in metrics:
            if metric in at_once:
                each = at_once[metric]
                if each is None:
                    continue
                series = each[i]
            else:
                try:
                    series = evaluator.evaluate(metric).series
                except ExpressionError:
                    continue
            read.append({"name": metric.name, "results": [one.answered() for one in series]})
        taken.append(json.dumps(read, separators=(",", ":")))
    return taken


def _read_at_once(
    w: Watched,
    metrics: Sequence[syntax.Metric],
    entities: Sequence[Entity],
    duration: Duration,
    frames: Frames,
) -> dict[syntax.Metric, list[tuple[Series, ...]] | None]:
    """Each metric arrays read, with each entity's series; None for one whose
    read fails (as it would for each entity)."""
    assert w.metric.model is not None
    population = frames.population(entities, w.metric.model)
    found: dict[syntax.Metric, list[tuple[Series, ...]] | None] = {}
    for metric in metrics:
        try:
            found[metric] = vectorized.series_of(metric, frames, population, duration)
        except vectorized.Unsupported:
            continue
        except ExpressionError:
            found[metric] = None
    return found


def _read_metrics(w: Watched, duration: Duration) -> list[syntax.Metric]:
    """The metrics the rule's expression reads, each once."""
    return list(dict.fromkeys(m for m, _ in reads(w.tree, duration)))


def held_all(
    w: Watched,
    population: Population,
    duration: Duration,
    frames: Frames,
    reader: StoredMetrics,
    wanted: Flags,
) -> Flags:
    """``held(w, e, duration, reader)`` for each entity ``e`` of ``population``
    that is ``wanted``, False for the others: evaluated for all at once where
    arrays can (``vectorized``), else entity by entity."""
    try:
        out, unsure = vectorized.holding(w.tree, frames, population, duration)
        out, one_by_one = out & wanted, unsure & wanted
    except vectorized.Unsupported:
        out, one_by_one = np.zeros(len(population), np.bool_), wanted
    for i in np.flatnonzero(one_by_one).tolist():
        out[i] = held(w, population.entities[i], duration, reader)
    return out
