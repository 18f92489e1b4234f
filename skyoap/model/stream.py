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
import struct
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, ClassVar, Self

if TYPE_CHECKING:
    from skyoap.model.checks import TelemetryLimits


class ColumnType(enum.Enum):
    STRING = "string"
    INT = "int"
    BOOL = "bool"
    FLOAT = "float"
    INTS = "ints"  # tuple[int, ...]
    TEXT = "text"  # a str that is stored but not indexed (message bodies, encoded segments)
    MAP = "map"  # str -> str
    STRINGS = "strings"  # tuple[str, ...], each value searchable
    WORDS = "words"  # a str searched by the words it holds (log contents)


@dataclass(frozen=True)
class Column:
    name: str
    type: ColumnType


_TYPES = {
    "str": ColumnType.STRING,
    "int": ColumnType.INT,
    "bool": ColumnType.BOOL,
    "float": ColumnType.FLOAT,
    "tuple": ColumnType.INTS,
    "Text": ColumnType.TEXT,
    "Words": ColumnType.WORDS,
}

Text = typing.NewType("Text", str)
"""A string column stored for reading back, never searched by."""

NO_TEXT = Text("")
"""An empty ``Text``, a column's default."""

Words = typing.NewType("Words", str)
"""A string column searched by the words it holds (``RecordSearch.contains``)."""


class UndecodableData(ValueError):
    """Remote data that does not match the columns of its stream data type."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamData:
    """Base of every item a worker chain carries. Subclasses are frozen dataclasses
    whose fields are the columns stored and sent between nodes."""

    STREAM_ID: ClassVar[int]
    MODEL: ClassVar[str]
    """The storage model (index or table) this type persists to."""
    DERIVED: ClassVar[tuple[Column, ...]] = ()
    """Columns computed from the others (see ``derived``): stored so that
    storage can sort and filter by them, never sent between nodes."""

    @classmethod
    @cache
    def columns(cls) -> tuple[Column, ...]:
        hints = typing.get_type_hints(cls)
        cols = []
        for f in dataclasses.fields(cls):
            hint = hints[f.name]
            name = getattr(typing.get_origin(hint) or hint, "__name__", str(hint))
            kind = _TYPES.get(name, ColumnType.MAP)
            if kind is ColumnType.INTS and typing.get_args(hint)[:1] == (str,):
                kind = ColumnType.STRINGS
            cols.append(Column(f.name, kind))
        return tuple(cols)

    @classmethod
    def stored_columns(cls) -> tuple[Column, ...]:
        return cls.columns() + cls.DERIVED

    def key(self) -> str:
        """The identity of the item: equal keys are combined and stored as one row."""
        raise NotImplementedError

    def routing_key(self) -> str:
        """What picks the node an item goes to; items with equal keys must have
        equal routing keys."""
        return self.key()

    def derived(self) -> dict[str, Any]:
        """The values of the ``DERIVED`` columns."""
        return {}

    def check(self, limits: TelemetryLimits, now_ms: int) -> None:
        """Raises ``Refused`` if the item breaks a rule no receiver's item
        breaks: what comes from another node is checked with it. Records are
        built from telemetry the receiver checked and never leave their node."""

    def size_hint(self) -> int:
        """About how many bytes the item takes on the wire (its strings dominate):
        10 a number, each string's length, 4 more a map entry and 2 a list's."""
        return _layout(type(self)).size(self)

    def to_row(self) -> dict[str, Any]:
        """The stored columns, derived ones included; a string list as a list,
        as JSON and storage hold it."""
        row = _layout(type(self)).row(self)
        row.update(self.derived())
        return row

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Self:
        """The item of a stored row: absent (None) columns take their
        defaults; maps and lists may come as JSON text."""
        values: dict[str, Any] = {}
        for name, read in _readers(cls):
            v = row.get(name)
            if v is not None:
                values[name] = v if read is None else read(v)
        return cls(**values)

    def to_remote(self) -> tuple[list[str], list[int]]:
        """Flattens the item for another node: the string columns then every
        map's keys and values in turn; the integer, boolean and float columns
        (a float as the 64 bits of its IEEE 754 form), every map's size, every
        integer list's length, then the lists' values. Column order is the
        dataclass's field order."""
        layout = _layout(type(self))
        if layout.lists:
            raise TypeError(f"{type(self).__name__} has string list columns: it is not sent between nodes")
        strings = [getattr(self, n) for n in layout.strings]
        longs = [
            _float_bits(getattr(self, n)) if n in layout.floats else int(getattr(self, n))
            for n in layout.longs
        ]
        for n in layout.maps:
            entries = getattr(self, n)
            longs.append(len(entries))
            strings.extend(itertools.chain.from_iterable(entries.items()))
        lists = [getattr(self, n) for n in layout.ints]
        longs.extend(len(v) for v in lists)
        for v in lists:
            longs.extend(v)
        return strings, longs

    @classmethod
    def from_remote(cls, strings: Sequence[str], longs: Sequence[int]) -> Self:
        layout = _layout(cls)
        if layout.lists:
            raise TypeError(f"{cls.__name__} has string list columns: it is not sent between nodes")
        ns, nl, nm, ni = len(layout.strings), len(layout.longs), len(layout.maps), len(layout.ints)
        map_sizes, list_sizes = longs[nl : nl + nm], longs[nl + nm : nl + nm + ni]
        if (
            len(strings) < ns
            or len(longs) < nl + nm + ni
            or min(map_sizes, default=0) < 0
            or min(list_sizes, default=0) < 0
            or 2 * sum(map_sizes) != len(strings) - ns
            or sum(list_sizes) != len(longs) - nl - nm - ni
        ):
            raise UndecodableData(
                f"{cls.__name__} takes {ns} strings and {nl} integers, then {nm} map sizes, "
                f"{ni} list lengths and their entries; got {len(strings)} strings and {len(longs)} integers"
            )
        return layout.decode(strings, longs)  # type: ignore[return-value]


