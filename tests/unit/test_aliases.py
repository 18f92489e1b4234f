"""Network address aliases: what entry spans teach, how exit spans are
measured through them in either order of the caller's and the callee's
segments, and the cache every node that analyses spans holds."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from skyoap.model.checks import Refused
from skyoap.model.inventory import OTHER
from skyoap.model.metrics import (
    SEP,
    Downsampling,
    M,
    Metrics,
    NetworkAddressAlias,
    ServiceInstanceRelationMetrics,
    ServiceRelationMetrics,
)
from skyoap.model.spans import CROSS_PROCESS, Segment, Span, SpanKind, SpanRef
from skyoap.model.stream import ColumnType
from skyoap.receiver.aliases import LOOKBACK_MS, MINUTE_ROWS_FOR_MS, AliasCache
from skyoap.receiver.segments import measure
from skyoap.runtime.instruments import Instruments
from skyoap.storage.api import StorageUnavailable
from tests.unit.test_meter_checks import LIMITS

NOW = 1_795_287_900_000
"""2026-11-21 19:05:00 UTC."""
MINUTE = 202611211905
ENTRY, EXIT = int(SpanKind.ENTRY), int(SpanKind.EXIT)
HTTP, DATABASE = 3, 1


class Reads:
    """Storage's newest alias rows, as ``latest`` answers them, and what was asked."""

    def __init__(self, rows: Sequence[NetworkAddressAlias] = ()) -> None:
        self.rows = list(rows)
        self.asked: list[tuple[Downsampling, int]] = []
        self.down = False

    def latest(self, model: type[M], level: Downsampling, first_bucket: int, by: str) -> list[M]:
        assert (model, by) == (NetworkAddressAlias, "address")
        if self.down:
            raise StorageUnavailable("storage is away")
        self.asked.append((level, first_bucket))
        return [r for r in self.rows if r.time_bucket >= first_bucket]  # type: ignore[misc]


class Clock:
    def __init__(self) -> None:
        self.ms = NOW

    def __call__(self) -> int:
        return self.ms


def cache(reads: Reads | None = None, most: int = 100, clock: Clock | None = None) -> AliasCache:
    return AliasCache(reads or Reads(), most, 60.0, Instruments(), clock or Clock())


def callee(
    start: int, address: str = "orders:8080", trace: str = "t1", instance: str = "orders-1"
) -> Segment:
    """``orders`` serves a call ``shop`` made to ``address``."""
    ref = SpanRef(CROSS_PROCESS, "shop", "shop-1", "GET:/buy", address)
    entry = Span(ENTRY, HTTP, start, start + 20, "POST:/order", "", False, False, (ref,), 0)
    return Segment(trace, f"{trace}.orders", "orders", instance, (entry,), b"")


def caller(start: int, trace: str = "t1", peer: str = "orders:8080") -> Segment:
    """``shop`` serves a user and calls ``peer`` (25 ms) and a database nobody reports from (5 ms)."""
    spans = (
        Span(ENTRY, HTTP, start, start + 40, "GET:/buy", "", False, False, (), 0),
        Span(EXIT, HTTP, start + 5, start + 30, "POST:/order", peer, False, False, (), 0),
        Span(EXIT, DATABASE, start + 30, start + 35, "SELECT", "mysql:3306", False, False, (), 0),
    )
    return Segment(trace, f"{trace}.shop", "shop", "shop-1", spans, b"")


Relations = dict[tuple[str, ...], tuple[int, int, int]]


def relations(metrics: Sequence[Metrics]) -> Relations:
    """Each relation's entity names and side, with its bucket, calls and latency."""
    out: Relations = {}
    for m in metrics:
        if isinstance(m, ServiceRelationMetrics | ServiceInstanceRelationMetrics):
            entity = tuple(getattr(m, c.name) for c in m.columns() if c.type is ColumnType.STRING)
            out[entity] = (m.time_bucket, m.calls, m.latency_sum_ms)
    return out


def aliases_in(metrics: Sequence[Metrics]) -> list[NetworkAddressAlias]:
    return [m for m in metrics if isinstance(m, NetworkAddressAlias)]


