"""What SkyWalking's UI draws, served as it asks for it: the menu
(``getMenuItems``) and the dashboards (``getAllTemplates``), in its JSON
format: a dashboard is ``{layer, entity, name, id, isRoot, children}``, its
children widgets on a 24-column grid (``x, y, w, h``) whose ``expressions``
are MQE, and tabs holding widgets in turn. The UI keys a dashboard by
``layer_entity_name`` and opens the one of an entity's scope.

skyoap's dashboards are of the GENERAL layer and of the databases, caches
and message brokers services call (VIRTUAL_DATABASE, VIRTUAL_CACHE,
VIRTUAL_MQ), drawing the metrics skyoap
measures (``vocabulary/catalogue.py``) and the meters SkyWalking's Python agent
reports under their own names, laid out as SkyWalking lays out its own. They
are the defaults users change (``ui_templates.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from skyoap.query.context import QueryContext
from skyoap.query.metadata import list_services
from skyoap.vocabulary.entity import GENERAL

Widget = dict[str, Any]

PERCENTILES = "relabels({metric}{{p='50,75,90,95,99'}},p='50,75,90,95,99',percentile='P50,P75,P90,P95,P99')"


def _widget(kind: str, title: str, expressions: Sequence[str], **graph: Any) -> Widget:
    return {
        "type": "Widget",
        "widget": {"title": title},
        "graph": {"type": kind, **graph},
        "expressions": list(expressions),
    }


def _line(title: str, *expressions: str, unit: str = "") -> Widget:
    widget = _widget("Line", title, expressions, showXAxis=True, showYAxis=True, smooth=False)
    if unit:
        widget["metricConfig"] = [{"unit": unit} for _ in expressions]
    return widget


def _card(title: str, expression: str, unit: str = "") -> Widget:
    widget = _widget("Card", title, [expression], fontSize=14, textAlign="center", showUnit=bool(unit))
    if unit:
        widget["metricConfig"] = [{"unit": unit}]
    return widget


def _top(title: str, expression: str) -> Widget:
    return _widget("TopList", title, [expression], color="purple")


def _listing(kind: str, dashboard: str, prefix: str, latency: str = "resp_time") -> Widget:
    """A ServiceList, InstanceList or EndpointList with each row's load,
    success rate and response time (``prefix``: ``service``, …; ``latency``
    names the last)."""
    widget = _widget(
        kind,
        "",
        [f"avg({prefix}_cpm)", f"avg({prefix}_sla)/100", f"avg({prefix}_{latency})"],
        dashboardName=dashboard,
        fontSize=12,
        showXAxis=False,
        showYAxis=False,
    )
    widget["subExpressions"] = [f"{prefix}_cpm", f"{prefix}_sla/100", f"{prefix}_{latency}"]
    labels = (("Load", "calls / min"), ("Success Rate", "%"), ("Latency", "ms"))
    widget["metricConfig"] = [{"label": label, "unit": unit} for label, unit in labels]
    return widget


def _topology(**links: Any) -> Widget:
    return {
        "type": "Topology",
        "widget": {"title": "Topology"},
        "graph": {"showDepth": True},
        "linkDashboard": "General-Service-Relation",
        "nodeDashboard": [
            {"scope": "Service", "dashboard": "General-Service"},
            {"scope": "ServiceInstance", "dashboard": "General-Instance"},
            {"scope": "Endpoint", "dashboard": "General-Endpoint"},
        ],
        **links,
    }


def _service_topology() -> Widget:
    return _topology(
        nodeExpressions=["avg(service_cpm)", "avg(service_sla)/100", "avg(service_resp_time)"],
        linkServerExpressions=["avg(service_relation_server_cpm)", "avg(service_relation_server_resp_time)"],
        linkClientExpressions=["avg(service_relation_client_cpm)", "avg(service_relation_client_resp_time)"],
    )


def _whole(kind: str) -> Widget:
    """A widget of the whole page's width: a trace or log browser, a topology."""
    return {"type": kind, "widget": {"title": kind}, "graph": {}}


TAB_HEIGHT = 52
"""A page's tabs, as high as SkyWalking's own templates make them."""

_SIZES = {"Card": (8, 5), "Line": (6, 11), "TopList": (8, 14)}
"""Each kind of widget's width (of 24 columns) and height (in grid rows),
as in SkyWalking's templates; what fills a page takes it whole."""