def _float_bits(v: float) -> int:
    return int.from_bytes(struct.pack("<d", float(v)), "little", signed=True)


def _bits_float(v: int) -> float:
    return float(struct.unpack("<d", v.to_bytes(8, "little", signed=True))[0])


@dataclass(frozen=True)
class _RemoteLayout:
    strings: tuple[str, ...]
    longs: tuple[str, ...]
    bools: tuple[str, ...]
    floats: tuple[str, ...]
    maps: tuple[str, ...]
    ints: tuple[str, ...]
    lists: tuple[str, ...]
    """STRINGS columns: only records have them, and records never leave their node."""
    decode: Callable[[Sequence[str], Sequence[int]], StreamData]
    """Builds the item from checked columns (see ``_decoder``)."""
    size: Callable[[Any], int]
    row: Callable[[Any], dict[str, Any]]
    """``size_hint`` and ``to_row`` without their derived columns, written out
    for the type (see ``_written_out``): every item taken runs both."""


_LAYOUTS: dict[type[StreamData], _RemoteLayout] = {}


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _tuple(value: Any) -> tuple[Any, ...]:
    return tuple(_json(value))


_READERS: dict[ColumnType, Callable[[Any], Any]] = {
    ColumnType.BOOL: bool,
    ColumnType.FLOAT: float,
    ColumnType.MAP: _json,
    ColumnType.INTS: _tuple,
    ColumnType.STRINGS: _tuple,
}


_Readers = tuple[tuple[str, Callable[[Any], Any] | None], ...]
_ROW_READERS: dict[type[StreamData], _Readers] = {}


