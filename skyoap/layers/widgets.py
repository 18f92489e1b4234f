"""The pieces of SkyWalking's UI's dashboards, in its JSON format: a
dashboard is ``{layer, entity, name, id, isRoot, children}``, its children
widgets on a 24-column grid (``x, y, w, h``) whose ``expressions`` are MQE,
and tabs holding widgets in turn. Each layer's file lays out its own pages
with them, as SkyWalking lays out its own."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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


def line(title: str, *expressions: str, unit: str = "", labels: Sequence[str] = ()) -> Widget:
    """A chart of ``expressions`` over time, each named by its label if given."""
    widget = _widget("Line", title, expressions, showXAxis=True, showYAxis=True, smooth=False)
    if unit or labels:
        config = [{"unit": unit} if unit else {} for _ in expressions]
        for each, label in zip(config, labels, strict=False):
            each["label"] = label
        widget["metricConfig"] = config
    return widget


def card(title: str, expression: str, unit: str = "") -> Widget:
    widget = _widget("Card", title, [expression], fontSize=14, textAlign="center", showUnit=bool(unit))
    if unit:
        widget["metricConfig"] = [{"unit": unit}]
    return widget


def top(title: str, expression: str) -> Widget:
    return _widget("TopList", title, [expression], color="purple")


def listing(kind: str, dashboard: str, prefix: str, latency: str = "resp_time") -> Widget:
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


def meter_listing(kind: str, dashboard: str, *figures: tuple[str, str, str]) -> Widget:
    """A ServiceList or InstanceList of a layer of meters: each row's
    ``figures`` (label, unit, MQE of one metric), if any."""
    widget = _widget(
        kind, "", [f"avg({m})" for _, _, m in figures], dashboardName=dashboard, fontSize=12,
        showXAxis=False, showYAxis=False,
    )  # fmt: skip
    if figures:
        widget["subExpressions"] = [m for _, _, m in figures]
        widget["metricConfig"] = [{"label": label, "unit": unit} for label, unit, _ in figures]
    return widget


def topology(**links: Any) -> Widget:
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


def whole(kind: str) -> Widget:
    """A widget of the whole page's width: a trace or log browser, a topology."""
    return {"type": kind, "widget": {"title": kind}, "graph": {}}


TAB_HEIGHT = 52
"""A page's tabs, as high as SkyWalking's own templates make them."""

_SIZES = {"Card": (8, 5), "Line": (6, 11), "TopList": (8, 14)}
"""Each kind of widget's width (of 24 columns) and height (in grid rows),
as in SkyWalking's templates; what fills a page takes it whole."""

_WHOLE = (24, 48)


def _size(shown: Widget) -> tuple[int, int]:
    if shown["type"] != "Widget":
        return _WHOLE
    return _SIZES.get(shown["graph"].get("type", ""), _WHOLE)


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


def tabs(*named: tuple[str, Sequence[Widget]]) -> list[Widget]:
    tab = {
        "type": "Tab",
        "widget": {"title": ""},
        "graph": {},
        "activedTabIndex": 0,
        "children": [{"name": name, "children": _laid_out(ws)} for name, ws in named],
    }
    return [{"x": 0, "y": 0, "w": 24, "h": TAB_HEIGHT, "i": "0", **tab}]


EVENTS_HEIGHT = 12


def events_above(children: list[Widget]) -> list[Widget]:
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


def calls(prefix: str, sla: str = "sla", kind: str = "") -> list[Widget]:
    """Load, success rate, latency and its percentiles of what ``prefix``
    counts, their titles naming the ``kind`` of call (``Read``) if given."""
    k = f"{kind} " if kind else ""
    return [
        line(f"{k}Load", f"{prefix}_cpm", unit="calls / min"),
        line(f"{k}Success Rate", f"{prefix}_{sla}/100", unit="%"),
        line(f"Avg {k}Response Time", f"{prefix}_resp_time", unit="ms"),
        line(f"{k}Response Time Percentile", PERCENTILES.format(metric=f"{prefix}_percentile"), unit="ms"),
    ]


def dashboard(
    name: str, entity: str, children: list[Widget], root: bool = False, layer: str = GENERAL
) -> dict[str, Any]:
    configuration = {"layer": layer, "entity": entity, "name": name, "id": name, "isRoot": root,
                     "children": children}  # fmt: skip
    return {"id": name, "configuration": configuration}


def layer_pages(
    layer: str, name: str, services: Widget, *service_tabs: tuple[str, Sequence[Widget]]
) -> tuple[dict[str, Any], ...]:
    """The pages of a layer of its own: its ``services`` listed
    (``{name}-Root``), and one of them (``{name}-Service``, of ``service_tabs``)."""
    return (
        dashboard(f"{name}-Root", "All", tabs(("Services", [services])), root=True, layer=layer),
        dashboard(f"{name}-Service", "Service", tabs(*service_tabs), layer=layer),
    )


def instance_page(layer: str, name: str, *named: tuple[str, Sequence[Widget]]) -> dict[str, Any]:
    """A layer's page of one instance (``{name}-Instance``), of tabs."""
    return dashboard(f"{name}-Instance", "ServiceInstance", tabs(*named), layer=layer)
