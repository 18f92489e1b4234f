"""What SkyWalking's UI draws, served as it asks for it: the menu
(``getMenuItems``) and the dashboards (``getAllTemplates``) of the layers
skyoap has, each declared by its layer (``layers/``, laid out with
``layers/widgets.py``). They are the defaults users change (``templates.py``)."""

from __future__ import annotations

from functools import cache
from typing import Any

from skyoap.layers import LAYERS
from skyoap.layers.layer import MENU_GROUPS
from skyoap.query.context import QueryContext
from skyoap.query.metadata import list_services


@cache
def dashboards() -> tuple[dict[str, Any], ...]:
    """Every dashboard, its ``configuration`` as a JSON value (not yet text)."""
    return tuple(d for layer in LAYERS for d in layer.dashboards())


def menu_items(context: QueryContext) -> list[dict[str, Any]]:
    """SkyWalking's menu of the layers skyoap has, in its groups: a leaf is
    active when its layer has services, a group when one of its leaves is."""
    groups: dict[str, list[dict[str, Any]]] = {key: [] for key in MENU_GROUPS}
    for layer in LAYERS:
        groups[layer.menu.group].append(
            {
                "title": layer.menu.title,
                "icon": None,
                "layer": layer.name,
                "activate": bool(list_services(context, layer.name)),
                "subItems": [],
                "description": layer.menu.description,
                "documentLink": None,
                "i18nKey": f"{layer.menu.group}_{layer.menu.key}",
            }
        )
    return [
        {
            "title": MENU_GROUPS[key], "icon": key, "layer": "", "subItems": leaves, "description": None,
            "activate": any(leaf["activate"] for leaf in leaves), "documentLink": None, "i18nKey": key,
        }
        for key, leaves in groups.items()
        if leaves
    ]  # fmt: skip
