"""Inventory rows in SQLite: a table per model with the key as primary key and a
UNIQUE sequence, so neither is ever stored twice."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pipeline.inventory import Inventory
from pipeline.stream import Column, ColumnType
from storage.api import I, InsertOutcome, StorageError, Stored

_SQL_TYPES = {ColumnType.STRING: "TEXT", ColumnType.INT: "INTEGER", ColumnType.BOOL: "INTEGER"}


def _sql_value(column: Column, value: Any) -> Any:
    if column.type is ColumnType.MAP:
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    if column.type is ColumnType.BOOL:
        return int(value)
    return value


class EmbeddedInventoryDAO:
    def __init__(self, path: str | Path) -> None:
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        # One connection used under a lock: SQLite serialises writers anyway.
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._lock = threading.Lock()

    def install(self, models: Sequence[type[Inventory]]) -> None:
        with self._lock:
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS sequence_fence (model TEXT PRIMARY KEY, last INTEGER NOT NULL)"
            )
            for model in models:
                cols = ", ".join(
                    f"{c.name} {_SQL_TYPES.get(c.type, 'TEXT')}"
                    for c in model.columns()
                    if c.name != "sequence"
                )
                self._db.execute(
                    f"CREATE TABLE IF NOT EXISTS {model.MODEL} (key TEXT PRIMARY KEY, "
                    f"sequence INTEGER NOT NULL UNIQUE, version INTEGER NOT NULL, {cols})"
                )
                self._db.execute(
                    f"CREATE INDEX IF NOT EXISTS {model.MODEL}_heartbeat "
                    f"ON {model.MODEL} (active, heartbeat_time)"
                )

    def _rows(self, model: type[I], where: str, args: Sequence[Any]) -> list[tuple[I, int]]:
        names = [c.name for c in model.columns()]
        with self._lock:
            cur = self._db.execute(
                f"SELECT version, {', '.join(names)} FROM {model.MODEL} WHERE {where}", args
            )
            rows = cur.fetchall()
        return [(model.from_row(dict(zip(names, r[1:], strict=True))), r[0]) for r in rows]

    def get_many(self, model: type[I], keys: Sequence[str]) -> dict[str, Stored[I]]:
        found: dict[str, Stored[I]] = {}
        for start in range(0, len(keys), 500):  # SQLite's limit on bound parameters
            chunk = list(keys[start : start + 500])
            marks = ",".join("?" * len(chunk))
            for item, version in self._rows(model, f"key IN ({marks})", chunk):
                found[item.key()] = Stored(item, version)
        return found

    def get_by_sequence(self, model: type[I], sequence: int) -> I | None:
        rows = self._rows(model, "sequence = ?", [sequence])
        return rows[0][0] if rows else None

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def update(self, model: type[I], rows: Sequence[tuple[Stored[I], I]]) -> list[str]:
        cols = [c for c in model.columns() if c.name != "sequence"]
        assignments = ", ".join(f"{c.name} = ?" for c in cols)
        changed: list[str] = []
        with self._transaction() as db:
            for stored, new in rows:
                cur = db.execute(
                    f"UPDATE {model.MODEL} SET {assignments}, version = version + 1 "
                    "WHERE key = ? AND version = ?",
                    [*(_sql_value(c, getattr(new, c.name)) for c in cols), new.key(), stored.version],
                )
                if cur.rowcount == 0:
                    changed.append(new.key())
        return changed

    def insert(self, model: type[I], items: Sequence[I]) -> InsertOutcome:
        cols = list(model.columns())
        sql = (
            f"INSERT INTO {model.MODEL} (key, version, {', '.join(c.name for c in cols)}) "
            f"VALUES (?, 1, {', '.join('?' * len(cols))})"
        )
        outcome = InsertOutcome()
        with self._transaction() as db:
            for item in items:
                try:
                    db.execute(sql, [item.key(), *(_sql_value(c, getattr(item, c.name)) for c in cols)])
                except sqlite3.IntegrityError as e:
                    if ".sequence" in str(e):  # the UNIQUE column backs the fence up; never expected
                        raise StorageError(f"{model.MODEL}: id {item.sequence} is stored already") from e
                    outcome.key_taken.append(item.key())
                else:
                    outcome.inserted.append(item.key())
        return outcome

    def reserve_sequences(self, model: type[Inventory], first: int, last: int) -> bool:
        with self._transaction() as db:
            row = db.execute("SELECT last FROM sequence_fence WHERE model = ?", [model.MODEL]).fetchone()
            if row is not None and first <= row[0]:
                return False
            db.execute(
                "INSERT OR REPLACE INTO sequence_fence (model, last) VALUES (?, ?)", [model.MODEL, last]
            )
            return True

    def max_sequence(self, model: type[Inventory]) -> int:
        with self._lock:
            row = self._db.execute(
                "SELECT last FROM sequence_fence WHERE model = ?", [model.MODEL]
            ).fetchone()
            (stored,) = self._db.execute(f"SELECT COALESCE(MAX(sequence), 0) FROM {model.MODEL}").fetchone()
        return max(int(stored), row[0] if row else 0)

    def list(self, model: type[I], limit: int = 10_000) -> list[I]:
        return [item for item, _ in self._rows(model, "1 = 1 ORDER BY sequence LIMIT ?", [limit])]

    def deactivate_stale(self, model: type[Inventory], cutoff_ms: int) -> int:
        with self._lock:
            cur = self._db.execute(
                f"UPDATE {model.MODEL} SET active = 0, version = version + 1 "
                "WHERE active = 1 AND heartbeat_time < ?",
                [cutoff_ms],
            )
            return cur.rowcount

    def close(self) -> None:
        with self._lock:
            self._db.close()
