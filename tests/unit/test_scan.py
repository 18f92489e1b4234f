"""The receiver's accelerator (``receiver/_scan.c``) reads a segment exactly
as the pure-Python path does (protobuf's message, ``segment_of`` and
``SegmentRules.check``): the same spans, references and tags for every segment that
passes, None for every segment refused, so that the pure-Python path names
what was wrong."""

from __future__ import annotations

import random
from typing import Any

import pytest

from skyoap.model.checks import Refused
from skyoap.model.spans import SEARCHABLE_TRACE_TAGS, Segment, SegmentRules
from skyoap.proto.skywalking import common_pb2, tracing_pb2
from skyoap.receiver import accelerator
from skyoap.receiver.traces import checked_segment, segment_of
from tests.unit.test_segment_checks import LIMITS, NOW_MS

RULES = SegmentRules(LIMITS, frozenset(SEARCHABLE_TRACE_TAGS))

NAMES = ["svc", "x" * 20, "x" * 21, "", "a\x01b", "\x7f", "\x1f", "ü" * 20, "ü" * 21, "😀" * 20, "a\u0085b"]
TIMES = [NOW_MS - 3_600_000, NOW_MS - 3_600_001, NOW_MS - 10, NOW_MS, NOW_MS + 60_000, NOW_MS + 60_001]
TAG_KEYS = ["http.method", "db.type", "url", "mq.topic", "", "http.status_code", "db.statement", "cache.op"]
TAG_VALUES = ["GET", "", "v" * 240, "v" * 246, "ü" * 245, "500", "a\x00b"]


def scan(data: bytes, rules: tuple[Any, ...] = RULES.scan_args) -> Any:
    scanner = accelerator.scanner
    assert scanner is not None, "the accelerator is not built (pip install -e . with a C compiler)"
    return scanner.scan(data, rules, NOW_MS)


def odd(rng: random.Random) -> bool:
    """Whether a field takes a value near or past a rule: rarely, so that
    about half the segments pass."""
    return rng.random() < 0.03


def name(rng: random.Random, common: str) -> str:
    return rng.choice(NAMES) if odd(rng) else common


def count(rng: random.Random, most: int) -> int:
    return most + 1 if odd(rng) else rng.randrange(most + 1)


def tags(rng: random.Random, most: int) -> list[common_pb2.KeyStringValuePair]:
    return [
        common_pb2.KeyStringValuePair(key=rng.choice(TAG_KEYS), value=rng.choice(TAG_VALUES))
        for _ in range(count(rng, most))
    ]


def ref(rng: random.Random) -> tracing_pb2.SegmentReference:
    return tracing_pb2.SegmentReference(
        refType=rng.choice([2, -1]) if odd(rng) else rng.randrange(2),  # type: ignore[arg-type]
        traceId=rng.choice(NAMES),  # not checked, and read by nobody
        parentTraceSegmentId="p",
        parentSpanId=rng.randrange(-1, 3),
        parentService=name(rng, "caller"),
        parentServiceInstance=name(rng, "caller-1"),
        parentEndpoint=name(rng, "GET:/"),
        networkAddressUsedAtPeer=name(rng, "svc:80"),
    )


def span(rng: random.Random) -> tracing_pb2.SpanObject:
    start = rng.choice(TIMES) if odd(rng) else NOW_MS - 10
    return tracing_pb2.SpanObject(
        spanId=rng.randrange(3),
        parentSpanId=rng.randrange(-1, 2),
        startTime=start,
        endTime=rng.choice(TIMES) if odd(rng) else start + rng.randrange(5),
        refs=[ref(rng) for _ in range(count(rng, LIMITS.max_refs_per_span))],
        operationName=name(rng, "GET:/orders"),
        peer=name(rng, "db:5432"),
        spanType=rng.choice([3, -1]) if odd(rng) else rng.randrange(3),  # type: ignore[arg-type]
        spanLayer=rng.choice([7, -1]) if odd(rng) else rng.randrange(7),  # type: ignore[arg-type]
        componentId=rng.randrange(100),
        isError=rng.random() < 0.3,
        tags=tags(rng, LIMITS.max_tags_per_item),
        logs=[tracing_pb2.Log(time=NOW_MS, data=tags(rng, 2)) for _ in range(rng.randrange(2))],
        skipAnalysis=rng.random() < 0.2,
    )


