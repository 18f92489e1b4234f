"""The receiver judges a segment in one pass (``SegmentRules._passes``) and
names what is wrong only when something is (``SegmentRules._refuse``): both
must agree on every segment."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from skyoap.model.checks import Refused, TelemetryLimits
from skyoap.model.spans import Segment, SegmentRules, Span, SpanRef

NOW_MS = 1_790_000_000_000
LIMITS = TelemetryLimits(
    max_name_length=20,
    max_past_ms=3_600_000,
    max_future_ms=60_000,
    max_properties_chars=100,
    max_spans_per_segment=4,
    max_refs_per_span=2,
    max_tags_per_item=3,
    max_log_body_bytes=100,
    max_histogram_buckets=10,
)


def good(rng: random.Random) -> Segment:
    def ref() -> SpanRef:
        return SpanRef(rng.randrange(2), "caller", "caller-1", "GET:/", "svc:80")

    spans = tuple(
        Span(rng.randrange(3), rng.randrange(7), NOW_MS - 10, NOW_MS, "op", "peer", False, False,
             tuple(ref() for _ in range(rng.randrange(3))), rng.randrange(4))
        for _ in range(1 + rng.randrange(4))
    )  # fmt: skip
    return Segment("t", "s", "svc", "svc-1", spans, b"")


def broken(segment: Segment, rng: random.Random) -> Segment:
    """``segment`` with one field of it, or of a span or reference, set to a value near or past a rule."""
    names = ["x" * 20, "x" * 21, "", "a\x01b", "\x7f", "ü" * 20]
    times = [NOW_MS - 3_600_000, NOW_MS - 3_600_001, NOW_MS + 60_000, NOW_MS + 60_001, NOW_MS - 11]
    spans = list(segment.spans)
    where = rng.randrange(4)
    if where == 0:
        field = rng.choice(["trace_id", "segment_id", "service", "instance"])
        values = {**{f: getattr(segment, f) for f in ("trace_id", "segment_id", "service", "instance")}}
        values[field] = rng.choice(names)
        return Segment(**values, spans=segment.spans, data=b"")
    if where == 1:
        spans = rng.choice([[], spans * 2, spans])
        return Segment(
            segment.trace_id, segment.segment_id, segment.service, segment.instance, tuple(spans), b""
        )
    if not spans:
        return segment
    i = rng.randrange(len(spans))
    span = spans[i]
    if where == 2 or not span.refs:
        field = rng.choice(["kind", "layer", "start_time", "end_time", "operation", "peer", "refs", "tags"])
        value: Any = {
            "kind": rng.choice([-1, 0, 2, 3]),
            "layer": rng.choice([0, 6, 7, -1]),
            "start_time": rng.choice(times),
            "end_time": rng.choice(times),
            "operation": rng.choice(names),
            "peer": rng.choice(names),
            "refs": span.refs * 2,
            "tags": rng.choice([3, 4]),
        }[field]
        spans[i] = span._replace(**{field: value})
    else:
        j = rng.randrange(len(span.refs))
        refs = list(span.refs)
        field = rng.choice(SpanRef._fields)
        change: dict[str, Any] = {field: rng.choice([2, -1, 1]) if field == "ref_type" else rng.choice(names)}
        refs[j] = refs[j]._replace(**change)
        spans[i] = span._replace(refs=tuple(refs))
    return Segment(segment.trace_id, segment.segment_id, segment.service, segment.instance, tuple(spans), b"")


def refusal(segment: Segment, judge: Callable[[Segment, int], None]) -> str | None:
    try:
        judge(segment, NOW_MS)
    except Refused as e:
        return f"{e.reason}: {e}"
    return None


@pytest.mark.parametrize("seed", range(20))
def test_the_one_pass_judgement_agrees_with_the_rule_by_rule_one(seed: int) -> None:
    rules = SegmentRules(LIMITS)
    rng = random.Random(seed)
    refused = 0
    for _ in range(500):
        segment = good(rng)
        for _ in range(rng.randrange(3)):
            segment = broken(segment, rng)
        expected = refusal(segment, rules._refuse)
        assert rules._passes(segment, NOW_MS) == (expected is None), segment
        assert refusal(segment, rules.check) == expected
        refused += expected is not None
    assert 0 < refused < 500  # both kinds were judged
