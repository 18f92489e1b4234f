"""The in-process global lock and sequence allocator of the embedded storage."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator


class LocalSequenceAllocator:
    """Sequences kept in memory and recovered from storage on first use of a
    scope, so a restarted node continues above the largest stored id."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._next: dict[str, int] = {}

    @contextlib.contextmanager
    def lock(self, scope: str) -> Iterator[None]:
        with self._guard:
            lock = self._locks.setdefault(scope, threading.Lock())
        with lock:
            yield

    def allocate(self, scope: str, count: int, stored_max: Callable[[], int]) -> list[int]:
        with self._guard:
            first = self._next.get(scope)
        if first is None:
            first = stored_max() + 1
        with self._guard:
            first = max(first, self._next.get(scope, first))
            self._next[scope] = first + count
        return list(range(first, first + count))

    def raise_floor(self, scope: str, floor: int) -> None:
        with self._guard:
            self._next[scope] = max(self._next.get(scope, 0), floor + 1)

    def close(self) -> None:
        pass
