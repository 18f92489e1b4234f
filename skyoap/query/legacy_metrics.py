"""SkyWalking's older metrics reads, which its 10.x still answers and its CLI
sends (``swctl metrics single``, ``nullable``, ``linear``, ``multiple-linear``,
``top``, ``list``, ``dashboard global``, ``records``). They read through the reader MQE
reads through (``StoredMetrics``), so both answer the same numbers. A metric
skyoap does not measure, or an entity its scope cannot name, is answered
with an error saying so, never a made-up value."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from skyoap.layers import CATALOGUE
from skyoap.mqe.evaluator import RANKED_SCOPES, ranked_name
from skyoap.mqe.reader import LabeledValues, LabelSelector, Ranked, TopNCondition
from skyoap.mqe.results import KeyValue
from skyoap.mqe.stored import StoredMetrics
from skyoap.mqe.syntax import Order
from skyoap.query.context import QueryContext
from skyoap.vocabulary import ids
from skyoap.vocabulary.catalogue import PERCENTILE_LABEL, MetricDef, MetricsType
from skyoap.vocabulary.duration import Duration, PointOfTime
from skyoap.vocabulary.entity import Entity, Scope, entity_of

MAX_TOP_N = 1000
"""The longest list ``sortMetrics`` answers."""

_EVERY = LabelSelector({})


def type_of_metrics(context: QueryContext, name: str) -> str:
    """The metric's ``MetricsType``: UNKNOWN for a name skyoap has no metric of."""
    definition = CATALOGUE.get(name) or _reader(context).meter(name)
    return (definition.type if definition is not None else MetricsType.UNKNOWN).value


def list_metrics(context: QueryContext, regex: str | None = None) -> list[dict[str, Any]]:
    """The metrics skyoap measures and the meters agents reported, those
    whose whole name ``regex`` matches if it is given; each with its type
    and its catalog (its scope, as SkyWalking names it: ``SERVICE``, ...)."""
    try:
        pattern = re.compile(regex) if regex else None
    except re.error as e:
        raise ValueError(f"listMetrics: {regex!r} is not a regular expression: {e}") from None
    metrics = [d for d in CATALOGUE.values() if d.measured] + _reader(context).meters()
    return [
        {"name": d.name, "type": d.type.value, "catalog": d.scope.name}
        for d in sorted(metrics, key=lambda d: d.name)
        if pattern is None or pattern.fullmatch(d.name)
    ]


def read_metrics_value(
    context: QueryContext, condition: Mapping[str, Any], duration: Mapping[str, Any]
) -> int:
    """``readNullableMetricsValue``'s value: 0 where there is no data."""
    return _mean(_Read.of(context, condition, duration, "readMetricsValue", MetricsType.REGULAR_VALUE))[0]


def read_nullable_metrics_value(
    context: QueryContext, condition: Mapping[str, Any], duration: Mapping[str, Any]
) -> dict[str, Any]:
    """The mean of the metric's values over the buckets of ``duration`` that
    have one, truncated to an integer as SkyWalking's ``Long``; 0 and
    ``isEmptyValue`` where none has."""
    read = _Read.of(context, condition, duration, "readNullableMetricsValue", MetricsType.REGULAR_VALUE)
    value, empty = _mean(read)
    return {"value": value, "isEmptyValue": empty}


def _mean(read: _Read) -> tuple[int, bool]:
    (series,) = read.series()
    present = [v for v in series.values if v is not None]
    return (int(math.fsum(present) / len(present)), False) if present else (0, True)


def read_metrics_values(
    context: QueryContext, condition: Mapping[str, Any], duration: Mapping[str, Any]
) -> dict[str, Any]:
    """A metric of one value per bucket, as integers (SkyWalking's ``Long``),
    0 and ``isEmptyValue`` where no row is."""
    read = _Read.of(context, condition, duration, "readMetricsValues", MetricsType.REGULAR_VALUE)
    (series,) = read.series()
    return {"label": None, "values": read.int_values(series.values)}


