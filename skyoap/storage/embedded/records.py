"""Records in SQLite: one table per model, its rows partitioned by day through
an index on the day column (the embedded storage keeps one file).

A record's row is also its entry on the model's topic: the insert that stores
it gives it its partition, offset and publication time (``POSITION_COLUMNS``),
and the topic is read from the same table (``storage/embedded/topics.py``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from skyoap.model.records import Record
from skyoap.model.topics import Position
from skyoap.storage.api import R, RecordSearch, each_position
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
            self._db.add_columns(model.MODEL, model)  # a table of an earlier release
            self._db.execute(
                f"CREATE INDEX IF NOT EXISTS {model.MODEL}_day ON {model.MODEL} (day, time_bucket)"
            )
            # A trace, an event, a segment or a profiling task's dumps are
            # read whole by their id, whatever their days.
            for column, index in (("trace_id", "trace"), ("uuid", "uuid"), ("task_id", "task"),
                                  ("segment_id", "segment")):  # fmt: skip
                if any(c.name == column for c in model.columns()):
                    self._db.execute(
                        f"CREATE INDEX IF NOT EXISTS {model.MODEL}_{index} ON {model.MODEL} ({column})"
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

    def search(self, model: type[R], search: RecordSearch) -> list[R]:
        search.check(model)
        clause, args = _search_clause(model, search)
        order = "DESC" if search.descending else "ASC"
        rows = self._db.rows(
            model,
            model.MODEL,
            f"{clause} ORDER BY {search.order_by} {order}, key LIMIT ? OFFSET ?",
            [*args, search.limit, search.offset],
        )
        return [item for item, _ in rows]

    def tag_values(
        self, model: type[Record], first_bucket: int, last_bucket: int, limit: int, prefix: str = ""
    ) -> list[str]:
        RecordSearch(tags=("",)).check(model)
        table = model.MODEL
        found = self._db.fetch(
            f"SELECT DISTINCT tag.value FROM {table}, json_each({table}.{model.TAGS}) AS tag "
            "WHERE day BETWEEN ? AND ? AND time_bucket BETWEEN ? AND ? AND substr(tag.value, 1, ?) = ? "
            "ORDER BY tag.value LIMIT ?",
            [
                first_bucket // 10_000,
                last_bucket // 10_000,
                first_bucket,
                last_bucket,
                len(prefix),
                prefix,
                limit,
            ],
        )
        return [value for (value,) in found]

    def close(self) -> None:
        self._db.close()


def _search_clause(model: type[Record], search: RecordSearch) -> tuple[str, list[Any]]:
    """SQL matching ``search``. The day index bounds the rows of a time range
    and the trace index those of a trace; tags are then looked for in each
    row's JSON array by SQLite itself."""
    clauses: list[str] = []
    args: list[Any] = []
    if search.first_bucket is not None and search.last_bucket is not None:
        clauses.append("day BETWEEN ? AND ? AND time_bucket BETWEEN ? AND ?")
        args += [search.first_bucket // 10_000, search.last_bucket // 10_000]
        args += [search.first_bucket, search.last_bucket]
    for name, value in search.equal.items():
        clauses.append(f"{name} = ?")
        args.append(_sql_scalar(value))
    for name, values in search.one_of.items():
        clauses.append(_in_clause(name, values, args))
    if search.any_of:
        alternatives = [
            " AND ".join(_in_clause(name, values, args) for name, values in alternative.items())
            for alternative in search.any_of
        ]
        clauses.append("(" + " OR ".join(f"({a})" for a in alternatives) + ")")
    for name, low in search.at_least.items():
        clauses.append(f"{name} >= ?")
        args.append(low)
    for name, high in search.at_most.items():
        clauses.append(f"{name} <= ?")
        args.append(high)
    for tag in search.tags:
        clauses.append(f"EXISTS (SELECT 1 FROM json_each({model.MODEL}.{model.TAGS}) WHERE value = ?)")
        args.append(tag)
    for words, sign in ((search.contains, ">"), (search.lacks, "=")):
        for name, keywords in words.items():
            clauses += [f"instr(lower({name}), lower(?)) {sign} 0"] * len(keywords)
            args += keywords
    return " AND ".join(clauses) or "1", args


def _sql_scalar(value: str | int | bool) -> str | int:
    return int(value) if isinstance(value, bool) else value


def _in_clause(name: str, values: Sequence[str | int | bool], args: list[Any]) -> str:
    """``name IN (...)``, its values appended to ``args``; no value matches no row."""
    if not values:
        return "0"
    args += [_sql_scalar(v) for v in values]
    return f"{name} IN ({', '.join('?' * len(values))})"
