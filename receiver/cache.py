"""The inventory cache: name -> id and id -> row, in front of storage."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Generic, TypeVar

from pipeline.inventory import Inventory
from storage.api import I, InventoryDAO

K = TypeVar("K")
V = TypeVar("V")


class _Bounded(Generic[K, V]):
    """A dict that forgets its oldest entries past ``size`` (ids never change
    once given, so an entry is never stale; eviction only bounds memory)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._data: dict[K, V] = {}
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        return self._data.get(key)

    def put(self, key: K, value: V) -> None:
        with self._lock:
            if len(self._data) >= self._size:
                for old in list(self._data)[: max(1, self._size // 10)]:
                    del self._data[old]
            self._data[key] = value


class InventoryCache:
    """Only names that have an id are cached: a name without one is asked of
    storage again on every request until L2 has stored it."""

    def __init__(self, dao: InventoryDAO, size: int) -> None:
        self._dao = dao
        self._size = size
        self._ids: dict[type[Inventory], _Bounded[str, int]] = {}
        self._rows: dict[type[Inventory], _Bounded[int, Inventory]] = {}

    def _ids_of(self, model: type[Inventory]) -> _Bounded[str, int]:
        return self._ids.setdefault(model, _Bounded(self._size))

    def ids(self, model: type[Inventory], keys: Sequence[str]) -> dict[str, int]:
        """The ids of those ``keys`` that have one."""
        cache = self._ids_of(model)
        found: dict[str, int] = {}
        misses = []
        for k in keys:
            seq = cache.get(k)
            if seq:
                found[k] = seq
            else:
                misses.append(k)
        if misses:
            for k, stored in self._dao.get_many(model, misses).items():
                if stored.item.sequence:
                    cache.put(k, stored.item.sequence)
                    found[k] = stored.item.sequence
        return found

    def by_id(self, model: type[I], sequence: int) -> I | None:
        """The stored row with id ``sequence`` as first seen, or None."""
        rows = self._rows.setdefault(model, _Bounded(self._size))
        row = rows.get(sequence)
        if row is None:
            row = self._dao.get_by_sequence(model, sequence)
            if row is not None:
                rows.put(sequence, row)
        return row  # type: ignore[return-value]