SERVED: Relations = {
    ("shop", "orders", "server"): (MINUTE, 1, 20),
    ("shop", "shop-1", "orders", "orders-1", "server"): (MINUTE, 1, 20),
}
"""What ``callee(NOW)`` counts of relations: the callee's side."""
USER: Relations = {
    ("User", "shop", "server"): (MINUTE, 1, 40),
    ("User", "User", "shop", "shop-1", "server"): (MINUTE, 1, 40),
}
"""What an entry span no traced service called counts: the User's side."""
DATABASE_CALL: Relations = {
    ("shop", "mysql:3306", "client"): (MINUTE, 1, 5),
    ("shop", "shop-1", "mysql:3306", "mysql:3306", "client"): (MINUTE, 1, 5),
}
TO_ORDERS: Relations = {
    ("shop", "orders", "client"): (MINUTE, 1, 25),
    ("shop", "shop-1", "orders", "orders-1", "client"): (MINUTE, 1, 25),
}
TO_ADDRESS: Relations = {
    ("shop", "orders:8080", "client"): (MINUTE, 1, 25),
    ("shop", "shop-1", "orders:8080", "orders:8080", "client"): (MINUTE, 1, 25),
}


def test_an_alias_learned_first_makes_the_callers_side_a_relation_to_the_callee() -> None:
    aliases = cache()
    taught = measure([callee(NOW)], aliases=aliases)
    assert relations(taught) == SERVED
    assert aliases_in(taught) == [
        NetworkAddressAlias(
            time_bucket=MINUTE, address="orders:8080", service="orders", instance="orders-1", last_seen=NOW
        )
    ]

    measured = measure([caller(NOW + 1000, trace="t2")], aliases=aliases)
    # One relation shop -> orders with both sides; the database stays an address.
    assert relations(measured) == {**USER, **TO_ORDERS, **DATABASE_CALL}
    assert aliases_in(measured) == []


def test_an_exit_measured_before_the_alias_is_learned_calls_the_address_then_the_service() -> None:
    aliases = cache()
    assert relations(measure([caller(NOW)], aliases=aliases)) == {**USER, **TO_ADDRESS, **DATABASE_CALL}
    assert relations(measure([callee(NOW)], aliases=aliases)) == SERVED
    later = measure([caller(NOW + 1000, trace="t2")], aliases=aliases)
    assert relations(later) == {**USER, **TO_ORDERS, **DATABASE_CALL}


def test_the_aliases_of_one_call_are_learned_before_its_exit_spans_are_measured() -> None:
    # The caller's segment first, as agents often send them.
    together = measure([caller(NOW), callee(NOW)], aliases=cache())
    assert relations(together) == {**USER, **TO_ORDERS, **DATABASE_CALL, **SERVED}
    # Without a node's cache, a call's own aliases still count, and only they.
    assert relations(measure([caller(NOW), callee(NOW)])) == relations(together)
    assert relations(measure([caller(NOW)])) == {**USER, **TO_ADDRESS, **DATABASE_CALL}


def test_a_call_sends_the_latest_sighting_of_each_address_and_minute() -> None:
    sightings = aliases_in(
        measure(
            [
                callee(NOW + 10_000, trace="t1", instance="orders-2"),
                callee(NOW + 5_000, trace="t2", instance="orders-1"),
                callee(NOW + 61_000, trace="t3", instance="orders-1"),
                callee(NOW, trace="t4", address="orders.internal:80"),
            ]
        )
    )
    assert sorted((a.time_bucket, a.address, a.instance, a.last_seen) for a in sightings) == [
        (MINUTE, "orders.internal:80", "orders-1", NOW),
        (MINUTE, "orders:8080", "orders-2", NOW + 10_000),
        (MINUTE + 1, "orders:8080", "orders-1", NOW + 61_000),
    ]


def test_an_address_folded_into_other_or_a_span_skipped_teaches_nothing() -> None:
    aliases = cache()
    skipped = callee(NOW, address="orders:9090")
    skipped = Segment(
        skipped.trace_id, skipped.segment_id, skipped.service, skipped.instance,
        (skipped.spans[0]._replace(skip_analysis=True),), b"",
    )  # fmt: skip
    assert aliases_in(measure([callee(NOW, address=OTHER), skipped], aliases=aliases)) == []
    assert aliases.get(OTHER) is None and aliases.get("orders:9090") is None
    # Every address past the bound is (other): its calls stay calls to (other).
    assert relations(measure([caller(NOW, peer=OTHER)], aliases=aliases))[("shop", OTHER, "client")] == (
        MINUTE,
        1,
        25,
    )


def alias(address: str, service: str, seen_ms: int, instance: str = "") -> NetworkAddressAlias:
    bucket = Downsampling.MINUTE.bucket_of(seen_ms)
    return NetworkAddressAlias(
        time_bucket=bucket,
        address=address,
        service=service,
        instance=instance or f"{service}-1",
        last_seen=seen_ms,
    )


