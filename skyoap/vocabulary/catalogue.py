"""The metrics skyoap answers by SkyWalking's names: for each, its scope,
whether it is one value or labeled, and which of skyoap's rows and derived
values it reads.

Each layer lists its own (``layers/``), and ``skyoap.layers.CATALOGUE``
holds them all, by name: those of SkyWalking's ``core.oal`` that its
dashboards draw. A few of them skyoap does not measure (message-queue
consumption): they are listed without a model, so that a dashboard asking
for them draws no data, as SkyWalking's does when nothing was measured,
rather than an error. The sampled records (slow statements and commands)
are read from records, not rows (``MetricReader.samples``). An agent's
meters are not listed (but for the Python agent's that skyoap's dashboards
draw): their names are whatever agents report, and the reader finds them
(``MetricReader.meter``).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from skyoap.model.metrics import (
    PERCENTILES,
    CacheAccessMetrics,
    DatabaseAccessMetrics,
    EndpointMetrics,
    EndpointRelationMetrics,
    MeterMetrics,
    Metrics,
    MQAccessMetrics,
    MQEndpointAccessMetrics,
    ServiceInstanceMetrics,
    ServiceInstanceRelationMetrics,
    ServiceMeterMetrics,
    ServiceMetrics,
    ServiceRelationMetrics,
)
from skyoap.vocabulary.entity import Entity, Scope


class MetricsType(enum.Enum):
    """SkyWalking's ``MetricsType``: what one metric holds per entity and bucket."""

    UNKNOWN = "UNKNOWN"
    REGULAR_VALUE = "REGULAR_VALUE"
    LABELED_VALUE = "LABELED_VALUE"
    HEATMAP = "HEATMAP"
    SAMPLED_RECORD = "SAMPLED_RECORD"


class Attribute(enum.Enum):
    """What a metric's ``attr0``…``attr5`` hold, which ``top_n`` filters by.
    SkyWalking's decorators put the service's layer in ``attr0`` of the
    service and endpoint metrics, and nothing elsewhere."""

    LAYER = "layer"


PERCENTILE_LABEL = "p"
"""The label of SkyWalking's percentile metrics; its values are the ranks."""

ENTITY_COLUMNS: Mapping[type[Metrics], tuple[tuple[str, str], ...]] = {
    ServiceMetrics: (("service", "service_name"),),
    ServiceInstanceMetrics: (("service", "service_name"), ("instance", "service_instance_name")),
    EndpointMetrics: (("service", "service_name"), ("endpoint", "endpoint_name")),
    ServiceRelationMetrics: (("source", "service_name"), ("dest", "dest_service_name")),
    ServiceInstanceRelationMetrics: (
        ("source_service", "service_name"), ("source_instance", "service_instance_name"),
        ("dest_service", "dest_service_name"), ("dest_instance", "dest_service_instance_name"),
    ),
    EndpointRelationMetrics: (
        ("source_service", "service_name"), ("source_endpoint", "endpoint_name"),
        ("dest_service", "dest_service_name"), ("dest_endpoint", "dest_endpoint_name"),
    ),
    MeterMetrics: (("service", "service_name"), ("instance", "service_instance_name")),
    ServiceMeterMetrics: (("service", "service_name"),),
    DatabaseAccessMetrics: (("service", "service_name"),),
    CacheAccessMetrics: (("service", "service_name"),),
    MQAccessMetrics: (("service", "service_name"),),
    MQEndpointAccessMetrics: (("service", "service_name"), ("endpoint", "endpoint_name")),
}  # fmt: skip
"""Each model's entity columns, with the ``Entity`` field that names each."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricDef:
    name: str
    model: type[Metrics] | None
    """The rows it reads; None for a metric SkyWalking has and skyoap does not measure."""
    type: MetricsType
    scope: Scope
    column: str = ""
    """The derived value (``Metrics.derived``) of a REGULAR_VALUE metric."""
    label_columns: Mapping[str, str] = field(default_factory=dict)
    """The derived value of each value of ``PERCENTILE_LABEL``, for a percentile
    metric; empty for a meter, whose labels are what agents report."""
    where: Mapping[str, str] = field(default_factory=dict)
    """The column values of the rows it reads besides the entity's names (the
    detect point of a service relation, the name of a meter)."""
    attributes: tuple[Attribute, ...] = ()
    """What its ``attr0``, ``attr1``, … hold, in order."""
    normal: bool = True
    """Whether its services report themselves; False for the virtual ones
    (databases, caches), known from their callers' spans alone."""

    @property
    def measured(self) -> bool:
        return self.model is not None or self.type is MetricsType.SAMPLED_RECORD

    def rows_of(self, entity: Entity) -> dict[str, str]:
        """The column values of the rows holding this metric of ``entity``
        (the entity must have the names of the metric's scope)."""
        assert self.model is not None, f"{self.name} is not measured"
        names = {column: getattr(entity, attr) for column, attr in ENTITY_COLUMNS[self.model]}
        return {**names, **self.where}


def meter(name: str, labeled: bool, stored_name: str | None = None) -> MetricDef:
    """An agent's meter, named ``name`` in expressions and ``stored_name``
    (the same unless told) in storage: the mean of the values its instance
    reported in each bucket."""
    kind = MetricsType.LABELED_VALUE if labeled else MetricsType.REGULAR_VALUE
    where = {"name": stored_name or name}
    return MetricDef(
        name=name,
        type=kind,
        scope=Scope.SERVICE_INSTANCE,
        model=MeterMetrics,
        column="value_avg",
        where=where,
    )


_PERCENTILE_COLUMNS = {str(p): f"p{p}" for p in PERCENTILES}


def calls(
    prefix: str,
    model: type[Metrics] | None,
    scope: Scope,
    sla: str = "sla",
    where: Mapping[str, str] | None = None,
    attributes: tuple[Attribute, ...] = (),
    normal: bool = True,
) -> list[MetricDef]:
    """The four metrics SkyWalking derives from calls: ``_cpm``, ``_resp_time``,
    the share that succeeded (``_sla`` or ``_call_sla``) and ``_percentile``."""
    rows = where or {}

    def regular(suffix: str, column: str) -> MetricDef:
        kind = MetricsType.REGULAR_VALUE
        name = f"{prefix}_{suffix}"
        return MetricDef(
            name=name, type=kind, scope=scope, model=model, column=column, where=rows, attributes=attributes,
            normal=normal,
        )  # fmt: skip

    percentile = MetricDef(
        name=f"{prefix}_percentile", type=MetricsType.LABELED_VALUE, scope=scope, model=model,
        label_columns=_PERCENTILE_COLUMNS, where=rows, normal=normal,
    )  # fmt: skip
    return [regular("cpm", "cpm"), regular("resp_time", "resp_time"), regular(sla, "sla"), percentile]


def unmeasured(name: str, scope: Scope, kind: MetricsType = MetricsType.REGULAR_VALUE) -> MetricDef:
    return MetricDef(name=name, type=kind, scope=scope, model=None)


def sampled(name: str, normal: bool) -> MetricDef:
    """A list of sampled records (slow calls) of each service, virtual or not."""
    return MetricDef(
        name=name, type=MetricsType.SAMPLED_RECORD, scope=Scope.SERVICE, model=None, normal=normal
    )
