"""The GENERAL layer: services that report through SkyWalking's or
OpenTelemetry's agents, measured from their traces, and the runtime of
their instances from the meters SkyWalking's Python agent reports,
through the rules of ``rules/python_runtime.yaml``."""

from __future__ import annotations

from typing import Any

from skyoap.layers import widgets as w
from skyoap.layers.layer import Layer, MenuItem
from skyoap.layers.meters import rule_metrics
from skyoap.model.inventory import DetectPoint
from skyoap.model.metrics import (
    EndpointMetrics,
    EndpointRelationMetrics,
    ServiceInstanceMetrics,
    ServiceInstanceRelationMetrics,
    ServiceMetrics,
    ServiceRelationMetrics,
)
from skyoap.vocabulary import catalogue as c
from skyoap.vocabulary.entity import GENERAL, Scope

RULES = ("python_runtime.yaml",)

_CLIENT = {"detect_point": DetectPoint.CLIENT.value}
_SERVER = {"detect_point": DetectPoint.SERVER.value}
_LAYER = (c.Attribute.LAYER,)

METRICS = (
    *c.calls("service", ServiceMetrics, Scope.SERVICE, attributes=_LAYER),
    c.MetricDef(
        name="service_apdex", type=c.MetricsType.REGULAR_VALUE, scope=Scope.SERVICE, model=ServiceMetrics,
        column="apdex", attributes=_LAYER,
    ),
    *c.calls("service_instance", ServiceInstanceMetrics, Scope.SERVICE_INSTANCE),
    *c.calls("endpoint", EndpointMetrics, Scope.ENDPOINT, attributes=_LAYER),
    *c.calls("service_relation_client", ServiceRelationMetrics, Scope.SERVICE_RELATION, "call_sla", _CLIENT),
    *c.calls("service_relation_server", ServiceRelationMetrics, Scope.SERVICE_RELATION, "call_sla", _SERVER),
    *c.calls(
        "service_instance_relation_server", ServiceInstanceRelationMetrics, Scope.SERVICE_INSTANCE_RELATION,
        "call_sla", _SERVER,
    ),
    *c.calls(
        "service_instance_relation_client", ServiceInstanceRelationMetrics, Scope.SERVICE_INSTANCE_RELATION,
        "call_sla", _CLIENT,
    ),
    *c.calls("endpoint_relation", EndpointRelationMetrics, Scope.ENDPOINT_RELATION),
    c.unmeasured("service_mq_consume_count", Scope.SERVICE),
    c.unmeasured("service_mq_consume_latency", Scope.SERVICE),
    c.unmeasured("endpoint_mq_consume_latency", Scope.ENDPOINT),
    *rule_metrics(*RULES),
)  # fmt: skip


def _dashboards() -> tuple[dict[str, Any], ...]:
    return _root(), _service(), *_instance_and_endpoint(), *_relations()


def _service_topology() -> w.Widget:
    return w.topology(
        nodeExpressions=["avg(service_cpm)", "avg(service_sla)/100", "avg(service_resp_time)"],
        linkServerExpressions=["avg(service_relation_server_cpm)", "avg(service_relation_server_resp_time)"],
        linkClientExpressions=["avg(service_relation_client_cpm)", "avg(service_relation_client_resp_time)"],
    )


def _root() -> dict[str, Any]:
    """The first page: the services, their topology and the top lists."""
    service_tops = [
        w.top("Slowest Services (ms)", f"top_n(service_resp_time,10,des,attr0='{GENERAL}')"),
        w.top("Busiest Services (calls / min)", f"top_n(service_cpm,10,des,attr0='{GENERAL}')"),
        w.top("Least Successful Services (%)", f"top_n(service_sla,10,asc,attr0='{GENERAL}')/100"),
        w.top("Slowest Endpoints (ms)", f"top_n(endpoint_resp_time,10,des,attr0='{GENERAL}')"),
        w.top("Busiest Endpoints (calls / min)", f"top_n(endpoint_cpm,10,des,attr0='{GENERAL}')"),
        w.top("Least Successful Endpoints (%)", f"top_n(endpoint_sla,10,asc,attr0='{GENERAL}')/100"),
    ]
    return w.dashboard(
        "General-Root",
        "All",
        w.tabs(
            ("Services", [w.listing("ServiceList", "General-Service", "service")]),
            ("Topology", [_service_topology()]),
            ("Top Lists", service_tops),
        ),
        root=True,
    )


