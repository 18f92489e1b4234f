"""The inventory cache: name -> id and id -> row, in front of storage."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from skyoap.model.inventory import Inventory
from skyoap.runtime.bounded import BoundedDict
from skyoap.storage.api import I, InventoryDAO


class RecentKeys:
    """Remembers when keys were last seen, for ``ttl_s``, in bounded memory."""

    def __init__(self, ttl_s: float, size: int = 200_000) -> None:
        self._ttl_s = ttl_s
        self._size = size
        self._seen: dict[tuple[type[Inventory], str], float] = {}
        self._lock = threading.Lock()

    def claim(self, model: type[Inventory], key: str, now: float) -> bool:
        """False if ``key`` was claimed less than ``ttl_s`` ago; otherwise
        records it as claimed now and returns True."""
        with self._lock:
            last = self._seen.get((model, key))
            if last is not None and now - last < self._ttl_s:
                return False
            if len(self._seen) >= self._size:
                live = {k: t for k, t in self._seen.items() if now - t < self._ttl_s}
                if len(live) > self._size // 2:  # keep the newest half, so this runs rarely
                    live = dict(list(live.items())[len(live) - self._size // 2 :])
                self._seen = live
            self._seen[(model, key)] = now
            return True


class InventoryCache:
    """Only names that have an id are cached, each for ``max_age_s``: a name
    that time to live removed from storage is then found missing, and
    registered again. A name without an id is asked of storage again at most
    every ``miss_recheck_s``: agents ask again and again while L2 is still
    storing it, and each ask would otherwise cost storage a read. ``learn``
    fills the cache directly (from this node's own L2)."""

    def __init__(self, dao: InventoryDAO, size: int, miss_recheck_s: float, max_age_s: float) -> None:
        self._dao = dao
        self._size = size
        self._max_age_s = max_age_s
        self._ids: dict[type[Inventory], BoundedDict[str, tuple[int, float]]] = {}
        """Each name's id, and when it was cached (``time.monotonic``)."""
        self._rows: dict[type[Inventory], BoundedDict[int, Inventory]] = {}
        self._misses = RecentKeys(miss_recheck_s)

    def _ids_of(self, model: type[Inventory]) -> BoundedDict[str, tuple[int, float]]:
        return self._ids.setdefault(model, BoundedDict(self._size))

    def ids(self, model: type[Inventory], keys: Sequence[str]) -> dict[str, int]:
        """The ids of those ``keys`` that have one."""
        now = time.monotonic()
        oldest = now - self._max_age_s
        get = self._ids_of(model).getter
        found = {k: cached[0] for k in keys if (cached := get(k)) is not None and cached[1] > oldest}
        if len(found) < len(keys):
            ask = [k for k in keys if k not in found and self._misses.claim(model, k, now)]
            if ask:
                rows = [s.item for s in self._dao.get_many(model, ask).values() if s.item.sequence]
                self.learn(model, rows)
                found.update((row.key(), row.sequence) for row in rows)
        return found

    def learn(self, model: type[Inventory], items: Sequence[Inventory]) -> None:
        """Caches rows just stored with their ids."""
        ids = self._ids_of(model)
        rows = self._rows.setdefault(model, BoundedDict(self._size))
        now = time.monotonic()
        for item in items:
            ids.put(item.key(), (item.sequence, now))
            rows.put(item.sequence, item)

    def by_id(self, model: type[I], sequence: int) -> I | None:
        """The stored row with id ``sequence`` as first seen, or None."""
        rows = self._rows.setdefault(model, BoundedDict(self._size))
        row = rows.get(sequence)
        if row is None:
            row = self._dao.get_by_sequence(model, sequence)
            if row is not None:
                rows.put(sequence, row)
        return row  # type: ignore[return-value]
