"""What a layer declares: everything skyoap knows of one of SkyWalking's
layers (``model/layers.py``), in the layer's own file."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from skyoap.layers.spans import Measure
from skyoap.model.metrics import Metrics
from skyoap.model.spans import SpanLayer
from skyoap.vocabulary.catalogue import MetricDef

MENU_GROUPS = {
    "general_service": "General Service",
    "infrastructure": "Infrastructure",
    "database": "Database",
}
"""The groups of SkyWalking's menu that skyoap's layers are in, by i18n key, in its order."""


@dataclass(frozen=True)
class MenuItem:
    """The layer's entry in SkyWalking's UI menu (``getMenuItems``)."""

    title: str
    key: str
    """Its i18n key, after its group's and an underscore."""
    description: str
    group: str = "general_service"
    """The group it is in (``MENU_GROUPS``)."""


@dataclass(frozen=True)
class CalledView:
    """How skyoap's web UI lists the layer's services on its page of what
    services call: ``title``, the ``prefix`` of the metrics each row shows,
    the ``figures`` (heading, metric after the prefix), and the sampled
    lists of slow calls (metric, what it samples)."""

    title: str
    prefix: str
    figures: tuple[tuple[str, str], ...]
    slow: tuple[tuple[str, str], ...] = ()


CALLS = (("Load (calls / min)", "cpm"), ("Latency (ms)", "resp_time"), ("Success (%)", "sla/100"))
"""The figures of calls."""


@dataclass(frozen=True)
class Layer:
    name: str
    """SkyWalking's name of the layer (``GENERAL``, ``VIRTUAL_DATABASE``, …)."""
    menu: MenuItem
    metrics: tuple[MetricDef, ...]
    """The metrics of the layer by SkyWalking's names: its part of the catalogue."""
    dashboards: Callable[[], tuple[dict[str, Any], ...]]
    """Its pages in SkyWalking's UI (``layers/widgets.py``), built when first asked for."""
    known_by: type[Metrics] | None = None
    """For a layer of services nobody reports from (what their callers
    named): the metrics its services are known by. None: its services report
    themselves (and are registered)."""
    span_layer: SpanLayer | None = None
    """The layer of the spans whose calls ``measure`` counts, if any."""
    measure: Measure | None = None
    called: CalledView | None = None
    """Its place on the web UI's page of what services call, if it has one."""
    rules: tuple[str, ...] = ()
    """Its meter rule files (``layers/rules``): the receivers run them, and
    a layer other than GENERAL knows its services by the meters they make."""
