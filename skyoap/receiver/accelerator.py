"""The receiver's accelerator (``receiver/_scan.c``): a SkyWalking segment's
bytes read into ``model.spans``' tuples and checked by its ``SegmentRules``
in one pass, without protobuf's objects. Bound at import to the tuples it
builds and to the constants it checks by, so that none is written twice."""

from __future__ import annotations

import os
from types import ModuleType

from skyoap.model.spans import MAX_SEARCHABLE_TAG_CHARS, RefType, Span, SpanKind, SpanLayer, SpanRef


def _load() -> ModuleType | None:
    """The accelerator, bound; None where it was not built (no C compiler
    where skyoap was installed) or SKYOAP_PURE_PYTHON asks for protobuf's
    path alone."""
    if os.environ.get("SKYOAP_PURE_PYTHON"):
        return None
    try:
        from skyoap.receiver import _scan
    except ImportError:
        return None
    # It takes a value below each count as known: the enums must run from 0.
    assert all(list(e) == list(range(len(e))) for e in (SpanKind, SpanLayer, RefType))
    _scan.bind(Span, SpanRef, (MAX_SEARCHABLE_TAG_CHARS, len(SpanKind), len(SpanLayer), len(RefType)))
    return _scan


scanner = _load()
"""``scanner.scan(data, rules.scan_args, now_ms)``: the segment's fields, or
None for a segment it does not take (one that breaks a rule, or holds what
only protobuf reads)."""
