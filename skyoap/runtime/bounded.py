"""A dict bounded in size, for caches whose entries never go stale."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedDict(Generic[K, V]):
    """A dict that forgets its oldest entries past ``size`` (ids never change
    once given, so an entry is never stale; eviction only bounds memory)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._data: dict[K, V] = {}
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        return self._data.get(key)

    @property
    def getter(self) -> Callable[[K], V | None]:
        """``get`` without a call of its own, for lookups by the thousand."""
        return self._data.get

    def put(self, key: K, value: V) -> None:
        with self._lock:
            if len(self._data) >= self._size:
                for old in list(self._data)[: max(1, self._size // 10)]:
                    del self._data[old]
            self._data[key] = value