def segment(rng: random.Random) -> tracing_pb2.SegmentObject:
    return tracing_pb2.SegmentObject(
        traceId=name(rng, "t1"),
        traceSegmentId=name(rng, "s1"),
        spans=[span(rng) for _ in range(count(rng, LIMITS.max_spans_per_segment) or 1 - odd(rng))],
        service=name(rng, "svc"),
        serviceInstance=name(rng, "svc-1"),
        isSizeLimited=rng.random() < 0.1,
    )


def pure(pb: tracing_pb2.SegmentObject) -> Segment | str:
    """What the pure-Python path makes of ``pb``: the segment, or why it is refused."""
    try:
        taken = segment_of(pb, RULES)
        RULES.check(taken, NOW_MS)
    except Refused as e:
        return f"{e.reason}: {e}"
    return taken


def scanned(data: bytes) -> Segment | None:
    fields = scan(data)
    if fields is None:
        return None
    trace_id, segment_id, service, instance, spans, found = fields
    return Segment(trace_id, segment_id, service, instance, spans, data, found)


def same(a: Segment, b: Segment) -> bool:
    """Equal, field by field and type by type (a named tuple equals a plain
    one, and True equals 1, so ``repr`` tells them apart)."""
    return repr(a) == repr(b)


@pytest.mark.parametrize("seed", range(10))
def test_random_segments_read_the_same_or_are_left_to_protobuf_when_refused(seed: int) -> None:
    rng = random.Random(seed)
    taken = refused = 0
    for _ in range(400):
        pb = segment(rng)
        expected = pure(pb)
        found = scanned(pb.SerializeToString())
        if isinstance(expected, str):
            assert found is None, (expected, pb)
            refused += 1
        else:
            assert found is not None and same(found, expected), pb
            taken += 1
    assert taken > 50 and refused > 50  # both sides of every rule were tried


