"""Records in SQLite: one table per model, its rows partitioned by day through
an index on the day column (the embedded storage keeps one file).

A record's row is also its entry on the model's topic: the insert that stores
it gives it its partition, offset and publication time (``POSITION_COLUMNS``),
and the topic is read from the same table (``storage/embedded/topics.py``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from skyoap.model.records import Record
from skyoap.model.topics import Position
from skyoap.storage.api import R, each_position
from skyoap.storage.embedded.db import (
    POSITION_COLUMNS,
    Database,
    column_definitions,
    position_values,
    sql_value,
)
from skyoap.storage.embedded.metrics import where_clause


class EmbeddedRecordDAO:
    def __init__(self, db: Database) -> None:
        self._db = db

    def install(self, models: Sequence[type[Record]]) -> None:
        for model in models:
            self._db.execute(
                f"CREATE TABLE IF NOT EXISTS {model.MODEL} (key TEXT PRIMARY KEY, day INTEGER NOT NULL, "
                f"{column_definitions(model)})"
            )
            self._db.add_positions(model.MODEL)
            self._db.execute(
                f"CREATE INDEX IF NOT EXISTS {model.MODEL}_day ON {model.MODEL} (day, time_bucket)"
            )

    def insert(
        self, model: type[R], items: Sequence[R], positions: Sequence[Position] | None = None
    ) -> dict[str, str]:
        cols = list(model.stored_columns())
        names = ["key", "day", *POSITION_COLUMNS, *(c.name for c in cols)]
        marks = ", ".join("?" * len(names))
        placed = each_position(positions, len(items))
        sql = f"INSERT OR REPLACE INTO {model.MODEL} ({', '.join(names)}) VALUES ({marks})"
        with self._db.transaction() as db:
            db.executemany(
                sql,
                (
                    [
                        item.key(),
                        item.day,
                        *position_values(p),
                        *(sql_value(c, row[c.name]) for c in cols),
                    ]
                    for item, p in zip(items, placed, strict=True)
                    for row in (item.to_row(),)
                ),
            )
        return {}

    def query(
        self,
        model: type[R],
        first_bucket: int,
        last_bucket: int,
        where: Mapping[str, str] | None = None,
        limit: int = 1000,
    ) -> list[R]:
        clause, args = where_clause(model, first_bucket, last_bucket, where)
        first_day, last_day = first_bucket // 10_000, last_bucket // 10_000
        rows = self._db.rows(
            model,
            model.MODEL,
            f"day BETWEEN ? AND ? AND {clause} ORDER BY time_bucket DESC, key LIMIT ?",
            [first_day, last_day, *args, limit],
        )
        return [item for item, _ in rows]

    def close(self) -> None:
        self._db.close()