def _service() -> dict[str, Any]:
    """A service's page."""
    overview = [
        w.card("Apdex", "avg(service_apdex)/10000"),
        w.card("Success Rate", "avg(service_sla)/100", "%"),
        w.card("Load", "avg(service_cpm)", "calls / min"),
        *w.calls("service"),
        w.line("Apdex", "service_apdex/10000"),
        w.top("Busiest Instances (calls / min)", "top_n(service_instance_cpm,10,des)"),
        w.top("Slowest Endpoints (ms)", "top_n(endpoint_resp_time,10,des)"),
        w.top("Slow Statements (ms)", "top_n(top_n_service_database_statement,10,des)"),
    ]
    return w.dashboard(
        "General-Service",
        "Service",
        w.events_above(
            w.tabs(
                ("Overview", overview),
                ("Instances", [w.listing("InstanceList", "General-Instance", "service_instance")]),
                ("Endpoints", [w.listing("EndpointList", "General-Endpoint", "endpoint")]),
                ("Topology", [_service_topology()]),
                ("Traces", [w.whole("Trace")]),
                ("Logs", [w.whole("Log")]),
            )
        ),
    )


def _instance_and_endpoint() -> tuple[dict[str, Any], ...]:
    """An instance's page and an endpoint's."""
    pvm = "meter_instance_pvm_"
    python = [
        w.line(
            "Host CPU Utilization / PVM CPU Utilization (%)", f"{pvm}total_cpu_utilization",
            f"{pvm}process_cpu_utilization", labels=("total_cpu_utilization", "process_cpu_utilization"),
        ),
        w.line("PVM Thread Count", f"{pvm}thread_active_count", labels=("thread_active_count",)),
        w.line("PVM GC Count", f"{pvm}gc_g0", f"{pvm}gc_g1", f"{pvm}gc_g2", labels=("g0", "g1", "g2")),
        w.line(
            "Host Mem Utilization / PVM Mem Utilization (%)", f"{pvm}total_mem_utilization",
            f"{pvm}process_mem_utilization", labels=("total_mem_utilization", "process_mem_utilization"),
        ),
        w.line("PVM GC Time (ms)", f"{pvm}gc_time"),
    ]  # fmt: skip
    endpoint_dependencies = w.topology(
        nodeExpressions=["avg(endpoint_cpm)", "avg(endpoint_sla)/100", "avg(endpoint_resp_time)"],
        linkServerExpressions=["avg(endpoint_relation_cpm)", "avg(endpoint_relation_resp_time)"],
    )
    return (
        w.dashboard(
            "General-Instance",
            "ServiceInstance",
            w.events_above(w.tabs(("Overview", w.calls("service_instance")), ("PVM", python))),
        ),
        w.dashboard(
            "General-Endpoint",
            "Endpoint",
            w.events_above(
                w.tabs(
                    ("Overview", w.calls("endpoint")),
                    ("Dependencies", [endpoint_dependencies]),
                    ("Traces", [w.whole("Trace")]),
                )
            ),
        ),
    )


def _relations() -> tuple[dict[str, Any], ...]:
    """The pages of relations: between services, instances and endpoints."""
    instance_topology = w.topology(
        nodeExpressions=["avg(service_instance_cpm)", "avg(service_instance_sla)/100"],
        linkServerExpressions=["avg(service_instance_relation_server_cpm)"],
        linkClientExpressions=["avg(service_instance_relation_client_cpm)"],
    )
    return (
        w.dashboard(
            "General-Service-Relation",
            "ServiceRelation",
            w.tabs(
                ("Server Side", w.calls("service_relation_server", "call_sla")),
                ("Client Side", w.calls("service_relation_client", "call_sla")),
                ("Instances", [instance_topology]),
            ),
        ),
        w.dashboard(
            "General-Instance-Relation",
            "ServiceInstanceRelation",
            w.tabs(
                ("Server Side", w.calls("service_instance_relation_server", "call_sla")),
                ("Client Side", w.calls("service_instance_relation_client", "call_sla")),
            ),
        ),
        w.dashboard(
            "General-Endpoint-Relation",
            "EndpointRelation",
            w.tabs(("Overview", w.calls("endpoint_relation"))),
        ),
    )


LAYER = Layer(
    GENERAL,
    MenuItem("Services", "services", "Services that report through SkyWalking's or OpenTelemetry's agents."),
    METRICS,
    _dashboards,
    rules=RULES,
)