@pytest.mark.parametrize("seed", range(3))
def test_the_receiver_takes_and_refuses_the_same_through_either_path(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    messages = [segment(rng) for _ in range(300)]

    def outcomes() -> list[str]:
        out = []
        for pb in messages:
            try:
                out.append(repr(checked_segment(pb, RULES, NOW_MS)))
            except Refused as e:
                out.append(f"{e.reason}: {e}")
        return out

    accelerated = outcomes()
    monkeypatch.setattr(accelerator, "scanner", None)
    assert accelerated == outcomes()


@pytest.mark.parametrize("seed", range(5))
def test_damaged_bytes_read_as_protobuf_reads_them_or_not_at_all(seed: int) -> None:
    """Bytes flipped, cut or repeated: the accelerator never reads a segment
    differently from protobuf (it may leave any of them to it)."""
    rng = random.Random(seed)
    agreed = 0
    for _ in range(600):
        data = bytearray(segment(rng).SerializeToString())
        for _ in range(rng.randrange(1, 4)):
            at = rng.randrange(len(data))
            kind = rng.randrange(3)
            if kind == 0:
                data[at] = rng.randrange(256)
            elif kind == 1:
                del data[at:]
            else:
                data[at:at] = data[at : at + rng.randrange(1, 8)]
            if not data:
                data = bytearray(b"\x0a")
        found = scanned(bytes(data))
        try:
            pb = tracing_pb2.SegmentObject.FromString(bytes(data))
        except Exception:  # protobuf reads none of it: no node gets that far
            continue
        expected = pure(pb)
        if found is not None:
            assert not isinstance(expected, str), (expected, bytes(data))
            assert repr(found.spans) == repr(expected.spans) and found.tags == expected.tags
            assert (found.trace_id, found.segment_id, found.service, found.instance) == (
                expected.trace_id,
                expected.segment_id,
                expected.service,
                expected.instance,
            )
            agreed += 1
    assert agreed > 0


def test_a_segment_of_the_agents_kinds_reads_the_same_as_protobuf_reads_it() -> None:
    """The shape SkyWalking's agents send: an entry called across processes,
    exits to a database and a cache, a local span, searchable tags."""
    pb = tracing_pb2.SegmentObject(
        traceId="a1b2c3.45.16",
        traceSegmentId="d4e5f6.45.16",
        service="orders",
        serviceInstance="orders-1@10.0.0.5",
        spans=[
            tracing_pb2.SpanObject(
                spanId=0, parentSpanId=-1, startTime=NOW_MS - 30, endTime=NOW_MS, spanType=tracing_pb2.Entry,
                spanLayer=tracing_pb2.Http, operationName="/orders", isError=True, componentId=7000,
                refs=[tracing_pb2.SegmentReference(
                    refType=tracing_pb2.CrossProcess, traceId="a1b2c3.45.16", parentTraceSegmentId="p.1",
                    parentSpanId=1, parentService="gateway", parentServiceInstance="gw-1",
                    parentEndpoint="/api/orders", networkAddressUsedAtPeer="orders:8080",
                )],
                tags=[common_pb2.KeyStringValuePair(key="http.method", value="GET"),
                      common_pb2.KeyStringValuePair(key="url", value="http://orders:8080/orders"),
                      common_pb2.KeyStringValuePair(key="http.status_code", value="500")],
            ),
            tracing_pb2.SpanObject(
                spanId=1, parentSpanId=0, startTime=NOW_MS - 20, endTime=NOW_MS - 5,
                spanType=tracing_pb2.Exit, spanLayer=tracing_pb2.Database, operationName="SELECT",
                peer="pg:5432",
                tags=[common_pb2.KeyStringValuePair(key="db.type", value="PostgreSQL"),
                      common_pb2.KeyStringValuePair(key="db.statement", value="SELECT *\nFROM orders")],
            ),
            tracing_pb2.SpanObject(
                spanId=2, parentSpanId=0, startTime=NOW_MS - 4, endTime=NOW_MS - 3, spanType=tracing_pb2.Exit,
                spanLayer=tracing_pb2.Cache, operationName="GET", peer="redis:6379", skipAnalysis=True,
            ),
            tracing_pb2.SpanObject(spanId=3, parentSpanId=0, startTime=NOW_MS - 2, endTime=NOW_MS - 1,
                                   spanType=tracing_pb2.Local, operationName="render"),
        ],
    )  # fmt: skip
    expected = pure(pb)
    assert isinstance(expected, Segment)
    assert expected.tags == ("db.type=PostgreSQL", "http.method=GET", "http.status_code=500")
    assert [s.details for s in expected.spans] == [
        (),
        (("db.type", "PostgreSQL"), ("db.statement", "SELECT *\nFROM orders")),
        (),
        (),
    ]
    assert [s.component for s in expected.spans] == [7000, 0, 0, 0]
    found = scanned(pb.SerializeToString())
    assert found is not None and same(found, expected)


@pytest.mark.parametrize(
    "rules, why",
    [
        ((4, 2, 3, 20, 1, 1, ("k",), ()), "the keys of the rules must be bytes"),
        ((4, 2, 3, 20, 1, 1, (), ("k",)), "the keys of the rules must be bytes"),
        ((4, 2, 3), "argument 2 must be sequence of length 8, not 3"),
    ],
)
def test_rules_of_the_wrong_shape_are_an_error(rules: tuple[Any, ...], why: str) -> None:
    with pytest.raises(TypeError, match=why):
        scan(b"", rules)
