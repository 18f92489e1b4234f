"""Topics and consumer-group state in SQLite.

The topics of records are the records' own tables: each row carries its
partition and offset (``storage/embedded/records.py``), at offsets the node
reserved (``storage/embedded/offsets.py``); its committer moves the end
(``advance``) once their insert committed. Retention deletes whole days.

Any other topic is a table of entries appended after their rows were stored.
An append allocates its offsets, inserts its records and moves the partition's
end in one transaction, so the end never passes a record that is not readable."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from model.metrics import Downsampling
from model.records import RECORD_MODELS
from model.topics import Bounds, Entry, Fetched, Retention, TopicRecord
from storage.api import OffsetOutOfRange, StorageError
from storage.embedded.db import Database
from storage.embedded.records import POSITION_COLUMNS


def _table(topic: str) -> str:
    return topic if topic in RECORD_MODELS else f"topic_{topic}"


def _time(topic: str) -> str:
    return "published_ms" if topic in RECORD_MODELS else "timestamp_ms"


class EmbeddedTopicDAO:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS topic_partitions (topic TEXT NOT NULL, "
            "partition_no INTEGER NOT NULL, start_offset INTEGER NOT NULL, end_offset INTEGER NOT NULL, "
            "PRIMARY KEY (topic, partition_no))"
        )

    def install(self, topics: Mapping[str, int]) -> None:
        for topic, partitions in topics.items():
            if topic not in RECORD_MODELS:
                self._db.execute(
                    f"CREATE TABLE IF NOT EXISTS {_table(topic)} (partition_no INTEGER NOT NULL, "
                    "record_offset INTEGER NOT NULL, timestamp_ms INTEGER NOT NULL, key TEXT NOT NULL, "
                    "value TEXT NOT NULL, PRIMARY KEY (partition_no, record_offset))"
                )
            with self._db.transaction() as db:
                if not db.execute("SELECT 1 FROM topic_partitions WHERE topic = ?", (topic,)).fetchone():
                    db.executemany(
                        "INSERT INTO topic_partitions VALUES (?, ?, 0, 0)",
                        [(topic, p) for p in range(partitions)],
                    )

    def append(self, topic: str, partition: int, entries: Sequence[Entry]) -> Bounds:
        if topic in RECORD_MODELS:
            raise StorageError(f"the {topic} topic is its records: storing one publishes it")
        with self._db.transaction() as db:
            row = db.execute(
                "SELECT start_offset, end_offset FROM topic_partitions WHERE topic = ? AND partition_no = ?",
                (topic, partition),
            ).fetchone()
            if row is None:
                raise StorageError(f"topic {topic} has no partition {partition}")
            start, end = row
            db.executemany(
                f"INSERT INTO {_table(topic)} VALUES (?, ?, ?, ?, ?)",
                [
                    (partition, end + i, e.timestamp_ms, e.key, json.dumps(e.value, separators=(",", ":")))
                    for i, e in enumerate(entries)
                ],
            )
            end += len(entries)
            db.execute(
                "UPDATE topic_partitions SET end_offset = ? WHERE topic = ? AND partition_no = ?",
                (end, topic, partition),
            )
        return Bounds(partition, start, end)

    def advance(self, topic: str, partition: int, end: int) -> None:
        self._db.execute(
            "UPDATE topic_partitions SET end_offset = MAX(end_offset, ?) "
            "WHERE topic = ? AND partition_no = ?",
            (end, topic, partition),
        )

    def make_readable(self, topic: str) -> None:
        pass  # a committed insert is readable

    def next_offset(self, topic: str, partition: int) -> int:
        ((highest,),) = self._db.fetch(
            f"SELECT MAX(record_offset) FROM {_table(topic)} WHERE partition_no = ?", (partition,)
        )
        return max(self._bounds_of(topic, partition).end, 0 if highest is None else highest + 1)

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

    def read(self, topic: str, partition: int, offset: int, limit: int) -> Fetched:
        b = self._bounds_of(topic, partition)
        if not b.start <= offset <= b.end:
            raise OffsetOutOfRange(topic, partition, offset, b.start, b.end)
        where = "partition_no = ? AND record_offset >= ? AND record_offset < ? ORDER BY record_offset LIMIT ?"
        args = (partition, offset, b.end, limit)
        model = RECORD_MODELS.get(topic)
        if model is None:
            rows = self._db.fetch(
                f"SELECT record_offset, timestamp_ms, key, value FROM {_table(topic)} WHERE {where}", args
            )
            records = [TopicRecord(topic, partition, o, ts, k, json.loads(v)) for o, ts, k, v in rows]
        else:
            records = [
                TopicRecord(topic, partition, o, ts, item.key(), {"key": item.key(), **item.to_row()})
                for item, (o, ts) in self._db.rows(model, topic, where, args, POSITION_COLUMNS[1:])
            ]
        if not records or records[0].offset != offset:  # a gap, or retention ran between the two reads
            now = self._bounds_of(topic, partition)
            if offset < now.start:
                raise OffsetOutOfRange(topic, partition, offset, now.start, now.end)
        return Fetched(records, records[-1].offset + 1 if len(records) == limit else b.end)

    def offset_for_time(self, topic: str, partition: int, timestamp_ms: int) -> int | None:
        b = self._bounds_of(topic, partition)
        ((offset,),) = self._db.fetch(
            f"SELECT MIN(record_offset) FROM {_table(topic)} WHERE partition_no = ? "
            f"AND record_offset >= ? AND record_offset < ? AND {_time(topic)} >= ?",
            (partition, b.start, b.end, timestamp_ms),
        )
        return None if offset is None else int(offset)

    def trim(self, topic: str, retention: Retention, now_ms: int) -> dict[int, int]:
        removed = {}
        cutoff_ms = now_ms - int(retention.max_age_s * 1000)
        if topic in RECORD_MODELS:
            return self._drop_days(topic, cutoff_ms)
        for b in self.bounds(topic):
            with self._db.transaction() as db:
                (young,) = db.execute(
                    f"SELECT MIN(record_offset) FROM {_table(topic)} WHERE partition_no = ? "
                    "AND timestamp_ms >= ?",
                    (b.partition, cutoff_ms),
                ).fetchone()
                (end,) = db.execute(
                    "SELECT end_offset FROM topic_partitions WHERE topic = ? AND partition_no = ?",
                    (topic, b.partition),
                ).fetchone()
                start = max(b.start, end - retention.max_records, end if young is None else young)
                if start == b.start:
                    continue
                db.execute(
                    f"DELETE FROM {_table(topic)} WHERE partition_no = ? AND record_offset < ?",
                    (b.partition, start),
                )
                db.execute(
                    "UPDATE topic_partitions SET start_offset = ? WHERE topic = ? AND partition_no = ?",
                    (start, topic, b.partition),
                )
                removed[b.partition] = start - b.start
        return removed

    def _drop_days(self, topic: str, cutoff_ms: int) -> dict[int, int]:
        """Deletes the records of the days before ``cutoff_ms``'s; each
        partition's start moves to the lowest offset left, never past its end."""
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
