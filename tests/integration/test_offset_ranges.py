"""Offset ranges of topic partitions on a real Redis: writers reserve without
a lock, the watermark stops at the lowest open range, and a range passed over
(its writer gone, or Redis's data lost) is reported to its writer."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis

from skyoap.deploy.servers import RedisServer
from skyoap.storage.redis.offsets import RedisOffsetRanges


@pytest.fixture
def ranges(redis_server: RedisServer) -> Iterator[RedisOffsetRanges]:
    r = RedisOffsetRanges(redis_server.url, f"t{uuid.uuid4().hex[:8]}", lease_s=60)
    yield r
    r.close()


def never() -> int:
    raise AssertionError("the partition is set up already")


def test_a_new_partition_counts_on_from_what_storage_holds(ranges: RedisOffsetRanges) -> None:
    assert ranges.watermark("segment", 0) is None
    first = ranges.reserve("segment", 0, 3, floor=lambda: 40)
    second = ranges.reserve("segment", 0, 2, floor=never)
    assert (first.start, first.end, second.start, second.end) == (40, 43, 43, 45)
    assert first.epoch == second.epoch
    assert ranges.reserve("segment", 1, 1, floor=lambda: 0).start == 0  # partitions count apart


def test_the_watermark_stops_at_the_lowest_open_range(ranges: RedisOffsetRanges) -> None:
    a, b, c = (ranges.reserve("log", 2, n, floor=lambda: 0) for n in (10, 5, 5))
    assert ranges.watermark("log", 2) == 0
    assert ranges.complete([b, c]) == []  # done out of order: a is still being written
    assert ranges.watermark("log", 2) == 0
    assert ranges.complete([a]) == []
    assert ranges.watermark("log", 2) == 20
    assert ranges.complete([a]) == [a]  # completing twice: it is not open any more


def test_concurrent_writers_get_every_offset_once(ranges: RedisOffsetRanges) -> None:
    def write(_: int) -> list[int]:
        taken = [ranges.reserve("segment", 0, 7, floor=lambda: 0) for _ in range(50)]
        assert ranges.complete(taken) == []
        return [o for r in taken for o in range(r.start, r.end)]

    with ThreadPoolExecutor(8) as pool:
        offsets = [o for done in pool.map(write, range(8)) for o in done]
    assert sorted(offsets) == list(range(8 * 50 * 7))
    assert ranges.watermark("segment", 0) == 8 * 50 * 7


def test_a_range_whose_writer_is_gone_is_passed_once_its_lease_ends(redis_server: RedisServer) -> None:
    short = RedisOffsetRanges(redis_server.url, f"t{uuid.uuid4().hex[:8]}", lease_s=0.3)
    try:
        dead = short.reserve("metrics", 0, 4, floor=lambda: 0)
        alive = short.reserve("metrics", 0, 4, floor=never)
        assert short.complete([alive]) == []
        assert short.watermark("metrics", 0) == 0  # the dead writer's lease still runs
        time.sleep(0.5)
        assert short.watermark("metrics", 0) == 8
        # Had the writer only stalled, it learns its range was passed over.
        assert short.complete([dead]) == [dead]
    finally:
        short.close()


def test_after_redis_lost_its_data_old_ranges_are_passed_over(
    redis_server: RedisServer, ranges: RedisOffsetRanges
) -> None:
    before = ranges.reserve("inventory", 0, 5, floor=lambda: 0)
    redis.Redis.from_url(redis_server.url).flushall()
    assert ranges.watermark("inventory", 0) is None
    # Set up again from storage, which holds offsets up to 2 (3 and 4 were in flight).
    after = ranges.reserve("inventory", 0, 5, floor=lambda: 3)
    assert (after.start, after.end) == (3, 8)
    assert after.epoch != before.epoch
    assert ranges.complete([before, after]) == [before]  # written again at a new range
    assert ranges.watermark("inventory", 0) == 8


def test_a_range_holds_at_least_one_offset(ranges: RedisOffsetRanges) -> None:
    with pytest.raises(ValueError, match="at least one offset, not 0"):
        ranges.reserve("log", 0, 0, floor=lambda: 0)
