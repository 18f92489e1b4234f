"""The components agents name by id, as SkyWalking's ``component-libraries.yml``
numbers them (``components.tsv`` holds its table): a span's component is
answered by name, a topology node's type is the component that served it
(the one of highest priority) or, for an address only called, the server
its caller's client library reaches."""

from __future__ import annotations

import functools
from importlib import resources
from typing import NamedTuple


class Component(NamedTuple):
    name: str
    priority: int
    """How close the library is to the business code: the higher wins a node's type."""
    server: str
    """What a client library's exit spans reach (``Jedis``: ``Redis``); empty when not one."""


@functools.cache
def catalogue() -> dict[int, Component]:
    rows = resources.files(__package__).joinpath("components.tsv").read_text().splitlines()
    found: dict[int, Component] = {}
    for row in rows:
        if row and not row.startswith("#"):
            component_id, name, priority, server = row.split("\t")
            found[int(component_id)] = Component(name, int(priority), server)
    return found


def component_name(component_id: int) -> str:
    """The component's name, or its id as a string when it is none SkyWalking numbers."""
    known = catalogue().get(component_id)
    return known.name if known is not None else str(component_id)


def server_name(component_id: int) -> str:
    """What exit spans of the component reach: its server, else the component itself."""
    known = catalogue().get(component_id)
    return (known.server or known.name) if known is not None else str(component_id)


def priority(component_id: int) -> int:
    known = catalogue().get(component_id)
    return known.priority if known is not None else 50
