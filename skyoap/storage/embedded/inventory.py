"""Inventory rows in SQLite: a table per model with the key as primary key and a
UNIQUE sequence, so neither is ever stored twice."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from skyoap.model.inventory import Inventory
from skyoap.model.topics import Position
from skyoap.storage.api import I, InsertOutcome, StorageError, Stored, each_position
from skyoap.storage.embedded.db import (
    POSITION_COLUMNS,
    Database,
    chunks,
    column_definitions,
    position_of,
    position_values,
    sql_value,
)


class EmbeddedInventoryDAO:
    def __init__(self, db: Database) -> None:
        self._db = db

    def install(self, models: Sequence[type[Inventory]]) -> None:
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS sequence_fence (model TEXT PRIMARY KEY, last INTEGER NOT NULL)"
        )
        for model in models:
            self._db.execute(
                f"CREATE TABLE IF NOT EXISTS {model.MODEL} (key TEXT PRIMARY KEY, "
                f"sequence INTEGER NOT NULL UNIQUE, version INTEGER NOT NULL, "
                f"{column_definitions(model, leave_out=('sequence',))})"
            )
            self._db.execute(
                f"CREATE INDEX IF NOT EXISTS {model.MODEL}_heartbeat "
                f"ON {model.MODEL} (active, heartbeat_time)"
            )
            self._db.add_positions(model.MODEL)

    def get_many(self, model: type[I], keys: Sequence[str]) -> dict[str, Stored[I]]:
        found: dict[str, Stored[I]] = {}
        for chunk in chunks(keys):
            marks = ",".join("?" * len(chunk))
            for item, (version, *position) in self._db.rows(
                model, model.MODEL, f"key IN ({marks})", chunk, ("version", *POSITION_COLUMNS)
            ):
                found[item.key()] = Stored(item, version, position=position_of(position))
        return found

    def get_by_sequence(self, model: type[I], sequence: int) -> I | None:
        rows = self._db.rows(model, model.MODEL, "sequence = ?", [sequence])
        return rows[0][0] if rows else None

    def update(
        self,
        model: type[I],
        rows: Sequence[tuple[Stored[I], I]],
        positions: Sequence[Position] | None = None,
    ) -> list[str]:
        cols = [c for c in model.columns() if c.name != "sequence"]
        assignments = ", ".join(f"{n} = ?" for n in (*POSITION_COLUMNS, *(c.name for c in cols)))
        placed = each_position(positions, len(rows))
        changed: list[str] = []
        with self._db.transaction() as db:
            for (stored, new), position in zip(rows, placed, strict=True):
                values = [*position_values(position), *(sql_value(c, getattr(new, c.name)) for c in cols)]
                cur = db.execute(
                    f"UPDATE {model.MODEL} SET {assignments}, version = version + 1 "
                    "WHERE key = ? AND version = ?",
                    [*values, new.key(), stored.version],
                )
                if cur.rowcount == 0:
                    changed.append(new.key())
        return changed

    def insert(
        self, model: type[I], items: Sequence[I], positions: Sequence[Position] | None = None
    ) -> InsertOutcome:
        cols = list(model.columns())
        names = [*POSITION_COLUMNS, *(c.name for c in cols)]
        marks = ", ".join("?" * len(names))
        sql = f"INSERT INTO {model.MODEL} (key, version, {', '.join(names)}) VALUES (?, 1, {marks})"
        placed = each_position(positions, len(items))
        outcome = InsertOutcome()
        with self._db.transaction() as db:
            for item, position in zip(items, placed, strict=True):
                values = [*position_values(position), *(sql_value(c, getattr(item, c.name)) for c in cols)]
                try:
                    db.execute(sql, [item.key(), *values])
                except sqlite3.IntegrityError as e:
                    if ".sequence" in str(e):  # the UNIQUE column backs the fence up; never expected
                        raise StorageError(f"{model.MODEL}: id {item.sequence} is stored already") from e
                    outcome.key_taken.append(item.key())
                else:
                    outcome.inserted.append(item.key())
        return outcome

    def reserve_sequences(self, model: type[Inventory], first: int, last: int) -> bool:
        with self._db.transaction() as db:
            row = db.execute("SELECT last FROM sequence_fence WHERE model = ?", [model.MODEL]).fetchone()
            if row is not None and first <= row[0]:
                return False
            db.execute(
                "INSERT OR REPLACE INTO sequence_fence (model, last) VALUES (?, ?)", [model.MODEL, last]
            )
            return True

    def max_sequence(self, model: type[Inventory]) -> int:
        fence = self._db.fetch("SELECT last FROM sequence_fence WHERE model = ?", [model.MODEL])
        ((stored,),) = self._db.fetch(f"SELECT COALESCE(MAX(sequence), 0) FROM {model.MODEL}")
        return max(int(stored), fence[0][0] if fence else 0)

    def list(self, model: type[I], limit: int = 10_000) -> list[I]:
        return [
            item for item, _ in self._db.rows(model, model.MODEL, "1 = 1 ORDER BY sequence LIMIT ?", [limit])
        ]

    def names_of_service(self, model: type[Inventory], service_id: int, limit: int) -> Sequence[str]:
        rows = self._db.fetch(
            f"SELECT name FROM {model.MODEL} WHERE service_id = ? ORDER BY sequence LIMIT ?",
            [service_id, limit],
        )
        return [r[0] for r in rows]

    def stale(
        self, model: type[I], cutoff_ms: int, limit: int = 10_000, active: bool | None = True
    ) -> Sequence[Stored[I]]:
        activity = "" if active is None else f"active = {int(active)} AND "
        rows = self._db.rows(
            model,
            model.MODEL,
            f"{activity}heartbeat_time < ? LIMIT ?",
            [cutoff_ms, limit],
            ("version", *POSITION_COLUMNS),
        )
        return [Stored(item, version, position=position_of(p)) for item, (version, *p) in rows]

    def remove(self, model: type[I], rows: Sequence[Stored[I]]) -> Sequence[str]:
        changed: list[str] = []
        with self._db.transaction() as db:
            for row in rows:
                sql = f"DELETE FROM {model.MODEL} WHERE key = ? AND version = ?"
                if db.execute(sql, [row.item.key(), row.version]).rowcount == 0:
                    changed.append(row.item.key())
        return changed

    def close(self) -> None:
        self._db.close()