def test_the_cache_keeps_the_latest_sighting_of_each_address() -> None:
    aliases = cache()
    aliases.learn([alias("10.0.0.7:80", "orders", NOW)])
    aliases.learn([alias("10.0.0.7:80", "billing", NOW - 1)])  # older: ignored
    assert aliases.get("10.0.0.7:80") == alias("10.0.0.7:80", "orders", NOW)
    aliases.learn([alias("10.0.0.7:80", "billing", NOW + 1)])  # the address moved
    assert aliases.get("10.0.0.7:80") == alias("10.0.0.7:80", "billing", NOW + 1)


def test_the_cache_reads_everything_at_start_then_what_changed_since_each_read() -> None:
    clock = Clock()
    reads = Reads([alias("a:1", "alpha", NOW - 3 * 86_400_000), alias("b:1", "beta", NOW - 60_000)])
    aliases = cache(reads, clock=clock)
    aliases.start()
    try:
        # Every alias storage keeps: the day rows from the first bucket on.
        assert reads.asked == [(Downsampling.DAY, 0)]
        assert aliases.get("a:1") == alias("a:1", "alpha", NOW - 3 * 86_400_000)
        assert aliases.get("b:1") == alias("b:1", "beta", NOW - 60_000)

        # Another node learned that b:1 is now gamma's; this node had it as beta's.
        clock.ms = NOW + 10_000
        reads.rows = [alias("b:1", "gamma", NOW + 5_000)]
        assert aliases.refresh() == 1
        assert reads.asked[-1] == (Downsampling.MINUTE, Downsampling.MINUTE.bucket_of(NOW - LOOKBACK_MS))
        assert aliases.get("b:1") == alias("b:1", "gamma", NOW + 5_000)
        assert aliases.get("a:1") == alias("a:1", "alpha", NOW - 3 * 86_400_000)

        # What this node learns itself counts at once, and storage's older rows do not undo it.
        aliases.learn([alias("b:1", "beta", NOW + 9_000)])
        aliases.refresh()
        assert reads.asked[-1] == (
            Downsampling.MINUTE,
            Downsampling.MINUTE.bucket_of(NOW + 10_000 - LOOKBACK_MS),
        )
        assert aliases.get("b:1") == alias("b:1", "beta", NOW + 9_000)

        # Storage away: nothing is read, and the next read covers the gap.
        reads.down = True
        clock.ms = NOW + 20_000
        with pytest.raises(StorageUnavailable):
            aliases.refresh()
        reads.down = False
        clock.ms = NOW + 10_000 + MINUTE_ROWS_FOR_MS + 1
        aliases.refresh()
        assert reads.asked[-1] == (Downsampling.DAY, Downsampling.DAY.bucket_of(NOW + 10_000))
    finally:
        aliases.close()


def test_a_node_starts_when_storage_cannot_give_the_aliases_and_reads_them_all_later() -> None:
    reads = Reads([alias("a:1", "alpha", NOW)])
    reads.down = True
    aliases = cache(reads)
    aliases.start()
    try:
        assert aliases.get("a:1") is None
        reads.down = False
        aliases.refresh()
        assert reads.asked == [(Downsampling.DAY, 0)]
        assert aliases.get("a:1") == alias("a:1", "alpha", NOW)
    finally:
        aliases.close()


def test_the_cache_holds_at_most_its_bound_forgetting_the_least_recently_seen() -> None:
    instruments = Instruments()
    aliases = AliasCache(Reads(), 2, 60.0, instruments, Clock())
    aliases.learn([alias("a:1", "alpha", NOW), alias("b:1", "beta", NOW + 1)])
    aliases.learn([alias("a:1", "alpha", NOW + 2)])  # seen again: now the most recent
    aliases.learn([alias("c:1", "gamma", NOW + 3)])
    assert [aliases.get(a) is not None for a in ("a:1", "b:1", "c:1")] == [True, False, True]
    assert instruments.value("skyoap_aliases") == 2
    assert instruments.value("skyoap_aliases_forgotten_total") == 1


def test_an_alias_merges_by_keeping_the_latest_and_crosses_nodes_checked() -> None:
    first = alias("orders:8080", "orders", NOW + 1_000)
    later = alias("orders:8080", "orders", NOW + 2_000, instance="orders-2")
    assert first.combine(later) == later and later.combine(first) == later
    assert first.key() == f"{MINUTE}{SEP}orders:8080"
    assert NetworkAddressAlias.from_remote(*first.to_remote()) == first
    first.check(LIMITS, NOW)
    outside = NetworkAddressAlias(
        time_bucket=MINUTE,
        address="orders:8080",
        service="orders",
        instance="orders-1",
        last_seen=NOW + 60_000,
    )
    with pytest.raises(Refused, match="not in its minute"):
        outside.check(LIMITS, NOW)
