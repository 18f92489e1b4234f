"""What decoding a request will hold in memory, read from its bytes before it
is decoded.

protobuf's decoder gives every sub-message and every element of a repeated
field a slot of its own, so a request of empty sub-messages (two bytes each on
the wire) takes up to ninety times its size once decoded, more the more
fields the sub-message has. Counting the bytes
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
ELEMENT_OVERHEAD = 56
"""What a decoded sub-message holds beyond its fields' slots: its header and
presence bits, its slot in its repeated field's array, and what the arrays
and the arena grow by. ``tests/unit/test_decoding.py`` measures every
repeated message field of every request the node serves against the cost."""
SLOT_WIDTH = {
    FD.TYPE_STRING: 16,
    FD.TYPE_BYTES: 16,
    FD.TYPE_MESSAGE: 8,
    FD.TYPE_GROUP: 8,
    FD.TYPE_DOUBLE: 8,
    FD.TYPE_INT64: 8,
    FD.TYPE_UINT64: 8,
    FD.TYPE_SINT64: 8,
    FD.TYPE_FIXED64: 8,
    FD.TYPE_SFIXED64: 8,
    FD.TYPE_BOOL: 1,
}
"""The bytes a field takes in its decoded message (a string is a pointer and a
length; a repeated field, a pointer to its array); 4 for the others."""
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


def message_cost(m: Any) -> int:
    """What one decoded message of type ``m`` holds, its fields empty: the
    slots of its fields (fields of a oneof share one, so this is more)."""
    return ELEMENT_OVERHEAD + sum(8 if f.is_repeated else SLOT_WIDTH.get(f.type, 4) for f in m.fields)


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
            cost = 0
            if f.type == FD.TYPE_MESSAGE and f.message_type is not None:
                cost = message_cost(f.message_type)
                todo.append(f.message_type)
            elif f.type in (FD.TYPE_STRING, FD.TYPE_BYTES):
                if f.is_repeated:
                    cost = STRING_COST
            elif f.is_repeated and f.type not in FIXED_WIDTH:
                packed = True
            if cost:
                # Fields of one number share a tag: each element counts as the largest.
                tag = _tag(f)
                tags[tag] = max(tags.get(tag, 0), cost)
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
