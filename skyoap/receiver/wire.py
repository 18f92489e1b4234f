"""Hand-encoded answers for the hottest path: a registration whose names are
known. Building a ``KeyIntValuePair`` message per name costs more than all the
rest of the handler; the bytes of a ``repeated KeyIntValuePair`` field are simple
enough to write directly, and ``tests/unit/test_wire.py`` checks them against
protobuf's own encoding."""

from __future__ import annotations

from collections.abc import Iterable

from skyoap.runtime.bounded import BoundedDict

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


def key_int_pair(field_number: int, key: str, value: int) -> bytes:
    """One element of a ``repeated KeyIntValuePair`` field (key = 1, value = 2), value >= 0."""
    k = key.encode()
    # proto3 leaves fields at their defaults ("" and 0) out.
    body = (b"\x0a" + _varint(len(k)) + k if k else b"") + (b"\x10" + _varint(value) if value else b"")
    return _varint(field_number << 3 | 2) + _varint(len(body)) + body


def key_int_pairs(field_number: int, pairs: Iterable[tuple[str, int]]) -> bytes:
    """The encoding of a message whose field ``field_number`` is ``repeated
    KeyIntValuePair`` holding ``pairs``."""
    return b"".join([key_int_pair(field_number, k, v) for k, v in pairs])


class PairEncoder:
    """``key_int_pairs`` for field 1 that remembers each pair's bytes: a name's
    id never changes once given, and agents ask for the same names again."""

    def __init__(self, size: int) -> None:
        self._encoded: BoundedDict[tuple[str, int], bytes] = BoundedDict(size)

    def encode(self, pairs: Iterable[tuple[str, int]]) -> bytes:
        get = self._encoded.getter
        parts = []
        for pair in pairs:
            part = get(pair)
            if part is None:
                part = key_int_pair(1, *pair)
                self._encoded.put(pair, part)
            parts.append(part)
        return b"".join(parts)
