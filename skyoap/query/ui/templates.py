"""The dashboards SkyWalking's UI draws, as every node answers them: the
shipped ones (``dashboards.py``) overlaid with what users added, changed and
disabled (``addTemplate``, ``changeTemplate``, ``disableTemplate``).

What users did is kept in the storage's shared state, a document per
dashboard (``ui-template:{id}``), so that every node of a cluster answers
the same and a restart loses nothing. A change replaces its dashboard's
document whole: of two made at once to one dashboard, the later stands.
Resetting a dashboard (``skyoap dashboards reset``) empties its document:
a shipped one is shipped again, an added one is gone."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from skyoap.query.context import QueryContext
from skyoap.query.ui.dashboards import dashboards
from skyoap.storage.api import StateStore

PREFIX = "ui-template:"
"""The names of the dashboards' documents in the shared state."""

MAX_CONFIGURATION_BYTES = 1 << 20
"""The largest dashboard kept (SkyWalking's largest templates are some 100 KiB)."""

MAX_TEMPLATES = 1000
"""The most dashboards kept, shipped ones included."""


@dataclass(frozen=True)
class Template:
    id: str
    configuration: str
    """The dashboard, as the UI's JSON."""
    disabled: bool = False
    shipped: bool = False
    """One of skyoap's own dashboards (changed or not)."""
    changed: bool = False
    """Added, changed or disabled by a user."""

    def key(self) -> tuple[str, str, str]:
        """The dashboard as the UI tells them apart: its layer, entity and name."""
        return _key(json.loads(self.configuration))

    def answer(self) -> dict[str, str]:
        return {"id": self.id, "configuration": self.configuration}


def _key(configuration: Mapping[str, Any]) -> tuple[str, str, str]:
    return configuration["layer"], configuration["entity"], configuration["name"]


def _shipped() -> dict[str, Template]:
    return {d["id"]: Template(d["id"], json.dumps(d["configuration"]), shipped=True) for d in dashboards()}


def templates(state: StateStore | None) -> dict[str, Template]:
    """Every dashboard, disabled ones too: the shipped ones first, in their
    order, overlaid with the stored ones, then those users added."""
    found = _shipped()
    if state is None:
        return found
    for name in state.names():
        value = state.load(name)[0] if name.startswith(PREFIX) else None
        if value:  # not an emptied document (a reset one)
            id_ = name[len(PREFIX) :]
            found[id_] = Template(
                id_, value["configuration"], value["disabled"], shipped=id_ in found, changed=True
            )
    return found


def all_templates(context: QueryContext) -> list[dict[str, str]]:
    return [t.answer() for t in templates(context.state).values() if not t.disabled]


def template(context: QueryContext, id: str) -> dict[str, str] | None:
    found = templates(context.state).get(id)
    return None if found is None or found.disabled else found.answer()


def add_template(context: QueryContext, setting: Mapping[str, Any]) -> dict[str, Any]:
    """A new dashboard, under an id skyoap gives it."""
    id_ = str(uuid.uuid4())
    return _changed(context.state, id_, setting["configuration"], new=True)


def change_template(context: QueryContext, setting: Mapping[str, Any]) -> dict[str, Any]:
    return _changed(context.state, setting["id"], setting["configuration"], new=False)


def disable_template(context: QueryContext, id: str) -> dict[str, Any]:
    """The dashboard is no longer listed (``skyoap dashboards reset`` brings it back)."""
    state = _required(context.state)
    found = templates(state).get(id)
    if found is None or found.disabled:
        return _status(id, f"there is no dashboard {id!r} to disable")
    _store(state, id, {"configuration": found.configuration, "disabled": True})
    return _status(id)


def _changed(state: StateStore | None, id_: str, configuration: str, new: bool) -> dict[str, Any]:
    state = _required(state)
    problem = _problem(configuration)
    if problem is not None:
        return _status(id_, f"the dashboard cannot be kept: {problem}")
    known = templates(state)
    if not new and (id_ not in known or known[id_].disabled):
        return _status(id_, f"there is no dashboard {id_!r} to change (addTemplate adds one)")
    if new and len(known) >= MAX_TEMPLATES:
        return _status(id_, f"skyoap keeps at most {MAX_TEMPLATES} dashboards: disable one first")
    key = _key(json.loads(configuration))
    for other in known.values():
        if other.id != id_ and not other.disabled and other.key() == key:
            layer, entity, name = key
            return _status(id_, f"there is a dashboard {name!r} of {entity} in {layer} already ({other.id})")
    _store(state, id_, {"configuration": configuration, "disabled": False})
    return _status(id_)


def _problem(configuration: str) -> str | None:
    """What makes ``configuration`` no dashboard the UI can draw; None if nothing."""
    if len(configuration.encode()) > MAX_CONFIGURATION_BYTES:
        return f"it is larger than {MAX_CONFIGURATION_BYTES} bytes"
    try:
        value = json.loads(configuration)
    except ValueError as e:
        return f"it is not JSON ({e})"
    if not isinstance(value, dict):
        return "it is not a JSON object"
    missing = [k for k in ("layer", "entity", "name") if not isinstance(value.get(k), str) or not value[k]]
    if missing:
        return f"it names no {', '.join(missing)}"
    return None


def _store(state: StateStore, id_: str, value: dict[str, Any]) -> None:
    """Replaces the dashboard's document, whatever it held."""
    while True:
        _, version = state.load(PREFIX + id_)
        if state.swap(PREFIX + id_, version, value):
            return


def _required(state: StateStore | None) -> StateStore:
    if state is None:
        raise ValueError("this node keeps no dashboards: it was started without a shared state")
    return state


def _status(id_: str, refused: str | None = None) -> dict[str, Any]:
    return {"id": id_, "status": refused is None, "message": refused}


def reset(state: StateStore, ids: Iterable[str] | None = None) -> list[str]:
    """Empties the documents of ``ids`` (every dashboard users changed, if
    None): a shipped dashboard is shipped again, an added one is gone.
    Returns the ids reset; ValueError naming an id nothing was kept of."""
    changed = [t.id for t in templates(state).values() if t.changed]
    wanted = changed if ids is None else list(ids)
    unknown = [i for i in wanted if i not in changed]
    if unknown:
        raise ValueError(f"no change to a dashboard is kept under {', '.join(map(repr, unknown))}")
    for id_ in wanted:
        _store(state, id_, {})
    return wanted
