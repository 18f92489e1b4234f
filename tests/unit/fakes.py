"""Fakes of the project's own storage interface, for unit tests."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from pipeline.inventory import Inventory
from storage.api import I, InsertOutcome, Stored


class MemoryInventoryDAO:
    """Rows in dicts, with the same uniqueness rules and sequence fence as the
    real storages. Setting ``fence`` makes ids up to it look reserved by
    another writer."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, tuple[Any, int]]] = {}
        self.fence: dict[str, int] = {}
        self.inserts = 0
        self.lock = threading.Lock()

    def _table(self, model: type[Inventory]) -> dict[str, tuple[Any, int]]:
        return self.rows.setdefault(model.MODEL, {})

    def install(self, models: Sequence[type[Inventory]]) -> None:
        for m in models:
            self._table(m)

    def get_many(self, model: type[I], keys: Sequence[str]) -> dict[str, Stored[I]]:
        t = self._table(model)
        return {k: Stored(t[k][0], t[k][1]) for k in keys if k in t}

    def get_by_sequence(self, model: type[I], sequence: int) -> I | None:
        return next((r for r, _ in self._table(model).values() if r.sequence == sequence), None)

    def update(self, model: type[I], rows: Sequence[tuple[Stored[I], I]]) -> list[str]:
        t = self._table(model)
        changed = []
        with self.lock:
            for stored, new in rows:
                if t[new.key()][1] != stored.version:
                    changed.append(new.key())
                else:
                    t[new.key()] = (new, int(stored.version) + 1)
        return changed

    def insert(self, model: type[I], items: Sequence[I]) -> InsertOutcome:
        t = self._table(model)
        out = InsertOutcome()
        with self.lock:
            self.inserts += 1
            taken = {r.sequence for r, _ in t.values()}
            for item in items:
                assert item.sequence not in taken, f"id {item.sequence} stored twice"
                if item.key() in t:
                    out.key_taken.append(item.key())
                else:
                    t[item.key()] = (item, 1)
                    taken.add(item.sequence)
                    out.inserted.append(item.key())
        return out

    def reserve_sequences(self, model: type[Inventory], first: int, last: int) -> bool:
        with self.lock:
            if first <= self.fence.get(model.MODEL, 0):
                return False
            self.fence[model.MODEL] = last
            return True

    def max_sequence(self, model: type[Inventory]) -> int:
        return self.fence.get(model.MODEL, 0)

    def list(self, model: type[I], limit: int = 10_000) -> list[I]:
        return sorted((r for r, _ in self._table(model).values()), key=lambda r: r.sequence)[:limit]

    def deactivate_stale(self, model: type[Inventory], cutoff_ms: int) -> int:
        return 0

    def close(self) -> None:
        pass
