"""One lifecycle for every component that owns threads: ``start()`` starts
them (nothing starts in ``__init__``), ``close(timeout_s)`` stops them and
joins every one within ``timeout_s``, idempotently."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Protocol, TypeVar


class Component(Protocol):
    def start(self) -> None: ...

    def close(self, timeout_s: float) -> None: ...


C = TypeVar("C", bound=Component)


class Lifecycle:
    """Starts components in order and closes them in the reverse order: what
    starts first (storage) closes last, and what opens the node to traffic
    (the server, the cluster) starts last and closes first. If a start fails,
    the caller closes, and what already started is closed."""

    def __init__(self) -> None:
        self._stack = contextlib.ExitStack()
        self._timeout_s = 0.0

    def start(self, component: C) -> C:
        component.start()
        self._stack.callback(lambda: component.close(self._timeout_s))
        return component

    def close(self, timeout_s: float) -> None:
        """Closes each component, giving each up to ``timeout_s``: a pool that
        drains into storage must not lose its time to the step before it."""
        self._timeout_s = timeout_s
        self._stack.close()


class OnClose:
    """A step that owns no thread, as a component: nothing to start, and
    ``step`` runs at its place in the close order."""

    def __init__(self, step: Callable[[], object]) -> None:
        self._step = step

    def start(self) -> None:
        pass

    def close(self, timeout_s: float) -> None:
        self._step()
