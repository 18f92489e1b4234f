"""The layers skyoap has, one file each: a layer declares its metrics by
SkyWalking's names, its menu entry and dashboards, how its services are
known, and the spans it measures (``layer.py``). The receiver, the
catalogue, the query endpoint's metadata, topology and dashboards all read
them from ``LAYERS``; adding a layer is adding its file here
(CONTRIBUTING.md, "Adding a layer")."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from skyoap.layers import (
    general,
    mysql,
    os_linux,
    postgresql,
    redis,
    virtual_cache,
    virtual_database,
    virtual_mq,
)
from skyoap.layers.layer import Layer
from skyoap.layers.meters import RULES
from skyoap.model.metrics import Metrics
from skyoap.vocabulary.catalogue import MetricDef

LAYERS: tuple[Layer, ...] = (
    general.LAYER, virtual_database.LAYER, virtual_cache.LAYER, virtual_mq.LAYER, os_linux.LAYER, mysql.LAYER,
    postgresql.LAYER, redis.LAYER,
)  # fmt: skip
"""In the order SkyWalking's UI lists them."""

CATALOGUE: Mapping[str, MetricDef] = {d.name: d for layer in LAYERS for d in layer.metrics}
"""The metrics of fixed names, by name (``vocabulary/catalogue.py``)."""

KNOWN_BY_CALLERS: Mapping[str, type[Metrics]] = {
    layer.name: layer.known_by for layer in LAYERS if layer.known_by is not None
}
"""The layers of services known from their callers, and the metrics they are known by."""

METERED: tuple[str, ...] = tuple(layer.name for layer in LAYERS if layer.rules and layer.name != "GENERAL")
"""The layers of services known from the meters their rules make."""

RULE_FILES: tuple[Path, ...] = tuple(RULES / name for layer in LAYERS for name in layer.rules)
"""The meter rule files skyoap ships, each layer's."""
