"""One lifecycle for every component that owns threads: ``start()`` starts
them (nothing starts in ``__init__``), ``close(timeout_s)`` stops them and
joins every one within the budget, idempotently."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Protocol, TypeVar


class Component(Protocol):
    def start(self) -> None: ...

    def close(self, timeout_s: float) -> None: ...


C = TypeVar("C", bound=Component)


class Lifecycle:
    """Starts components in order and closes them in the reverse order, sharing
    one time budget: what starts first (storage) closes last, and what opens
    the node to traffic (the server, the cluster) starts last and closes first.
    If a start fails, what already started is closed."""

    def __init__(self) -> None:
        self._stack = contextlib.ExitStack()
        self._deadline = 0.0

    def start(self, component: C) -> C:
        component.start()
        self._stack.callback(lambda: component.close(self.remaining_s()))
        return component

    def on_close(self, step: Callable[[], object]) -> None:
        """Runs ``step`` at its place in the reverse order (a step that owns no thread)."""
        self._stack.callback(step)

    def remaining_s(self) -> float:
        """What is left of the closing budget."""
        return max(0.0, self._deadline - time.monotonic())

    def close(self, timeout_s: float) -> None:
        self._deadline = time.monotonic() + timeout_s
        self._stack.close()
