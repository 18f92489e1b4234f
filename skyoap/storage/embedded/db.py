"""The SQLite database of the embedded storage: one connection per node that
writes, shared by its DAOs under a lock (SQLite serialises writers anyway);
a few more that only read, so that a long search never holds the writers'
lock (in WAL mode readers see what was committed and wait on no writer);
and the mapping of stream data columns onto SQL.

A read runs under the deadline of the call it serves (``runtime/deadline``):
waiting for a free reader, and running, the statement interrupted once the
deadline passes."""

from __future__ import annotations

import contextlib
import json
import queue
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from skyoap.model.stream import Column, ColumnType, StreamData
from skyoap.model.topics import Position
from skyoap.runtime import deadline
from skyoap.storage.api import StorageError, StorageUnavailable

S = TypeVar("S", bound=StreamData)

_SQL_TYPES = {
    ColumnType.STRING: "TEXT",
    ColumnType.INT: "INTEGER",
    ColumnType.BOOL: "INTEGER",
    ColumnType.FLOAT: "REAL",
}


def sql_value(column: Column, value: Any) -> Any:
    if column.type in (ColumnType.MAP, ColumnType.INTS, ColumnType.STRINGS):
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    if column.type is ColumnType.BOOL:
        return int(value)
    return value


def column_definitions(model: type[StreamData], leave_out: tuple[str, ...] = ()) -> str:
    """``name TYPE, ...`` of the model's stored columns."""
    return ", ".join(
        f"{c.name} {_SQL_TYPES.get(c.type, 'TEXT')}"
        for c in model.stored_columns()
        if c.name not in leave_out
    )


POSITION_COLUMNS = ("partition_no", "record_offset", "published_ms")
"""A record's or a row version's place on its topic, in its row (NULL: not on it)."""


def position_values(p: Position | None) -> tuple[int | None, ...]:
    return (None, None, None) if p is None else (p.partition, p.offset, p.published_ms)


def position_of(values: Sequence[Any]) -> Position | None:
    """The position in the values of ``POSITION_COLUMNS``."""
    return None if values[0] is None else Position(*values)


@contextlib.contextmanager
def translated_errors() -> Iterator[None]:
    """Turns SQLite's errors into the storage error hierarchy: a locked or
    full database may take the same call later, other errors never will."""
    try:
        yield
    except sqlite3.OperationalError as e:
        raise StorageUnavailable(f"SQLite could not run the statement: {e}") from e
    except sqlite3.Error as e:
        raise StorageError(f"SQLite refused the statement: {e}") from e


READERS = 4
"""Connections that only read: as many reads run at once, beside the writer."""
READER_WAIT_S = 30.0
"""How long a read waits for a free reader outside a call's deadline."""
PROGRESS_STEPS = 10_000
"""SQLite's virtual machine steps between two looks at the deadline."""


class Database:
    def __init__(self, path: str | Path) -> None:
        in_memory = str(path) == ":memory:"
        if not in_memory:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._lock = threading.Lock()
        self._closed = False
        # A database in memory is the writer's alone: it reads through it.
        self._readers: queue.Queue[sqlite3.Connection] = queue.Queue()
        self._all_readers = [] if in_memory else [_reader(path) for _ in range(READERS)]
        for reader in self._all_readers:
            self._readers.put(reader)

    def execute(self, sql: str, args: Sequence[Any] = ()) -> sqlite3.Cursor:
        with self._lock, translated_errors():
            return self._db.execute(sql, args)

    def fetch(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        if not self._all_readers:
            with self._lock, translated_errors():
                return self._db.execute(sql, args).fetchall()
        try:
            reader = self._readers.get(timeout=deadline.remaining(READER_WAIT_S))
        except queue.Empty:
            raise StorageUnavailable(
                "every SQLite reader was busy for as long as the read could wait"
            ) from None
        try:
            with translated_errors():
                return reader.execute(sql, args).fetchall()
        finally:
            self._readers.put(reader)

    def rows(
        self, model: type[S], table: str, where: str, args: Sequence[Any], extra: tuple[str, ...] = ()
    ) -> list[tuple[S, tuple[Any, ...]]]:
        """The items of ``table`` matching ``where``, each with the values of the
        ``extra`` columns (e.g. ``("version",)``) selected before the model's."""
        names = [c.name for c in model.columns()]
        lead = list(extra)
        rows = self.fetch(f"SELECT {', '.join([*lead, *names])} FROM {table} WHERE {where}", args)
        return [(model.from_row(dict(zip(names, r[len(lead) :], strict=True))), r[: len(lead)]) for r in rows]

    def add_columns(self, table: str, model: type[StreamData]) -> None:
        """Gives ``table`` the stored columns of ``model`` it lacks (a table of
        an earlier release); rows it holds read them as absent."""
        have = {row[1] for row in self.fetch(f"PRAGMA table_info({table})")}
        for c in model.stored_columns():
            if c.name not in have:
                self.execute(f"ALTER TABLE {table} ADD COLUMN {c.name} {_SQL_TYPES.get(c.type, 'TEXT')}")

    def add_positions(self, table: str) -> None:
        """Gives ``table`` the ``POSITION_COLUMNS`` (a table of an earlier
        release lacks them) and an index on them."""
        have = {row[1] for row in self.fetch(f"PRAGMA table_info({table})")}
        for column in POSITION_COLUMNS:
            if column not in have:
                self.execute(f"ALTER TABLE {table} ADD COLUMN {column} INTEGER")
        self.execute(f"CREATE INDEX IF NOT EXISTS {table}_position ON {table} (partition_no, record_offset)")

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock, translated_errors():
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._db.close()
                for reader in self._all_readers:
                    reader.close()


def _reader(path: str | Path) -> sqlite3.Connection:
    reader = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
    reader.execute("PRAGMA query_only=1")
    # Past the deadline of the call it serves, a statement is interrupted
    # (sqlite3.OperationalError: interrupted, a StorageUnavailable).
    reader.set_progress_handler(_past_deadline, PROGRESS_STEPS)
    return reader


def _past_deadline() -> bool:
    return deadline.remaining(1.0) <= 0


def chunks(keys: Sequence[str], size: int = 500) -> Iterator[list[str]]:
    """``keys`` in lists short enough for SQLite's limit on bound parameters."""
    for start in range(0, len(keys), size):
        yield list(keys[start : start + size])
