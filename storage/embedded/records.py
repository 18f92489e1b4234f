"""Records in SQLite: one table per model, its rows partitioned by day through
an index on the day column (the embedded storage keeps one file).

A record's row is also its entry on the model's topic: the insert that stores
it gives it its partition, offset and publication time (``POSITION_COLUMNS``),
and the topic is read from the same table (``storage/embedded/topics.py``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from model.records import Record
from model.topics import Position
from storage.api import R
from storage.embedded.db import Database, column_definitions, sql_value
from storage.embedded.metrics import where_clause

POSITION_COLUMNS = ("partition_no", "record_offset", "published_ms")
"""A record's place on its topic, in the record's row (NULL: not on it)."""


class EmbeddedRecordDAO:
    def __init__(self, db: Database) -> None:
        self._db = db

    def install(self, models: Sequence[type[Record]]) -> None:
        for model in models:
            self._db.execute(
                f"CREATE TABLE IF NOT EXISTS {model.MODEL} (key TEXT PRIMARY KEY, day INTEGER NOT NULL, "
                f"{column_definitions(model)})"
            )
            have = {row[1] for row in self._db.fetch(f"PRAGMA table_info({model.MODEL})")}
            for column in POSITION_COLUMNS:
                if column not in have:  # a table of an earlier release
                    self._db.execute(f"ALTER TABLE {model.MODEL} ADD COLUMN {column} INTEGER")
            self._db.execute(
                f"CREATE INDEX IF NOT EXISTS {model.MODEL}_day ON {model.MODEL} (day, time_bucket)"
            )
            self._db.execute(
                f"CREATE INDEX IF NOT EXISTS {model.MODEL}_position ON {model.MODEL} "
                "(partition_no, record_offset)"
            )

    def insert(
        self, model: type[R], items: Sequence[R], positions: Sequence[Position] | None = None
    ) -> dict[str, str]:
        cols = list(model.stored_columns())
        names = ["key", "day", *POSITION_COLUMNS, *(c.name for c in cols)]
        marks = ", ".join("?" * len(names))
        placed: Sequence[Position | None] = positions if positions is not None else [None] * len(items)
        sql = f"INSERT OR REPLACE INTO {model.MODEL} ({', '.join(names)}) VALUES ({marks})"
        with self._db.transaction() as db:
            db.executemany(
                sql,
                (
                    [
                        item.key(),
                        item.day,
                        *((None, None, None) if p is None else (p.partition, p.offset, p.published_ms)),
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
