"""The metrics skyoap answers by SkyWalking's names: for each, its scope,
whether it is one value or labeled, and which of skyoap's rows and derived
values it reads.

The names are those of SkyWalking's ``core.oal`` that its dashboards draw. A
few of them skyoap does not measure (message-queue consumption): they are
listed without a model, so that a dashboard asking for them draws no data,
as SkyWalking's does when nothing was measured, rather than an error. The
sampled records (slow statements and commands) are read from records, not
rows (``MetricReader.samples``). An agent's
meters are not listed (but for the Python agent's that skyoap's dashboards
draw): their names are whatever agents report, and the reader finds them
(``MetricReader.meter``).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from skyoap.model.inventory import DetectPoint
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


PYTHON_METERS = ("process_cpu_utilization", "process_mem_utilization", "thread_active_count")

_PERCENTILE_COLUMNS = {str(p): f"p{p}" for p in PERCENTILES}


def _calls(
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


def _unmeasured(name: str, scope: Scope, kind: MetricsType = MetricsType.REGULAR_VALUE) -> MetricDef:
    return MetricDef(name=name, type=kind, scope=scope, model=None)


def _queue(prefix: str, model: type[Metrics], scope: Scope) -> list[MetricDef]:
    """A broker's (or its topic's) messages, as SkyWalking names them: those
    consumed by load, success rate, time in transit and its percentiles;
    those produced by load and success rate."""
    consumed = _calls(f"{prefix}_consume", model, scope, where={"operation": "consume"}, normal=False)
    produced = _calls(f"{prefix}_produce", model, scope, where={"operation": "produce"}, normal=False)
    latency = dataclasses.replace(consumed[1], name=f"{prefix}_consume_latency")
    return [consumed[0], consumed[2], latency, consumed[3], produced[0], produced[2]]


def _sampled(name: str, normal: bool) -> MetricDef:
    """A list of sampled records (slow calls) of each service, virtual or not."""
    return MetricDef(
        name=name, type=MetricsType.SAMPLED_RECORD, scope=Scope.SERVICE, model=None, normal=normal
    )


_CLIENT = {"detect_point": DetectPoint.CLIENT.value}
_SERVER = {"detect_point": DetectPoint.SERVER.value}
_LAYER = (Attribute.LAYER,)

_DEFS = [
    *_calls("service", ServiceMetrics, Scope.SERVICE, attributes=_LAYER),
    MetricDef(
        name="service_apdex", type=MetricsType.REGULAR_VALUE, scope=Scope.SERVICE, model=ServiceMetrics,
        column="apdex", attributes=_LAYER,
    ),
    *_calls("service_instance", ServiceInstanceMetrics, Scope.SERVICE_INSTANCE),
    *_calls("endpoint", EndpointMetrics, Scope.ENDPOINT, attributes=_LAYER),
    *_calls("service_relation_client", ServiceRelationMetrics, Scope.SERVICE_RELATION, "call_sla", _CLIENT),
    *_calls("service_relation_server", ServiceRelationMetrics, Scope.SERVICE_RELATION, "call_sla", _SERVER),
    *_calls(
        "service_instance_relation_server", ServiceInstanceRelationMetrics, Scope.SERVICE_INSTANCE_RELATION,
        "call_sla", _SERVER,
    ),
    *_calls(
        "service_instance_relation_client", ServiceInstanceRelationMetrics, Scope.SERVICE_INSTANCE_RELATION,
        "call_sla", _CLIENT,
    ),
    *_calls("endpoint_relation", EndpointRelationMetrics, Scope.ENDPOINT_RELATION),
    _unmeasured("service_mq_consume_count", Scope.SERVICE),
    _unmeasured("service_mq_consume_latency", Scope.SERVICE),
    _unmeasured("endpoint_mq_consume_latency", Scope.ENDPOINT),
    *_calls("database_access", DatabaseAccessMetrics, Scope.SERVICE, normal=False),
    *(
        metric
        for operation, prefix in (("read", "cache_read"), ("write", "cache_write"), ("all", "cache_access"))
        for metric in _calls(
            prefix, CacheAccessMetrics, Scope.SERVICE, where={"operation": operation}, normal=False
        )
    ),
    *_queue("mq_service", MQAccessMetrics, Scope.SERVICE),
    *_queue("mq_endpoint", MQEndpointAccessMetrics, Scope.ENDPOINT),
    _sampled("top_n_database_statement", normal=False),
    _sampled("top_n_service_database_statement", normal=True),
    _sampled("top_n_cache_read_command", normal=False),
    _sampled("top_n_cache_write_command", normal=False),
    # What SkyWalking's Python agent reports of its process, which skyoap's
    # dashboards draw: listed, so that an instance without them draws no data.
    *(meter(f"instance_pvm_{name}", labeled=False) for name in PYTHON_METERS),
]  # fmt: skip

CATALOGUE: Mapping[str, MetricDef] = {d.name: d for d in _DEFS}
"""The metrics of fixed names, by name."""
