"""Topics and consumer-group state in SQLite.

A topic's entries are the rows of its records and rows themselves
(``Topic.tables``): each carries its partition and offset
(``POSITION_COLUMNS``), at offsets the node reserved
(``storage/embedded/offsets.py``); its committer moves the end (``advance``)
once their writes committed. A row updated in place keeps only its current
version, so the version it overwrites is first copied into the topic's history
table (``topic_{name}``, ``keep``). A read merges the history and the rows.

Retention deletes whole days of records, and the history older than it (rows
stay, below the start)."""

from __future__ import annotations

import heapq
import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

from skyoap.model.metrics import Downsampling, Metrics
from skyoap.model.records import RECORD_MODELS
from skyoap.model.topics import FILTERED_COLUMNS, Bounds, Fetched, Table, Topic, TopicRecord, Where
from skyoap.storage.api import OffsetOutOfRange, StorageError, TopicRetention
from skyoap.storage.embedded.db import POSITION_COLUMNS, Database
from skyoap.storage.embedded.metrics import table as metrics_table


def _history(topic: str) -> str:
    return f"topic_{topic}"


def _table_name(t: Table) -> str:
    return t.model.MODEL if t.level is None else metrics_table(cast(type[Metrics], t.model), t.level)


_IN_RANGE = "partition_no = ? AND record_offset >= ? AND record_offset < ?"
_HISTORY_COLUMNS = {c: f"json_extract(value, '$.{c}')" for c in FILTERED_COLUMNS}
"""The filtered columns of a version kept in the history, where its row is JSON."""


def _matching(
    where: Where | None, columns: Mapping[str, str], published: str
) -> tuple[str, list[Any]] | None:
    """The SQL condition, and its arguments, of the entries ``where`` selects
    from a table with ``columns`` (filtered column → SQL) and the time
    published in ``published``; None when none of them can match."""
    if where is None:
        return "", []
    if (set(where.equal) | set(where.between)) - set(columns):
        return None
    sql: list[str] = []
    args: list[Any] = []
    for c, values in where.equal.items():
        sql.append(f"{columns[c]} IN ({', '.join('?' * len(values))})")
        args += values
    bounds = [(columns[c], low, high) for c, (low, high) in where.between.items()]
    for column, low, high in [*bounds, (published, *where.published)]:
        for op, value in ((">=", low), ("<=", high)):
            if value is not None:
                sql.append(f"{column} {op} ?")
                args.append(value)
    return "".join(f" AND {s}" for s in sql), args


