"""What decoding a request will hold in memory, read from its bytes before it
is decoded.

protobuf's decoder gives every sub-message and every element of a repeated
field a slot of its own, so a request of empty sub-messages (two bytes each on
the wire) takes up to sixty times its size once decoded. Counting the bytes
that could start such an element bounds that cost without decoding anything:
each element begins with its field's tag, and ``bytes.count`` finds every
occurrence of a tag in C, string contents included, so the count can only be
too high."""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor, message

FD = descriptor.FieldDescriptor

WIRE_BYTE_COST = 3
"""What a byte on the wire holds while its request is decoded and served,
beyond its elements: the byte as received, its copy in the decoded message,
and room for the arrays that hold the elements."""
MESSAGE_COST = 128
"""What a sub-message holds once decoded (about 115 bytes for an empty span)."""
STRING_COST = 32
"""What an element of a repeated string or bytes field holds once decoded."""
PACKED_BYTE_COST = 20
"""What one byte of a packed repeated varint can hold once decoded: an 8-byte
slot for a one-byte number, in an array grown by doubling."""
FIXED_WIDTH = {
    FD.TYPE_DOUBLE,
    FD.TYPE_FLOAT,
    FD.TYPE_FIXED32,
    FD.TYPE_FIXED64,
    FD.TYPE_SFIXED32,
    FD.TYPE_SFIXED64,
}
"""Numbers that take as many bytes on the wire as once decoded."""


def _tag(field: FD) -> bytes:
    """The bytes a length-delimited element of ``field`` starts with."""
    key = field.number << 3 | 2
    out = bytearray()
    while True:
        low, key = key & 0x7F, key >> 7
        out.append(low | 0x80 if key else low)
        if not key:
            return bytes(out)


def _elements(root: Any) -> tuple[dict[bytes, int], bool]:
    """The tags of every field, at any depth under ``root``, whose elements
    are allocated one by one, with what each element costs; and whether a
    packed repeated varint is among its fields."""
    tags: dict[bytes, int] = {}
    packed = False
    seen: set[str] = set()
    todo = [root]
    while todo:
        m = todo.pop()
        if m.full_name in seen:
            continue
        seen.add(m.full_name)
        for f in m.fields:
            if f.type == FD.TYPE_MESSAGE:
                tags[_tag(f)] = MESSAGE_COST
                if f.message_type is not None:
                    todo.append(f.message_type)
            elif f.type in (FD.TYPE_STRING, FD.TYPE_BYTES):
                if f.is_repeated:
                    tags[_tag(f)] = STRING_COST
            elif f.is_repeated and f.type not in FIXED_WIDTH:
                packed = True
    return tags, packed


class DecodeCost:
    """An upper bound of the memory a decoded message of one type holds."""

    def __init__(self, cls: type[message.Message]) -> None:
        tags, packed = _elements(cls.DESCRIPTOR)
        # A one-byte tag also counts every longer tag that starts with it; a
        # longer one is counted as itself, so no element escapes the count.
        self._tags = tuple(sorted(tags.items()))
        self._per_byte = PACKED_BYTE_COST if packed else WIRE_BYTE_COST

    def of(self, data: bytes) -> int:
        return len(data) * self._per_byte + sum(data.count(tag) * cost for tag, cost in self._tags)
