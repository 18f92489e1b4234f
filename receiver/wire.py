"""Hand-encoded answers for the hottest path: a registration whose names are
known. Building a ``KeyIntValuePair`` message per name costs more than all the
rest of the handler; the bytes of a ``repeated KeyIntValuePair`` field are simple
enough to write directly, and ``tests/unit/test_wire.py`` checks them against
protobuf's own encoding."""

from __future__ import annotations

from collections.abc import Iterable

_ONE_BYTE = [bytes((n,)) for n in range(128)]


def _varint(n: int) -> bytes:
    if n < 128:
        return _ONE_BYTE[n]
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        if n:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def key_int_pairs(field_number: int, pairs: Iterable[tuple[str, int]]) -> bytes:
    """The encoding of a message whose field ``field_number`` is ``repeated
    KeyIntValuePair`` (key = 1, value = 2) holding ``pairs``, values >= 0."""
    tag = _varint(field_number << 3 | 2)
    parts = []
    for key, value in pairs:
        k = key.encode()
        # proto3 leaves fields at their defaults ("" and 0) out.
        body = (b"\x0a" + _varint(len(k)) + k if k else b"") + (b"\x10" + _varint(value) if value else b"")
        parts.append(tag + _varint(len(body)) + body)
    return b"".join(parts)