_WHOLE = (24, 48)


def _size(widget: Widget) -> tuple[int, int]:
    if widget["type"] != "Widget":
        return _WHOLE
    return _SIZES.get(widget["graph"].get("type", ""), _WHOLE)


def _laid_out(widgets: Sequence[Widget]) -> list[Widget]:
    """``widgets`` placed left to right in rows of 24 columns, each as wide
    and as high as its kind (``_SIZES``); one that does not fit a row starts
    the next."""
    placed, x, y, row_height = [], 0, 0, 0
    for n, widget in enumerate(widgets):
        w, h = _size(widget)
        if x + w > 24:
            x, y, row_height = 0, y + row_height, 0
        placed.append({"x": x, "y": y, "w": w, "h": h, "i": str(n), **widget})
        x, row_height = x + w, max(row_height, h)
    return placed


def _tabs(*tabs: tuple[str, Sequence[Widget]]) -> list[Widget]:
    tab = {
        "type": "Tab",
        "widget": {"title": ""},
        "graph": {},
        "activedTabIndex": 0,
        "children": [{"name": name, "children": _laid_out(ws)} for name, ws in tabs],
    }
    return [{"x": 0, "y": 0, "w": 24, "h": TAB_HEIGHT, "i": "0", **tab}]


EVENTS_HEIGHT = 12


def _events_above(children: list[Widget]) -> list[Widget]:
    """``children`` below the entity's events, as SkyWalking's service page
    shows them, unfolded; its charts mark when each event happened
    (``eventAssociate``)."""
    events = {
        "x": 0,
        "y": 0,
        "w": 24,
        "h": EVENTS_HEIGHT,
        "i": "events",
        "type": "Event",
        "eventAssociate": True,
        "eventDefaultCollapse": False,
    }
    return [events, *({**child, "y": child["y"] + EVENTS_HEIGHT} for child in children)]


def _calls(prefix: str, sla: str = "sla") -> list[Widget]:
    """Load, success rate, latency and its percentiles of what ``prefix`` counts."""
    return [
        _line("Load", f"{prefix}_cpm", unit="calls / min"),
        _line("Success Rate", f"{prefix}_{sla}/100", unit="%"),
        _line("Avg Response Time", f"{prefix}_resp_time", unit="ms"),
        _line("Response Time Percentile", PERCENTILES.format(metric=f"{prefix}_percentile"), unit="ms"),
    ]


def _dashboard(
    name: str, entity: str, children: list[Widget], root: bool = False, layer: str = GENERAL
) -> dict[str, Any]:
    configuration = {"layer": layer, "entity": entity, "name": name, "id": name, "isRoot": root,
                     "children": children}  # fmt: skip
    return {"id": name, "configuration": configuration}


@cache
def dashboards() -> tuple[dict[str, Any], ...]:
    """Every dashboard, its ``configuration`` as a JSON value (not yet text)."""
    return (
        _root(),
        _service(),
        *_instance_and_endpoint(),
        *_relations(),
        *_databases(),
        *_caches(),
        *_queues(),
    )


def _root() -> dict[str, Any]:
    """The first page: the services, their topology and the top lists."""
    service_tops = [
        _top("Slowest Services (ms)", f"top_n(service_resp_time,10,des,attr0='{GENERAL}')"),
        _top("Busiest Services (calls / min)", f"top_n(service_cpm,10,des,attr0='{GENERAL}')"),
        _top("Least Successful Services (%)", f"top_n(service_sla,10,asc,attr0='{GENERAL}')/100"),
        _top("Slowest Endpoints (ms)", f"top_n(endpoint_resp_time,10,des,attr0='{GENERAL}')"),
        _top("Busiest Endpoints (calls / min)", f"top_n(endpoint_cpm,10,des,attr0='{GENERAL}')"),
        _top("Least Successful Endpoints (%)", f"top_n(endpoint_sla,10,asc,attr0='{GENERAL}')/100"),
    ]
    return _dashboard(
        "General-Root",
        "All",
        _tabs(
            ("Services", [_listing("ServiceList", "General-Service", "service")]),
            ("Topology", [_service_topology()]),
            ("Top Lists", service_tops),
        ),
        root=True,
    )