def _readers(cls: type[StreamData]) -> _Readers:
    """Each column of ``cls`` with what makes a stored value its value (None:
    the value as it is); made once per type, as storage reads rows by the
    thousand."""
    found = _ROW_READERS.get(cls)
    if found is None:
        found = _ROW_READERS[cls] = tuple((c.name, _READERS.get(c.type)) for c in cls.columns())
    return found


def _layout(cls: type[StreamData]) -> _RemoteLayout:
    layout = _LAYOUTS.get(cls)
    if layout is None:
        layout = _LAYOUTS[cls] = _layout_of(cls)
    return layout


def _layout_of(cls: type[StreamData]) -> _RemoteLayout:
    cols = cls.columns()

    def named(*types: ColumnType) -> tuple[str, ...]:
        return tuple(c.name for c in cols if c.type in types)

    strings = named(ColumnType.STRING, ColumnType.TEXT, ColumnType.WORDS)
    longs = named(ColumnType.INT, ColumnType.BOOL, ColumnType.FLOAT)
    bools, floats = named(ColumnType.BOOL), named(ColumnType.FLOAT)
    maps, ints = named(ColumnType.MAP), named(ColumnType.INTS)
    lists = named(ColumnType.STRINGS)
    decode = _decoder(cls, strings, longs, bools, floats, maps, ints)
    size = [str(10 * len(longs)), *(f"len(x.{n})" for n in strings), *(f"10 * len(x.{n})" for n in ints)]
    size += [f"sum(len(k) + len(v) + 4 for k, v in x.{n}.items())" for n in maps]
    size += [f"sum(len(v) + 2 for v in x.{n})" for n in lists]
    row = [f"{c.name!r}: {'list' if c.name in lists else ''}(x.{c.name})" for c in cols]
    return _RemoteLayout(
        strings, longs, bools, floats, maps, ints, lists, decode,
        _written_out(f"return {' + '.join(size)}"), _written_out(f"return {{{', '.join(row)}}}"),
    )  # fmt: skip


def _written_out(body: str) -> Callable[[Any], Any]:
    """``def f(x): body``: only field names of our own dataclasses go into the code."""
    namespace: dict[str, Any] = {}
    exec(f"def f(x):\n    {body}", namespace)
    return namespace["f"]


def _decoder(
    cls: type[StreamData],
    strings: tuple[str, ...],
    longs: tuple[str, ...],
    bools: tuple[str, ...],
    floats: tuple[str, ...],
    maps: tuple[str, ...],
    ints: tuple[str, ...],
) -> Callable[[Sequence[str], Sequence[int]], StreamData]:
    """A function that calls ``cls(name=s[0], ..., sequence=l[0], ...)`` with the
    columns in place, written out for the type the way ``dataclasses`` writes
    ``__init__``: the receiving end of every remote hop runs it once per item,
    and building the arguments in a loop costs twice as much. Only field names
    of our own dataclasses go into the code."""
    wrap = {**dict.fromkeys(bools, "bool"), **dict.fromkeys(floats, "as_float")}
    args = [f"{n}=s[{i}]" for i, n in enumerate(strings)]
    args += [f"{n}={wrap.get(n, '')}(l[{i}])" for i, n in enumerate(longs)]
    lines = ["def decode(s, l):", f"    p = {len(strings)}"]
    for j, n in enumerate(maps):
        lines += [
            f"    e = p + 2 * l[{len(longs) + j}]",
            f"    m{j} = dict(zip(s[p:e:2], s[p + 1 : e : 2]))",
            "    p = e",
        ]
        args.append(f"{n}=m{j}")
    lines.append(f"    q = {len(longs) + len(maps) + len(ints)}")
    for j, n in enumerate(ints):
        lines += [f"    e = q + l[{len(longs) + len(maps) + j}]", f"    i{j} = tuple(l[q:e])", "    q = e"]
        args.append(f"{n}=i{j}")
    lines.append(f"    return cls({', '.join(args)})")
    namespace: dict[str, Any] = {"cls": cls, "as_float": _bits_float}
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
