"""Records in SQLite: one table per model, its rows partitioned by day through
an index on the day column (the embedded storage keeps one file)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from model.records import Record
from storage.api import R
from storage.embedded.db import Database, column_definitions, sql_value
from storage.embedded.metrics import where_clause


class EmbeddedRecordDAO:
    def __init__(self, db: Database) -> None:
        self._db = db

    def install(self, models: Sequence[type[Record]]) -> None:
        for model in models:
            self._db.execute(
                f"CREATE TABLE IF NOT EXISTS {model.MODEL} (key TEXT PRIMARY KEY, day INTEGER NOT NULL, "
                f"{column_definitions(model)})"
            )
            self._db.execute(
                f"CREATE INDEX IF NOT EXISTS {model.MODEL}_day ON {model.MODEL} (day, time_bucket)"
            )

    def insert(self, model: type[R], items: Sequence[R]) -> dict[str, str]:
        cols = list(model.stored_columns())
        sql = (
            f"INSERT OR REPLACE INTO {model.MODEL} (key, day, {', '.join(c.name for c in cols)}) "
            f"VALUES (?, ?, {', '.join('?' * len(cols))})"
        )
        with self._db.transaction() as db:
            db.executemany(
                sql,
                (
                    [item.key(), item.day, *(sql_value(c, row[c.name]) for c in cols)]
                    for item in items
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