class EmbeddedTopicDAO(TopicRetention):
    def __init__(self, db: Database) -> None:
        self._db = db
        self._existing: set[str] = set()
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS topic_partitions (topic TEXT NOT NULL, "
            "partition_no INTEGER NOT NULL, start_offset INTEGER NOT NULL, end_offset INTEGER NOT NULL, "
            "PRIMARY KEY (topic, partition_no))"
        )

    def install(self, topics: Mapping[str, int]) -> None:
        for topic, partitions in topics.items():
            if topic not in RECORD_MODELS:
                self._db.execute(
                    f"CREATE TABLE IF NOT EXISTS {_history(topic)} (partition_no INTEGER NOT NULL, "
                    "record_offset INTEGER NOT NULL, timestamp_ms INTEGER NOT NULL, key TEXT NOT NULL, "
                    "value TEXT NOT NULL, PRIMARY KEY (partition_no, record_offset))"
                )
            with self._db.transaction() as db:
                if not db.execute("SELECT 1 FROM topic_partitions WHERE topic = ?", (topic,)).fetchone():
                    db.executemany(
                        "INSERT INTO topic_partitions VALUES (?, ?, 0, 0)",
                        [(topic, p) for p in range(partitions)],
                    )

    def _tables(self, topic: str) -> list[Table]:
        """The tables of the topic's entries that exist (a reader may come
        before the node installed them); SQLite is asked only while some are missing."""
        tables = Topic.named(topic).tables
        if any(_table_name(t) not in self._existing for t in tables):
            self._existing = {
                r[0] for r in self._db.fetch("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
        return [t for t in tables if _table_name(t) in self._existing]

    def _sources(self, topic: str) -> list[tuple[str, str]]:
        """Each table holding the topic's entries, with its time column."""
        tables = [(_table_name(t), "published_ms") for t in self._tables(topic)]
        return tables if topic in RECORD_MODELS else [(_history(topic), "timestamp_ms"), *tables]

    def keep(self, topic: str, versions: Sequence[TopicRecord]) -> None:
        if topic in RECORD_MODELS:
            raise StorageError(f"the {topic} topic is its records: they are never overwritten")
        with self._db.transaction() as db:
            db.executemany(
                f"INSERT OR REPLACE INTO {_history(topic)} VALUES (?, ?, ?, ?, ?)",
                [
                    (v.partition, v.offset, v.timestamp_ms, v.key, json.dumps(v.value, separators=(",", ":")))
                    for v in versions
                ],
            )

    def advance(self, topic: str, ends: Mapping[int, int]) -> None:
        with self._db.transaction() as db:
            db.executemany(
                "UPDATE topic_partitions SET end_offset = MAX(end_offset, ?) "
                "WHERE topic = ? AND partition_no = ?",
                [(end, topic, partition) for partition, end in ends.items()],
            )

    def make_readable(self, topic: str) -> None:
        pass  # a committed write is readable

    def next_offset(self, topic: str, partition: int) -> int:
        highest = -1
        for table, _ in self._sources(topic):
            ((top,),) = self._db.fetch(
                f"SELECT MAX(record_offset) FROM {table} WHERE partition_no = ?", (partition,)
            )
            highest = max(highest, -1 if top is None else top)
        return max(self._bounds_of(topic, partition).end, highest + 1)

    def bounds(self, topic: str) -> list[Bounds]:
        rows = self._db.fetch(
            "SELECT partition_no, start_offset, end_offset FROM topic_partitions WHERE topic = ? "
            "ORDER BY partition_no",
            (topic,),
        )
        return [Bounds(*r) for r in rows]

    def _bounds_of(self, topic: str, partition: int) -> Bounds:
        for b in self.bounds(topic):
            if b.partition == partition:
                return b
        raise StorageError(f"topic {topic} has no partition {partition}")

    def read(
        self, topic: str, partition: int, offset: int, limit: int, where: Where | None = None
    ) -> Fetched:
        b = self._bounds_of(topic, partition)
        if not b.start <= offset <= b.end:
            raise OffsetOutOfRange(topic, partition, offset, b.start, b.end)

        def condition(matching: tuple[str, list[Any]]) -> tuple[str, list[Any]]:
            return f"{_IN_RANGE}{matching[0]} ORDER BY record_offset LIMIT ?", [
                partition, offset, b.end, *matching[1], limit
            ]  # fmt: skip

        found: list[list[TopicRecord]] = []
        history = _matching(where, _HISTORY_COLUMNS, "timestamp_ms")
        if topic not in RECORD_MODELS and history is not None:
            sql, args = condition(history)
            rows = self._db.fetch(
                f"SELECT record_offset, timestamp_ms, key, value FROM {_history(topic)} WHERE {sql}", args
            )
            found.append([TopicRecord(topic, partition, o, ts, k, json.loads(v)) for o, ts, k, v in rows])
        for t in self._tables(topic):
            columns = {c.name: c.name for c in t.model.columns() if c.name in FILTERED_COLUMNS}
            rows_matching = _matching(where, columns, POSITION_COLUMNS[2])
            if rows_matching is None:
                continue
            sql, args = condition(rows_matching)
            found.append(
                [
                    TopicRecord(topic, partition, o, ts, item.routing_key(), t.value(item))
                    for item, (o, ts) in self._db.rows(
                        t.model, _table_name(t), sql, args, POSITION_COLUMNS[1:]
                    )
                ]
            )
        records: list[TopicRecord] = []
        for r in heapq.merge(*found, key=lambda r: r.offset):
            if not records or records[-1].offset != r.offset:  # a version both kept and still the row's
                records.append(r)
        cut = any(len(f) == limit for f in found) or len(records) > limit
        records = records[:limit]
        if not records or records[0].offset != offset:  # a gap, or retention ran between the two reads
            now = self._bounds_of(topic, partition)
            if offset < now.start:
                raise OffsetOutOfRange(topic, partition, offset, now.start, now.end)
        return Fetched(records, records[-1].offset + 1 if cut else b.end)

    def offset_for_time(self, topic: str, partition: int, timestamp_ms: int) -> int | None:
        b = self._bounds_of(topic, partition)
        return self._first_since(topic, b, timestamp_ms)

    def _first_since(self, topic: str, b: Bounds, timestamp_ms: int) -> int | None:
        firsts = []
        for table, time in self._sources(topic):
            ((first,),) = self._db.fetch(
                f"SELECT MIN(record_offset) FROM {table} WHERE {_IN_RANGE} AND {time} >= ?",
                (b.partition, b.start, b.end, timestamp_ms),
            )
            if first is not None:
                firsts.append(int(first))
        return min(firsts, default=None)

    def _move_start(self, topic: str, partition: int, start: int) -> int:
        with self._db.transaction() as db:
            db.execute(
                "UPDATE topic_partitions SET start_offset = MAX(start_offset, MIN(?, end_offset)) "
                "WHERE topic = ? AND partition_no = ?",
                (start, topic, partition),
            )
            ((now,),) = db.execute(
                "SELECT start_offset FROM topic_partitions WHERE topic = ? AND partition_no = ?",
                (topic, partition),
            ).fetchall()
        return int(now)

    def _drop_history(self, topic: str, cutoff_ms: int) -> None:
        self._db.execute(f"DELETE FROM {_history(topic)} WHERE timestamp_ms < ?", (cutoff_ms,))

    def _drop_days(self, topic: str, cutoff_ms: int) -> dict[int, int]:
        cutoff = Downsampling.DAY.bucket_of(cutoff_ms)
        with self._db.transaction() as db:
            removed = dict(
                db.execute(
                    f"SELECT partition_no, COUNT(*) FROM {topic} WHERE day < ? AND partition_no IS NOT NULL "
                    "GROUP BY partition_no",
                    (cutoff,),
                ).fetchall()
            )
            db.execute(f"DELETE FROM {topic} WHERE day < ?", (cutoff,))
            lowest_left = (
                f"SELECT MIN(record_offset) FROM {topic} WHERE partition_no = topic_partitions.partition_no"
            )
            db.execute(
                "UPDATE topic_partitions SET start_offset = "  # never past the end: it says what is readable
                f"MAX(start_offset, MIN(COALESCE(({lowest_left}), end_offset), end_offset)) WHERE topic = ?",
                (topic,),
            )
        return removed

    def close(self) -> None:
        self._db.close()


class EmbeddedStateStore:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS shared_state (name TEXT PRIMARY KEY, version INTEGER NOT NULL, "
            "value TEXT NOT NULL)"
        )

    def load(self, name: str) -> tuple[dict[str, Any] | None, object]:
        rows = self._db.fetch("SELECT version, value FROM shared_state WHERE name = ?", (name,))
        return (json.loads(rows[0][1]), rows[0][0]) if rows else (None, 0)

    def swap(self, name: str, version: object, value: dict[str, Any]) -> bool:
        text = json.dumps(value, separators=(",", ":"))
        with self._db.transaction() as db:
            if version == 0:
                cur = db.execute("INSERT OR IGNORE INTO shared_state VALUES (?, 1, ?)", (name, text))
            else:
                cur = db.execute(
                    "UPDATE shared_state SET version = version + 1, value = ? WHERE name = ? AND version = ?",
                    (text, name, version),
                )
            return cur.rowcount == 1

    def names(self) -> list[str]:
        return [r[0] for r in self._db.fetch("SELECT name FROM shared_state ORDER BY name")]

    def close(self) -> None:
        self._db.close()
