"""Fakes of the project's own interfaces (storage, the next worker), for unit tests."""

from __future__ import annotations

import copy
import threading
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

from skyoap.model.inventory import Inventory
from skyoap.model.metrics import Downsampling, Metrics
from skyoap.model.stream import StreamData
from skyoap.model.topics import Position
from skyoap.runtime.budget import MemoryBudget
from skyoap.runtime.worker import Worker
from skyoap.storage.api import I, InsertOutcome, M, MetricsWrite, PutOutcome, StorageUnavailable, Stored

T = TypeVar("T", bound=StreamData)


class Collect(Worker[T], Generic[T]):
    """A next worker that keeps what it is given, in order."""

    def __init__(self, worker_id: int = 0) -> None:
        super().__init__(worker_id, "collect")
        self.items: list[T] = []
        self.lock = threading.Lock()

    def accept(self, item: T) -> None:
        with self.lock:
            self.items.append(item)


class FillsTheBudget(Collect[T]):
    """A next worker that fills ``budget`` once it holds ``fill_at`` items:
    no call finds room after that until ``make_room``."""

    def __init__(self, budget: MemoryBudget, fill_at: int, worker_id: int = 0) -> None:
        super().__init__(worker_id)
        self._budget = budget
        self._fill_at = fill_at

    def accept(self, item: T) -> None:
        super().accept(item)
        if len(self.items) == self._fill_at:
            self._budget.add(self._budget.limit_bytes)

    def make_room(self) -> None:
        self._budget.add(-self._budget.limit_bytes)


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

    def update(
        self, model: type[I], rows: Sequence[tuple[Stored[I], I]], positions: Sequence[Position] | None = None
    ) -> list[str]:
        t = self._table(model)
        changed = []
        with self.lock:
            for stored, new in rows:
                if t[new.key()][1] != stored.version:
                    changed.append(new.key())
                else:
                    t[new.key()] = (new, int(stored.version) + 1)
        return changed

    def insert(
        self, model: type[I], items: Sequence[I], positions: Sequence[Position] | None = None
    ) -> InsertOutcome:
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

    def names_of_service(self, model: type[Inventory], service_id: int, limit: int) -> Sequence[str]:
        rows = sorted((r for r, _ in self._table(model).values()), key=lambda r: r.sequence)
        return [r.name for r in rows if getattr(r, "service_id", None) == service_id][:limit]

    def list(self, model: type[I], limit: int = 10_000) -> list[I]:
        return sorted((r for r, _ in self._table(model).values()), key=lambda r: r.sequence)[:limit]

    def stale(
        self, model: type[I], cutoff_ms: int, limit: int = 10_000, active: bool | None = True
    ) -> Sequence[Stored[I]]:
        return []

    def remove(self, *args: Any, **kwargs: Any) -> Sequence[str]:
        raise NotImplementedError

    def close(self) -> None:
        pass


class MemoryMetricsDAO:
    """Metrics rows in dicts with versions and rounds, like the real storages,
    and the ways real storages fail:

    - levels in ``down`` refuse every read and write, as if unreachable;
    - ``lands[level] = n``: the next write of that level stores its first ``n``
      rows, then raises as a timed-out request does (``n`` = all of them: the
      write landed, only the answer was lost);
    - keys in ``busy`` are refused as a busy server refuses them (429).
    """

    def __init__(self) -> None:
        self.rows: dict[tuple[str, Downsampling], dict[str, tuple[Any, int, dict[str, int]]]] = {}
        self.down: set[Downsampling] = set()
        self.lands: dict[Downsampling, int] = {}
        self.busy: set[str] = set()
        self.writes = 0

    def install(self, models: Sequence[type[Metrics]]) -> None:
        pass

    def get_many(self, model: type[M], level: Downsampling, keys: Sequence[str]) -> dict[str, Stored[M]]:
        if level in self.down:
            raise StorageUnavailable(f"{level.value} is down")
        table = self.rows.setdefault((model.MODEL, level), {})
        return {k: Stored(table[k][0], table[k][1], dict(table[k][2])) for k in keys if k in table}

    def put(self, model: type[M], level: Downsampling, rows: Sequence[MetricsWrite[M]]) -> PutOutcome:
        if level in self.down:
            raise StorageUnavailable(f"{level.value} is down")
        self.writes += 1
        table = self.rows.setdefault((model.MODEL, level), {})
        outcome = PutOutcome()
        landing = self.lands.pop(level, None)
        for n, row in enumerate(rows):
            if landing is not None and n == landing:
                break
            key = row.value.key()
            current = table.get(key)
            stale = (current is None) != (row.stored is None) or (
                current is not None and row.stored is not None and current[1] != row.stored.version
            )
            if stale or key in self.busy:
                outcome.retry.append(key)
            else:
                table[key] = (row.value, (current[1] + 1) if current else 1, dict(row.rounds))
        if landing is not None:
            raise StorageUnavailable(f"the write of {level.value} timed out after {landing} rows landed")
        return outcome

    def values(self, model: type[Metrics], level: Downsampling) -> dict[str, Any]:
        return {k: v for k, (v, _, _) in self.rows.get((model.MODEL, level), {}).items()}

    def query(self, *args: Any, **kwargs: Any) -> list[Any]:
        raise NotImplementedError

    def distinct(self, *args: Any, **kwargs: Any) -> set[tuple[str, ...]]:
        raise NotImplementedError

    def latest(self, model: type[M], level: Downsampling, first_bucket: int, by: str) -> list[M]:
        newest: dict[str, M] = {}
        for row in self.values(model, level).values():
            held = newest.get(getattr(row, by))
            if row.time_bucket >= first_bucket and (held is None or row.time_bucket > held.time_bucket):
                newest[getattr(row, by)] = row
        return list(newest.values())

    def expire(self, *args: Any, **kwargs: Any) -> int:
        raise NotImplementedError

    def close(self) -> None:
        pass


class MemoryStateStore:
    """The compare-and-swap documents of ``StateStore``, in a dict."""

    def __init__(self) -> None:
        self.docs: dict[str, tuple[int, dict[str, Any]]] = {}

    def load(self, name: str) -> tuple[dict[str, Any] | None, object]:
        version, value = self.docs.get(name, (0, None))
        return copy.deepcopy(value), version

    def swap(self, name: str, version: object, value: dict[str, Any]) -> bool:
        if self.docs.get(name, (0, None))[0] != version:
            return False
        self.docs[name] = (int(str(version)) + 1, copy.deepcopy(value))
        return True

    def names(self) -> list[str]:
        return sorted(self.docs)

    def close(self) -> None:
        pass
