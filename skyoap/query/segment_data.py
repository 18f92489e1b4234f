"""A stored segment read back: ``SegmentRecord.data`` is the agent's
``SegmentObject`` as it was sent (protobuf), and what a query needs of it is
read here from protobuf's wire format. The generated protobuf code stays at
the gRPC edge (``receiver/``); ``tests/unit/test_query_traces.py`` checks this
reader against protobuf's own encoding. Field numbers are those of
SkyWalking's ``Tracing.proto`` and ``Common.proto``."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator
from dataclasses import dataclass, field

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


class UndecodableSegment(ValueError):
    """Stored data that is not a segment's encoding."""


@dataclass(frozen=True, slots=True)
class Ref:
    ref_type: int
    """0 CrossProcess, 1 CrossThread."""
    trace_id: str = ""
    parent_segment_id: str = ""
    parent_span_id: int = 0


@dataclass(frozen=True, slots=True)
class SpanLog:
    time: int
    data: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class StoredSpan:
    span_id: int = 0
    parent_span_id: int = 0
    start_time: int = 0
    end_time: int = 0
    refs: tuple[Ref, ...] = ()
    operation: str = ""
    peer: str = ""
    kind: int = 0
    """0 Entry, 1 Exit, 2 Local."""
    layer: int = 0
    component_id: int = 0
    is_error: bool = False
    tags: tuple[tuple[str, str], ...] = ()
    logs: tuple[SpanLog, ...] = ()


@dataclass(frozen=True, slots=True)
class StoredSegment:
    trace_id: str = ""
    segment_id: str = ""
    service: str = ""
    instance: str = ""
    spans: tuple[StoredSpan, ...] = field(default=())


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise UndecodableSegment("a varint runs past the end of the data")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


def _fields(buf: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of each field of a message: an integer for a
    varint or fixed field, the bytes of a length-delimited one."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == _VARINT:
            value, pos = _varint(buf, pos)
        elif wire == _LEN:
            size, pos = _varint(buf, pos)
            value, pos = buf[pos : pos + size], pos + size
        elif wire in (_I64, _I32):
            width = 8 if wire == _I64 else 4
            value, pos = int.from_bytes(buf[pos : pos + width], "little"), pos + width
        else:
            raise UndecodableSegment(f"field {number} has wire type {wire}, which protobuf 3 does not write")
        if pos > len(buf) or number == 0:
            raise UndecodableSegment("a field runs past the end of the data")
        yield number, value


def _signed(value: int | bytes) -> int:
    """An int32 or int64 field: negative numbers come as 64-bit two's complement."""
    n = _int(value)
    return n - (1 << 64) if n >= 1 << 63 else n


def _int(value: int | bytes) -> int:
    if not isinstance(value, int):
        raise UndecodableSegment("an integer field is length-delimited")
    return value


def _bytes(value: int | bytes) -> bytes:
    if isinstance(value, int):
        raise UndecodableSegment("a string or message field is not length-delimited")
    return value


def _str(value: int | bytes) -> str:
    try:
        return _bytes(value).decode()
    except UnicodeDecodeError:
        raise UndecodableSegment("a string field is not UTF-8") from None


def _pair(buf: bytes) -> tuple[str, str]:  # KeyStringValuePair
    key = value = ""
    for number, v in _fields(buf):
        if number == 1:
            key = _str(v)
        elif number == 2:
            value = _str(v)
    return key, value


def _log(buf: bytes) -> SpanLog:
    time, data = 0, []
    for number, v in _fields(buf):
        if number == 1:
            time = _signed(v)
        elif number == 2:
            data.append(_pair(_bytes(v)))
    return SpanLog(time, tuple(data))


def _ref(buf: bytes) -> Ref:  # SegmentReference
    values: dict[str, object] = {"ref_type": 0}
    for number, v in _fields(buf):
        if number == 1:
            values["ref_type"] = _int(v)
        elif number == 2:
            values["trace_id"] = _str(v)
        elif number == 3:
            values["parent_segment_id"] = _str(v)
        elif number == 4:
            values["parent_span_id"] = _signed(v)
    return Ref(**values)  # type: ignore[arg-type]


_SPAN_INTS = {
    1: "span_id",
    2: "parent_span_id",
    3: "start_time",
    4: "end_time",
    8: "kind",
    9: "layer",
    10: "component_id",
}
_SPAN_STRS = {6: "operation", 7: "peer"}


def _span(buf: bytes) -> StoredSpan:  # SpanObject
    values: dict[str, object] = {}
    refs, tags, logs = [], [], []
    for number, v in _fields(buf):
        if number in _SPAN_INTS:
            values[_SPAN_INTS[number]] = _signed(v)
        elif number in _SPAN_STRS:
            values[_SPAN_STRS[number]] = _str(v)
        elif number == 5:
            refs.append(_ref(_bytes(v)))
        elif number == 11:
            values["is_error"] = bool(_int(v))
        elif number == 12:
            tags.append(_pair(_bytes(v)))
        elif number == 13:
            logs.append(_log(_bytes(v)))
    return StoredSpan(refs=tuple(refs), tags=tuple(tags), logs=tuple(logs), **values)  # type: ignore[arg-type]


def decode_segment(data: str) -> StoredSegment:
    """The segment in a ``SegmentRecord.data`` (base64 of its protobuf encoding)."""
    try:
        buf = base64.b64decode(data, validate=True)
    except binascii.Error:
        raise UndecodableSegment("the stored data is not base64") from None
    values: dict[str, str] = {}
    spans = []
    names = {1: "trace_id", 2: "segment_id", 4: "service", 5: "instance"}
    for number, v in _fields(buf):
        if number in names:
            values[names[number]] = _str(v)
        elif number == 3:
            spans.append(_span(_bytes(v)))
    return StoredSegment(spans=tuple(spans), **values)
