"""Stream data: the items that flow through worker chains and between nodes.

Every stream data type declares a fixed ``STREAM_ID`` and every worker a fixed
id derived from its stream and stage (``worker_id``). Ids therefore depend only
on the code, never on the order in which a node happened to build its workers,
and a RemoteMessage means the same thing on every node running the same release.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, ClassVar, Self


class ColumnType(enum.Enum):
    STRING = "string"
    INT = "int"
    BOOL = "bool"
    MAP = "map"  # str -> str


@dataclass(frozen=True)
class Column:
    name: str
    type: ColumnType


_TYPES = {"str": ColumnType.STRING, "int": ColumnType.INT, "bool": ColumnType.BOOL}


class UndecodableData(ValueError):
    """Remote data that does not match the columns of its stream data type."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamData:
    """Base of every item a worker chain carries. Subclasses are frozen dataclasses
    whose fields are the columns stored and sent between nodes."""

    STREAM_ID: ClassVar[int]
    MODEL: ClassVar[str]
    """The storage model (index or table) this type persists to."""

    @classmethod
    @cache
    def columns(cls) -> tuple[Column, ...]:
        hints = typing.get_type_hints(cls)
        cols = []
        for f in dataclasses.fields(cls):
            hint = hints[f.name]
            name = getattr(typing.get_origin(hint) or hint, "__name__", str(hint))
            cols.append(Column(f.name, _TYPES.get(name, ColumnType.MAP)))
        return tuple(cols)

    def key(self) -> str:
        """The identity of the item: equal keys are combined and stored as one row."""
        raise NotImplementedError

    def to_row(self) -> dict[str, Any]:
        return {c.name: getattr(self, c.name) for c in self.columns()}

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Self:
        values: dict[str, Any] = {}
        for c in cls.columns():
            v = row.get(c.name)
            if v is None:
                continue
            if c.type is ColumnType.BOOL:
                v = bool(v)
            elif c.type is ColumnType.MAP and isinstance(v, str):
                v = json.loads(v)
            values[c.name] = v
        return cls(**values)

    def to_remote(self) -> tuple[list[str], list[int]]:
        """Flattens the item into string and integer columns, in column order."""
        strings: list[str] = []
        longs: list[int] = []
        for c in self.columns():
            v = getattr(self, c.name)
            if c.type is ColumnType.STRING:
                strings.append(v)
            elif c.type is ColumnType.MAP:
                strings.append(json.dumps(v, separators=(",", ":")))
            else:
                longs.append(int(v))
        return strings, longs

    @classmethod
    def from_remote(cls, strings: Sequence[str], longs: Sequence[int]) -> Self:
        cols = cls.columns()
        n_strings = sum(c.type in (ColumnType.STRING, ColumnType.MAP) for c in cols)
        if len(strings) != n_strings or len(longs) != len(cols) - n_strings:
            raise UndecodableData(
                f"{cls.__name__} takes {n_strings} strings and {len(cols) - n_strings} integers, "
                f"got {len(strings)} and {len(longs)}"
            )
        s, n = iter(strings), iter(longs)
        values: dict[str, Any] = {}
        try:
            for c in cols:
                if c.type is ColumnType.STRING:
                    values[c.name] = next(s)
                elif c.type is ColumnType.MAP:
                    values[c.name] = json.loads(next(s))
                elif c.type is ColumnType.BOOL:
                    values[c.name] = bool(next(n))
                else:
                    values[c.name] = next(n)
        except json.JSONDecodeError as e:
            raise UndecodableData(f"{cls.__name__}: a map column is not JSON: {e}") from e
        return cls(**values)


class Stage(enum.IntEnum):
    """Where a worker sits in its chain; part of its fixed id."""

    L1 = 1
    REMOTE = 2
    L2 = 3


def worker_id(stream: type[StreamData], stage: Stage) -> int:
    return stream.STREAM_ID * 16 + int(stage)


def stream_id_of_worker(worker_id: int) -> int:
    """The STREAM_ID of the stream data the worker ``worker_id`` takes."""
    return worker_id // 16


class StreamTypes:
    """Stream data types by their fixed id, as the RemoteService needs them."""

    def __init__(self, types: Sequence[type[StreamData]]) -> None:
        self._by_id: dict[int, type[StreamData]] = {}
        for t in types:
            other = self._by_id.setdefault(t.STREAM_ID, t)
            if other is not t:
                raise ValueError(f"{t.__name__} and {other.__name__} both declare STREAM_ID {t.STREAM_ID}")

    def get(self, stream_id: int) -> type[StreamData] | None:
        return self._by_id.get(stream_id)