def _service() -> dict[str, Any]:
    """A service's page."""
    overview = [
        _card("Apdex", "avg(service_apdex)/10000"),
        _card("Success Rate", "avg(service_sla)/100", "%"),
        _card("Load", "avg(service_cpm)", "calls / min"),
        *_calls("service"),
        _line("Apdex", "service_apdex/10000"),
        _top("Busiest Instances (calls / min)", "top_n(service_instance_cpm,10,des)"),
        _top("Slowest Endpoints (ms)", "top_n(endpoint_resp_time,10,des)"),
        _top("Slow Statements (ms)", "top_n(top_n_service_database_statement,10,des)"),
    ]
    return _dashboard(
        "General-Service",
        "Service",
        _events_above(
            _tabs(
                ("Overview", overview),
                ("Instances", [_listing("InstanceList", "General-Instance", "service_instance")]),
                ("Endpoints", [_listing("EndpointList", "General-Endpoint", "endpoint")]),
                ("Topology", [_service_topology()]),
                ("Traces", [_whole("Trace")]),
                ("Logs", [_whole("Log")]),
            )
        ),
    )


def _instance_and_endpoint() -> tuple[dict[str, Any], ...]:
    """An instance's page and an endpoint's."""
    python = [
        _line("Process CPU (%)", "instance_pvm_process_cpu_utilization"),
        _line("Process Memory (%)", "instance_pvm_process_mem_utilization*100"),  # reported as a share of 1
        _line("Active Threads", "instance_pvm_thread_active_count"),
    ]
    endpoint_dependencies = _topology(
        nodeExpressions=["avg(endpoint_cpm)", "avg(endpoint_sla)/100", "avg(endpoint_resp_time)"],
        linkServerExpressions=["avg(endpoint_relation_cpm)", "avg(endpoint_relation_resp_time)"],
    )
    return (
        _dashboard(
            "General-Instance",
            "ServiceInstance",
            _events_above(_tabs(("Overview", [*_calls("service_instance"), *python]))),
        ),
        _dashboard(
            "General-Endpoint",
            "Endpoint",
            _events_above(
                _tabs(
                    ("Overview", _calls("endpoint")),
                    ("Dependencies", [endpoint_dependencies]),
                    ("Traces", [_whole("Trace")]),
                )
            ),
        ),
    )


def _relations() -> tuple[dict[str, Any], ...]:
    """The pages of relations: between services, instances and endpoints."""
    instance_topology = _topology(
        nodeExpressions=["avg(service_instance_cpm)", "avg(service_instance_sla)/100"],
        linkServerExpressions=["avg(service_instance_relation_server_cpm)"],
        linkClientExpressions=["avg(service_instance_relation_client_cpm)"],
    )
    return (
        _dashboard(
            "General-Service-Relation",
            "ServiceRelation",
            _tabs(
                ("Server Side", _calls("service_relation_server", "call_sla")),
                ("Client Side", _calls("service_relation_client", "call_sla")),
                ("Instances", [instance_topology]),
            ),
        ),
        _dashboard(
            "General-Instance-Relation",
            "ServiceInstanceRelation",
            _tabs(
                ("Server Side", _calls("service_instance_relation_server", "call_sla")),
                ("Client Side", _calls("service_instance_relation_client", "call_sla")),
            ),
        ),
        _dashboard(
            "General-Endpoint-Relation",
            "EndpointRelation",
            _tabs(("Overview", _calls("endpoint_relation"))),
        ),
    )


def _virtual_root(
    layer: str, name: str, listing: Widget, *tabs: tuple[str, Sequence[Widget]]
) -> tuple[dict[str, Any], ...]:
    """The pages of a virtual layer: its services listed (``{name}-Root``),
    and one of them (``{name}-Service``, of ``tabs``)."""
    return (
        _dashboard(f"{name}-Root", "All", _tabs(("Services", [listing])), root=True, layer=layer),
        _dashboard(f"{name}-Service", "Service", _tabs(*tabs), layer=layer),
    )


def _databases() -> tuple[dict[str, Any], ...]:
    """The databases services call, and their slow statements."""
    return _virtual_root(
        "VIRTUAL_DATABASE",
        "Virtual-Database",
        _listing("ServiceList", "Virtual-Database-Service", "database_access"),
        (
            "Overview",
            [
                *_calls("database_access"),
                _top("Slow Statements (ms)", "top_n(top_n_database_statement,10,des)"),
            ],
        ),
    )


