"""Metrics rows in SQLite: a table per model and downsampling level, keyed like
the inventory tables and written under the same version check."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from model.metrics import Downsampling, Metrics
from model.stream import StreamData
from storage.api import M, PutOutcome, Stored, check_where
from storage.embedded.db import Database, chunks, column_definitions, sql_value


def table(model: type[Metrics], level: Downsampling) -> str:
    return f"{model.MODEL}_{level.value}"


def where_clause(
    model: type[StreamData], first_bucket: int, last_bucket: int, where: Mapping[str, str] | None
) -> tuple[str, list[Any]]:
    """SQL matching a bucket range and equal string columns."""
    clauses = ["time_bucket BETWEEN ? AND ?"]
    args: list[Any] = [first_bucket, last_bucket]
    for name, value in check_where(model, where).items():
        clauses.append(f"{name} = ?")
        args.append(value)
    return " AND ".join(clauses), args


class EmbeddedMetricsDAO:
    def __init__(self, db: Database) -> None:
        self._db = db

    def install(self, models: Sequence[type[Metrics]]) -> None:
        for model in models:
            for level in Downsampling:
                name = table(model, level)
                self._db.execute(
                    f"CREATE TABLE IF NOT EXISTS {name} (key TEXT PRIMARY KEY, version INTEGER NOT NULL, "
                    f"{column_definitions(model)})"
                )
                self._db.execute(f"CREATE INDEX IF NOT EXISTS {name}_bucket ON {name} (time_bucket)")

    def get_many(self, model: type[M], level: Downsampling, keys: Sequence[str]) -> dict[str, Stored[M]]:
        found: dict[str, Stored[M]] = {}
        for chunk in chunks(keys):
            marks = ",".join("?" * len(chunk))
            for item, (version,) in self._db.rows(
                model, table(model, level), f"key IN ({marks})", chunk, ("version",)
            ):
                found[item.key()] = Stored(item, version)
        return found

    def put(
        self, model: type[M], level: Downsampling, rows: Sequence[tuple[Stored[M] | None, M]]
    ) -> PutOutcome:
        name = table(model, level)
        cols = list(model.stored_columns())
        insert = (
            f"INSERT INTO {name} (key, version, {', '.join(c.name for c in cols)}) "
            f"VALUES (?, 1, {', '.join('?' * len(cols))})"
        )
        update = (
            f"UPDATE {name} SET {', '.join(f'{c.name} = ?' for c in cols)}, version = version + 1 "
            "WHERE key = ? AND version = ?"
        )
        outcome = PutOutcome()
        with self._db.transaction() as db:
            for stored, new in rows:
                row = new.to_row()
                values = [sql_value(c, row[c.name]) for c in cols]
                if stored is None:
                    try:
                        db.execute(insert, [new.key(), *values])
                    except sqlite3.IntegrityError:
                        outcome.retry.append(new.key())
                elif db.execute(update, [*values, new.key(), stored.version]).rowcount == 0:
                    outcome.retry.append(new.key())
        return outcome

    def query(
        self,
        model: type[M],
        level: Downsampling,
        first_bucket: int,
        last_bucket: int,
        where: Mapping[str, str] | None = None,
        limit: int = 10_000,
    ) -> list[M]:
        clause, args = where_clause(model, first_bucket, last_bucket, where)
        rows = self._db.rows(
            model, table(model, level), f"{clause} ORDER BY time_bucket DESC, key LIMIT ?", [*args, limit]
        )
        return [item for item, _ in rows]

    def close(self) -> None:
        self._db.close()
