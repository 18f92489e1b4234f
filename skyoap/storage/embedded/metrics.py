"""Metrics rows in SQLite: a table per model and downsampling level, keyed like
the inventory tables and written under the same version check, each row with
the rounds its value includes (``applied_rounds``, JSON) and its version's
place on the metrics topic (``POSITION_COLUMNS``)."""

from __future__ import annotations

import datetime
import json
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from skyoap.model.metrics import Downsampling, Metrics, not_finite
from skyoap.model.stream import StreamData
from skyoap.storage.api import (
    APPLIED_ROUNDS,
    Equal,
    M,
    MetricsWrite,
    PutOutcome,
    Stored,
    check_columns,
    check_where,
)
from skyoap.storage.embedded.db import (
    POSITION_COLUMNS,
    Database,
    chunks,
    column_definitions,
    position_of,
    position_values,
    sql_value,
)


def table(model: type[Metrics], level: Downsampling) -> str:
    return f"{model.MODEL}_{level.value}"


def where_clause(
    model: type[StreamData], first_bucket: int, last_bucket: int, where: Mapping[str, Equal] | None
) -> tuple[str, list[Any]]:
    """SQL matching a bucket range and string columns equal to a value (or to one of a tuple's)."""
    clauses = ["time_bucket BETWEEN ? AND ?"]
    args: list[Any] = [first_bucket, last_bucket]
    for name, value in check_where(model, where).items():
        if isinstance(value, str):
            clauses.append(f"{name} = ?")
            args.append(value)
        else:
            clauses.append(f"{name} IN ({', '.join('?' * len(value))})")
            args += value
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
                    f"{APPLIED_ROUNDS} TEXT NOT NULL DEFAULT '{{}}', {column_definitions(model)})"
                )
                if APPLIED_ROUNDS not in {row[1] for row in self._db.fetch(f"PRAGMA table_info({name})")}:
                    # A table of an earlier release.
                    self._db.execute(
                        f"ALTER TABLE {name} ADD COLUMN {APPLIED_ROUNDS} TEXT NOT NULL DEFAULT '{{}}'"
                    )
                self._db.add_columns(name, model)
                self._db.execute(f"CREATE INDEX IF NOT EXISTS {name}_bucket ON {name} (time_bucket)")
                self._db.add_positions(name)

    def get_many(self, model: type[M], level: Downsampling, keys: Sequence[str]) -> dict[str, Stored[M]]:
        found: dict[str, Stored[M]] = {}
        for chunk in chunks(keys):
            marks = ",".join("?" * len(chunk))
            for item, (version, rounds, *position) in self._db.rows(
                model,
                table(model, level),
                f"key IN ({marks})",
                chunk,
                ("version", APPLIED_ROUNDS, *POSITION_COLUMNS),
            ):
                found[item.key()] = Stored(item, version, json.loads(rounds), position_of(position))
        return found

    def put(self, model: type[M], level: Downsampling, rows: Sequence[MetricsWrite[M]]) -> PutOutcome:
        name = table(model, level)
        cols = list(model.stored_columns())
        names = [APPLIED_ROUNDS, *POSITION_COLUMNS, *(c.name for c in cols)]
        marks = ", ".join("?" * len(names))
        insert = f"INSERT INTO {name} (key, version, {', '.join(names)}) VALUES (?, 1, {marks})"
        update = (
            f"UPDATE {name} SET {', '.join(f'{n} = ?' for n in names)}, "
            "version = version + 1 WHERE key = ? AND version = ?"
        )
        outcome = PutOutcome()
        with self._db.transaction() as db:
            for write in rows:
                key, row = write.value.key(), write.value.to_row()
                why = not_finite(row)
                if why is not None:  # SQLite would keep NaN as NULL, read back as 0
                    outcome.failed[key] = why
                    continue
                values = [
                    json.dumps(write.rounds, separators=(",", ":")),
                    *position_values(write.position),
                    *(sql_value(c, row[c.name]) for c in cols),
                ]
                try:
                    if write.stored is None:
                        db.execute(insert, [key, *values])
                    elif db.execute(update, [*values, key, write.stored.version]).rowcount == 0:
                        outcome.retry.append(key)
                except sqlite3.IntegrityError:
                    outcome.retry.append(key)  # another writer inserted the key first
                except (OverflowError, sqlite3.DataError) as e:
                    outcome.failed[key] = f"SQLite cannot store the value: {e}"
        return outcome

    def query(
        self,
        model: type[M],
        level: Downsampling,
        first_bucket: int,
        last_bucket: int,
        where: Mapping[str, Equal] | None = None,
        limit: int = 10_000,
    ) -> list[M]:
        clause, args = where_clause(model, first_bucket, last_bucket, where)
        rows = self._db.rows(
            model, table(model, level), f"{clause} ORDER BY time_bucket DESC, key LIMIT ?", [*args, limit]
        )
        return [item for item, _ in rows]

    def distinct(
        self, model: type[Metrics], level: Downsampling, first_bucket: int, columns: Sequence[str]
    ) -> set[tuple[str, ...]]:
        names = ", ".join(check_columns(model, columns))
        sql = f"SELECT DISTINCT {names} FROM {table(model, level)} WHERE time_bucket >= ?"
        return {tuple(row) for row in self._db.fetch(sql, [first_bucket])}

    def latest(self, model: type[M], level: Downsampling, first_bucket: int, by: str) -> list[M]:
        (column,) = check_columns(model, [by])
        name = table(model, level)
        newest = f"SELECT {column}, MAX(time_bucket) FROM {name} WHERE time_bucket >= ? GROUP BY {column}"
        where = f"time_bucket >= ? AND ({column}, time_bucket) IN ({newest})"
        return [item for item, _ in self._db.rows(model, name, where, [first_bucket, first_bucket])]

    def expire(self, model: type[Metrics], level: Downsampling, keep_from: datetime.date) -> int:
        first_kept = level.of_minute(int(f"{keep_from:%Y%m%d}0000"))
        with self._db.transaction() as db:
            return int(
                db.execute(f"DELETE FROM {table(model, level)} WHERE time_bucket < ?", [first_kept]).rowcount
            )

    def close(self) -> None:
        self._db.close()