def _caches() -> tuple[dict[str, Any], ...]:
    """The caches services call: their reads, writes and every call, and the slow commands."""
    return _virtual_root(
        "VIRTUAL_CACHE",
        "Virtual-Cache",
        _listing("ServiceList", "Virtual-Cache-Service", "cache_access"),
        (
            "Overview",
            [
                _line("Read Load", "cache_read_cpm", unit="calls / min"),
                _line("Read Success Rate", "cache_read_sla/100", unit="%"),
                _line("Avg Read Response Time", "cache_read_resp_time", unit="ms"),
                _line(
                    "Read Response Time Percentile",
                    PERCENTILES.format(metric="cache_read_percentile"),
                    unit="ms",
                ),
                _line("Write Load", "cache_write_cpm", unit="calls / min"),
                _line("Write Success Rate", "cache_write_sla/100", unit="%"),
                _line("Avg Write Response Time", "cache_write_resp_time", unit="ms"),
                _line(
                    "Write Response Time Percentile",
                    PERCENTILES.format(metric="cache_write_percentile"),
                    unit="ms",
                ),
                _top("Slow Reads (ms)", "top_n(top_n_cache_read_command,10,des)"),
                _top("Slow Writes (ms)", "top_n(top_n_cache_write_command,10,des)"),
            ],
        ),
    )


def _queue_page(prefix: str) -> list[Widget]:
    """A broker's or a topic's messages: consumed, and produced."""
    return [
        _line("Consume Load", f"{prefix}_consume_cpm", unit="msgs / min"),
        _line("Consume Success Rate", f"{prefix}_consume_sla/100", unit="%"),
        _line("Avg Transmission Latency", f"{prefix}_consume_latency", unit="ms"),
        _line(
            "Transmission Latency Percentile",
            PERCENTILES.format(metric=f"{prefix}_consume_percentile"),
            unit="ms",
        ),
        _line("Produce Load", f"{prefix}_produce_cpm", unit="msgs / min"),
        _line("Produce Success Rate", f"{prefix}_produce_sla/100", unit="%"),
    ]


def _queues() -> tuple[dict[str, Any], ...]:
    """The message brokers services use, and their topics and queues."""
    endpoint = _dashboard(
        "Virtual-MQ-Endpoint", "Endpoint", _tabs(("Overview", _queue_page("mq_endpoint"))), layer="VIRTUAL_MQ"
    )
    return (
        *_virtual_root(
            "VIRTUAL_MQ",
            "Virtual-MQ",
            _listing("ServiceList", "Virtual-MQ-Service", "mq_service_consume", "latency"),
            ("Overview", _queue_page("mq_service")),
            ("Topics", [_listing("EndpointList", "Virtual-MQ-Endpoint", "mq_endpoint_consume", "latency")]),
        ),
        endpoint,
    )


_MENU = (
    ("Services", GENERAL, "services", "Services that report through SkyWalking's or OpenTelemetry's agents."),
    (
        "Virtual Database",
        "VIRTUAL_DATABASE",
        "virtual_database",
        "Databases services call, known from their spans.",
    ),
    ("Virtual Cache", "VIRTUAL_CACHE", "virtual_cache", "Caches services call, known from their spans."),
    ("Virtual MQ", "VIRTUAL_MQ", "virtual_mq", "Message brokers services use, known from their spans."),
)
"""SkyWalking's menu entries of the layers skyoap has: title, layer, i18n key and description."""


def menu_items(context: QueryContext) -> list[dict[str, Any]]:
    """SkyWalking's menu of the layers skyoap has: a leaf is active when its
    layer has services, a group when one of its leaves is."""
    leaves: list[dict[str, Any]] = [
        {
            "title": title,
            "icon": None,
            "layer": layer,
            "activate": bool(list_services(context, layer)),
            "subItems": [],
            "description": description,
            "documentLink": None,
            "i18nKey": f"general_service_{key}",
        }
        for title, layer, key, description in _MENU
    ]
    group = {**leaves[0], "title": "General Service", "icon": "general_service", "layer": ""}
    active = any(leaf["activate"] for leaf in leaves)
    return [{**group, "activate": active, "subItems": leaves, "i18nKey": "general_service"}]