def read_labeled_metrics_values(
    context: QueryContext, condition: Mapping[str, Any], labels: Sequence[str], duration: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """A labelled metric's series: each asked label's (``50`` or ``p=50`` or
    ``{p=50}`` for a percentile), or every one when none is asked; each
    named as SkyWalking names its labels (``{p=50}``), 0 and
    ``isEmptyValue`` where no row is."""
    read = _Read.of(context, condition, duration, "readLabeledMetricsValues", MetricsType.LABELED_VALUE)
    found = {_label_text(s.labels): s.values for s in read.series()}
    ranks = read.definition.label_columns  # a percentile's; a meter's labels are those with data
    known = [_label_text((KeyValue(PERCENTILE_LABEL, rank),)) for rank in ranks] or sorted(found)
    asked = [label.strip() for label in labels if label.strip()]
    keys = [_label_key(label, known) for label in asked] if asked else sorted({*known, *found})
    return [
        {"label": key, "values": read.int_values(found.get(key, (None,) * len(read.points)))} for key in keys
    ]


def sort_metrics(
    context: QueryContext, condition: Mapping[str, Any], duration: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The first ``topN`` services, instances or endpoints in ``order`` of
    their mean value over ``duration`` (those of ``parentService`` alone when
    it is given), as MQE's ``top_n`` ranks them."""
    reader = _reader(context)
    definition = _metric(reader, condition["name"], "sortMetrics", MetricsType.REGULAR_VALUE)
    scope = definition.scope
    if scope not in RANKED_SCOPES:
        raise ValueError(
            f"sortMetrics ranks services, instances and endpoints; {definition.name} is a metric of "
            f"scope {scope.value}"
        )
    limit = condition["topN"]
    if not 1 <= limit <= MAX_TOP_N:
        raise ValueError(f"sortMetrics: topN must be 1 to {MAX_TOP_N}, not {limit}")
    parent, normal = condition.get("parentService") or None, condition.get("normal")
    if parent is not None and normal is None:
        raise ValueError(
            "sortMetrics: a parentService needs normal (false for a service known from its callers)"
        )
    top = TopNCondition(limit=limit, order=Order[condition["order"]], parent_service=parent, normal=normal)
    ranked = reader.top(definition, Duration.of(duration), top)
    everywhere = parent is None
    return [
        {"name": ranked_name(scope, r, everywhere), "id": _ranked_id(scope, r), "value": str(int(r.value))}
        for r in ranked
    ]


def read_records(
    context: QueryContext, condition: Mapping[str, Any], duration: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The first ``topN`` records of a sampled metric (slow statements and
    commands) of ``parentEntity``'s service in ``order`` of their latency:
    each a ``Record`` named by its statement, its id and ``refId`` the trace
    it was sampled in."""
    entity = entity_of(condition["parentEntity"])
    if not entity.service_name:
        raise ValueError("readRecords: the parentEntity needs serviceName (records are a service's)")
    return _records(context, condition["name"], entity.service_name, condition, duration, "readRecords")


def read_sampled_records(
    context: QueryContext, condition: Mapping[str, Any], duration: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """``readRecords`` as SkyWalking's older query names the service (``parentService``)."""
    service = condition.get("parentService")
    if not service:
        raise ValueError("readSampledRecords: give the parentService whose records to read")
    return _records(context, condition["name"], service, condition, duration, "readSampledRecords")


def get_top_n_records(context: QueryContext, condition: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``readRecords`` of the service ``serviceId`` names, as ``TopNRecord``s."""
    service = ids.read_service_id(condition["serviceId"], "serviceId")[0]
    found = _records(
        context, condition["metricName"], service, condition, condition["duration"], "getTopNRecords"
    )
    return [{"statement": r["name"], "latency": int(r["value"]), "traceId": r["refId"]} for r in found]


def _records(
    context: QueryContext,
    name: str,
    service: str,
    condition: Mapping[str, Any],
    duration: Mapping[str, Any],
    field: str,
) -> list[dict[str, Any]]:
    reader = _reader(context)
    definition = _metric(reader, name, field, MetricsType.SAMPLED_RECORD)
    limit = condition["topN"]
    if not 1 <= limit <= MAX_TOP_N:
        raise ValueError(f"{field}: topN must be 1 to {MAX_TOP_N}, not {limit}")
    found = reader.samples(definition, service, Duration.of(duration), limit, Order[condition["order"]])
    return [
        {"name": r.statement, "id": r.trace_id, "value": str(r.latency), "refId": r.trace_id} for r in found
    ]


class _Read:
    """A metric of an entity over a Duration, as a read's arguments name them."""

    def __init__(
        self, reader: StoredMetrics, definition: MetricDef, entity: Entity, duration: Duration
    ) -> None:
        self.reader, self.definition, self.entity, self.duration = reader, definition, entity, duration
        self.points: tuple[PointOfTime, ...] = duration.points()
        self.entity_id = _entity_id(definition.scope, entity)

    @classmethod
    def of(
        cls,
        context: QueryContext,
        condition: Mapping[str, Any],
        duration: Mapping[str, Any],
        field: str,
        kind: MetricsType,
    ) -> _Read:
        reader = _reader(context)
        definition = _metric(reader, condition["name"], field, kind)
        entity = entity_of(condition["entity"])
        missing = entity.missing(definition.scope)
        if missing:
            raise ValueError(
                f"{field}: {definition.name} is of scope {definition.scope.value}: the entity needs "
                f"{', '.join(missing)}"
            )
        return cls(reader, definition, entity, Duration.of(duration))

    def series(self) -> Sequence[LabeledValues]:
        return self.reader.values(self.definition, self.entity, self.duration, _EVERY)

    def int_values(self, values: Sequence[float | None]) -> dict[str, Any]:
        """``IntValues``: each point's id (its bucket and the entity's id) and value."""
        return {
            "values": [
                {"id": f"{p.bucket}_{self.entity_id}", "value": int(v or 0), "isEmptyValue": v is None}
                for p, v in zip(self.points, values, strict=True)
            ]
        }


def _reader(context: QueryContext) -> StoredMetrics:
    return StoredMetrics(context.metrics, context.shared, context.records)


def _metric(reader: StoredMetrics, name: str, field: str, kind: MetricsType) -> MetricDef:
    """The metric ``name`` of type ``kind`` that skyoap measures (or an agent's meter)."""
    definition = CATALOGUE.get(name) or reader.meter(name)
    if definition is None:
        raise ValueError(f"{field}: there is no metric {name!r} (listMetrics lists those skyoap has)")
    if definition.type is not kind:
        raise ValueError(f"{field} reads a metric of type {kind.value}; {name} is {definition.type.value}")
    if not definition.measured:
        raise ValueError(f"{field}: {name} is SkyWalking's; skyoap does not measure it")
    return definition


def _label_text(labels: Sequence[KeyValue]) -> str:
    """A series' labels as SkyWalking names them: ``{p=50}``, ``{k=a,l=b}``."""
    return "{" + ",".join(f"{kv.key}={kv.value}" for kv in labels) + "}"


def _label_key(label: str, known: Sequence[str]) -> str:
    """The series ``label`` asks for: ``{p=50}`` as it is, ``p=50`` in
    braces, a bare ``50`` the series of one label of that value."""
    if label.startswith("{"):
        key = label
    elif "=" in label:
        key = "{" + label + "}"
    else:
        matching = [k for k in known if k.count("=") == 1 and k[1:-1].partition("=")[2] == label]
        key = matching[0] if len(matching) == 1 else label
    if key not in known:
        raise ValueError(f"the metric has no label {label!r}; its labels: {', '.join(known) or 'none yet'}")
    return key


def _entity_id(scope: Scope, entity: Entity) -> str:
    """SkyWalking's id of the entity a metric of ``scope`` is of."""
    service = ids.service_id(entity.service_name or "", entity.normal is not False)
    if scope is Scope.SERVICE:
        return service
    if scope is Scope.SERVICE_INSTANCE:
        return f"{service}_{ids.encode(entity.service_instance_name or '')}"
    if scope is Scope.ENDPOINT:
        return f"{service}_{ids.encode(entity.endpoint_name or '')}"
    dest = ids.service_id(entity.dest_service_name or "", entity.dest_normal is not False)
    return f"{service}-{dest}"


def _ranked_id(scope: Scope, r: Ranked) -> str:
    service = ids.service_id(r.service, r.normal)
    if scope is Scope.SERVICE_INSTANCE:
        return f"{service}_{ids.encode(r.instance or '')}"
    if scope is Scope.ENDPOINT:
        return f"{service}_{ids.encode(r.endpoint or '')}"
    return service
