"""Stream data: the items that flow through worker chains and between nodes.

Every stream data type declares a fixed ``STREAM_ID`` and every worker a fixed
id derived from its stream and stage (``worker_id``). Ids therefore depend only
on the code, never on the order in which a node happened to build its workers,
and a RemoteMessage means the same thing on every node running the same release.
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
import json
import typing
from collections.abc import Callable, Mapping, Sequence
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

    def size_hint(self) -> int:
        """About how many bytes the item takes on the wire (its strings dominate)."""
        layout = _layout(type(self))
        size = 10 * len(layout.longs) + sum(len(getattr(self, n)) for n in layout.strings)
        for n in layout.maps:
            size += sum(len(k) + len(v) + 4 for k, v in getattr(self, n).items())
        return size

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
        """Flattens the item for another node: the string columns then every
        map's keys and values in turn; the integer and boolean columns then
        every map's size. Column order is the dataclass's field order."""
        layout = _layout(type(self))
        strings = [getattr(self, n) for n in layout.strings]
        longs = [int(getattr(self, n)) for n in layout.longs]
        for n in layout.maps:
            entries = getattr(self, n)
            longs.append(len(entries))
            strings.extend(itertools.chain.from_iterable(entries.items()))
        return strings, longs

    @classmethod
    def from_remote(cls, strings: Sequence[str], longs: Sequence[int]) -> Self:
        layout = _layout(cls)
        ns, nl = len(layout.strings), len(layout.longs)
        sizes = longs[nl:]
        if (
            len(strings) < ns
            or len(longs) != nl + len(layout.maps)
            or min(sizes, default=0) < 0
            or 2 * sum(sizes) != len(strings) - ns
        ):
            raise UndecodableData(
                f"{cls.__name__} takes {ns} strings and {nl} integers, then {len(layout.maps)} map sizes "
                f"and their entries; got {len(strings)} strings and {len(longs)} integers"
            )
        return layout.decode(strings, longs)  # type: ignore[return-value]


@dataclass(frozen=True)
class _RemoteLayout:
    strings: tuple[str, ...]
    longs: tuple[str, ...]
    bools: tuple[str, ...]
    maps: tuple[str, ...]
    decode: Callable[[Sequence[str], Sequence[int]], StreamData]
    """Builds the item from checked columns (see ``_decoder``)."""


_LAYOUTS: dict[type[StreamData], _RemoteLayout] = {}


def _layout(cls: type[StreamData]) -> _RemoteLayout:
    layout = _LAYOUTS.get(cls)
    if layout is None:
        layout = _LAYOUTS[cls] = _layout_of(cls)
    return layout


def _layout_of(cls: type[StreamData]) -> _RemoteLayout:
    cols = cls.columns()

    def named(*types: ColumnType) -> tuple[str, ...]:
        return tuple(c.name for c in cols if c.type in types)

    strings, longs = named(ColumnType.STRING), named(ColumnType.INT, ColumnType.BOOL)
    bools, maps = named(ColumnType.BOOL), named(ColumnType.MAP)
    return _RemoteLayout(strings, longs, bools, maps, _decoder(cls, strings, longs, bools, maps))


def _decoder(
    cls: type[StreamData],
    strings: tuple[str, ...],
    longs: tuple[str, ...],
    bools: tuple[str, ...],
    maps: tuple[str, ...],
) -> Callable[[Sequence[str], Sequence[int]], StreamData]:
    """A function that calls ``cls(name=s[0], ..., sequence=l[0], ...)`` with the
    columns in place, written out for the type the way ``dataclasses`` writes
    ``__init__``: the receiving end of every remote hop runs it once per item,
    and building the arguments in a loop costs twice as much. Only field names
    of our own dataclasses go into the code."""
    args = [f"{n}=s[{i}]" for i, n in enumerate(strings)]
    args += [f"{n}=bool(l[{i}])" if n in bools else f"{n}=l[{i}]" for i, n in enumerate(longs)]
    lines = ["def decode(s, l):", f"    p = {len(strings)}"]
    for j, n in enumerate(maps):
        lines += [
            f"    e = p + 2 * l[{len(longs) + j}]",
            f"    m{j} = dict(zip(s[p:e:2], s[p + 1 : e : 2]))",
            "    p = e",
        ]
        args.append(f"{n}=m{j}")
    lines.append(f"    return cls({', '.join(args)})")
    namespace: dict[str, Any] = {"cls": cls}
    exec("\n".join(lines), namespace)
    return namespace["decode"]


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
