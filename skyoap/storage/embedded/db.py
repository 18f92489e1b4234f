"""The SQLite database of the embedded storage: one connection per node, shared
by its DAOs under a lock (SQLite serialises writers anyway), and the mapping
of stream data columns onto SQL."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from skyoap.model.stream import Column, ColumnType, StreamData
from skyoap.model.topics import Position
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


class Database:
    def __init__(self, path: str | Path) -> None:
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._lock = threading.Lock()
        self._closed = False

    def execute(self, sql: str, args: Sequence[Any] = ()) -> sqlite3.Cursor:
        with self._lock, translated_errors():
            return self._db.execute(sql, args)

    def fetch(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock, translated_errors():
            return self._db.execute(sql, args).fetchall()

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


def chunks(keys: Sequence[str], size: int = 500) -> Iterator[list[str]]:
    """``keys`` in lists short enough for SQLite's limit on bound parameters."""
    for start in range(0, len(keys), size):
        yield list(keys[start : start + size])
