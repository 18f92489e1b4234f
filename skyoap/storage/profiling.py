"""Profiling tasks in the storage's shared state: a document per service
(``profile-tasks:{service}``), changed only if unchanged since it was read,
so that of two nodes changing one service's tasks at once neither loses the
other's change (a task created, a log line added)."""

from __future__ import annotations

from collections.abc import Callable

from skyoap.model.profiling import ProfileTask
from skyoap.storage.api import StateStore

PREFIX = "profile-tasks:"


def tasks(state: StateStore, service: str) -> list[ProfileTask]:
    """The service's tasks, oldest first."""
    return _read(state.load(PREFIX + service)[0])


def services(state: StateStore) -> list[str]:
    """The services that have tasks."""
    return sorted(n[len(PREFIX) :] for n in state.names() if n.startswith(PREFIX))


def change(
    state: StateStore, service: str, changed: Callable[[list[ProfileTask]], list[ProfileTask] | None]
) -> list[ProfileTask]:
    """Stores ``changed(tasks)`` as the service's tasks, read again and changed
    again if another node changed them meanwhile; nothing when it answers None.
    Returns the tasks as stored."""
    while True:
        doc, version = state.load(PREFIX + service)
        held = _read(doc)
        new = changed(held)
        if new is None:
            return held
        if state.swap(PREFIX + service, version, {"tasks": [t.to_json() for t in new]}):
            return new


def _read(doc: dict[str, object] | None) -> list[ProfileTask]:
    found = (doc or {}).get("tasks") or []
    assert isinstance(found, list)
    return [ProfileTask.from_json(t) for t in found]
