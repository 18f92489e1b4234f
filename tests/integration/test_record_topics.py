"""Segments and logs are their own topic entries: each is written once, with
its partition and offset, and a partition's end moves only over records that
are readable. Runs on both storages (Elasticsearch with Redis's offset ranges)."""

from __future__ import annotations

import time

import pytest
from elasticsearch import Elasticsearch

from skyoap.model.metrics import Downsampling
from skyoap.model.records import SegmentRecord
from skyoap.model.topics import Bounds, Retention
from skyoap.storage.api import OffsetOutOfRange
from skyoap.storage.redis.offsets import RedisOffsetRanges
from skyoap.storage.select import OpenStorage
from skyoap.wiring.config import NodeConfig
from tests.integration.segments import SEGMENTS, install, record_topics, segments, write


def on_topic(storage: OpenStorage) -> dict[str, tuple[int, int]]:
    """Every segment readable on the topic: key → (partition, offset)."""
    found = {}
    for b in storage.topics.bounds("segment"):
        fetched = storage.topics.read("segment", b.partition, b.start, 10_000)
        assert fetched.next_offset == b.end
        for r in fetched.records:
            assert r.key not in found, f"{r.key} is on the topic twice"
            found[r.key] = (r.partition, r.offset)
    return found


def test_a_segment_is_stored_once_and_read_both_as_a_record_and_as_its_topic_entry(
    storage: OpenStorage, node_config: NodeConfig
) -> None:
    install(storage)
    topics = record_topics(storage)
    items = segments(30)
    write(topics, storage, items[:20])
    write(topics, storage, items[20:])
    # Not readable on the topic before the round that makes it so.
    assert [b.end for b in storage.topics.bounds("segment")] == [0, 0]
    topics.run_once()

    bounds = storage.topics.bounds("segment")
    assert sum(b.end for b in bounds) == 30
    found = on_topic(storage)
    assert sorted(found) == sorted(s.segment_id for s in items)
    for b in bounds:  # offsets of a partition: 0, 1, 2, ... with no gap
        assert sorted(o for p, o in found.values() if p == b.partition) == list(range(b.end))
    first = storage.topics.read("segment", found["s7"][0], found["s7"][1], 1).records[0]
    assert first.key == "s7"
    assert first.value == {"key": "s7", **items[7].to_row()}

    # The same documents are the records the queries search.
    bucket = items[0].time_bucket
    stored = storage.records.query(SegmentRecord, bucket, bucket, {"service": "web"}, limit=100)
    assert sorted(s.segment_id for s in stored) == sorted(s.segment_id for s in items)
    if node_config.storage.kind.value == "elasticsearch":
        prefix = node_config.storage.es_index_prefix
        with Elasticsearch(node_config.storage.es_hosts) as es:
            es.indices.refresh(index=f"{prefix}_*")
            assert es.count(index=f"{prefix}_segment-*")["count"] == 30
            assert not es.indices.exists(index=f"{prefix}_topic_segment")


def test_a_bulk_refused_or_given_up_leaves_a_gap_readers_pass(storage: OpenStorage) -> None:
    install(storage)
    topics = record_topics(storage)
    items = segments(12)
    placement = topics.place(SEGMENTS, items[:6], 0)
    topics.abandoned(placement)  # its write was given up
    write(topics, storage, items[6:])
    topics.run_once()

    assert sum(b.end for b in storage.topics.bounds("segment")) == 12
    assert sorted(on_topic(storage)) == sorted(s.segment_id for s in items[6:])
    for b in storage.topics.bounds("segment"):
        fetched = storage.topics.read("segment", b.partition, 0, 10_000)
        assert fetched.next_offset == b.end
        assert fetched.records[0].offset > 0  # the first offsets of each partition are the gap


@pytest.mark.parametrize("node_config", ["elasticsearch"], indirect=True)
def test_records_whose_range_was_passed_over_are_written_again_above_the_end(
    storage: OpenStorage, node_config: NodeConfig
) -> None:
    """A writer stalls past its lease: another writer's round moves the end
    over its range. Its records, written late, are moved to a new range; each
    is stored once and readable below the end."""
    install(storage)
    cfg = node_config.storage
    short = RedisOffsetRanges(cfg.redis_url, cfg.redis_key_prefix, lease_s=0.3)
    slow, fast = record_topics(storage, short), record_topics(storage, short)
    stalled = segments(10, "slow")
    placement = slow.place(SEGMENTS, stalled, 0)
    time.sleep(0.5)  # the lease runs out
    write(fast, storage, segments(10, "fast"))
    fast.run_once()
    assert sum(b.end for b in storage.topics.bounds("segment")) == 20  # over the stalled range
    assert sorted(on_topic(storage)) == sorted(f"fast{i}" for i in range(10))

    storage.records.insert(SegmentRecord, stalled, placement.positions)  # the stalled write lands
    slow.written(placement)
    slow.run_once()  # finds its ranges passed over, and places the records again
    slow.run_once()  # writes them there and moves the end
    assert sum(b.end for b in storage.topics.bounds("segment")) == 30
    found = on_topic(storage)
    assert sorted(found) == sorted([f"fast{i}" for i in range(10)] + [f"slow{i}" for i in range(10)])
    before = zip(stalled, placement.positions or [], strict=True)
    assert all(found[s.segment_id] != (p.partition, p.offset) for s, p in before)
    with Elasticsearch(node_config.storage.es_hosts) as es:
        es.indices.refresh(index=f"{node_config.storage.es_index_prefix}_segment-*")
        assert es.count(index=f"{node_config.storage.es_index_prefix}_segment-*")["count"] == 20
    short.close()


def test_retention_drops_whole_days_and_the_start_moves_to_the_lowest_offset_left(
    storage: OpenStorage,
) -> None:
    install(storage)
    topics = record_topics(storage)
    now_ms = int(time.time() * 1000)
    old = segments(8, "old", now_ms - 5 * 86_400_000)
    write(topics, storage, old)
    write(topics, storage, segments(6, "new", now_ms))
    topics.run_once()

    removed = storage.topics.trim("segment", Retention(3 * 86_400, 1), now_ms)
    assert sum(removed.values()) == 8  # whole days: the size bound does not apply to records
    assert sorted(on_topic(storage)) == [f"new{i}" for i in range(6)]
    for b in storage.topics.bounds("segment"):
        left = [o for p, o in on_topic(storage).values() if p == b.partition]
        assert b == Bounds(b.partition, min(left, default=b.end), b.end)
        if b.start > 0:
            with pytest.raises(OffsetOutOfRange, match="retention removed the older ones"):
                storage.topics.read("segment", b.partition, b.start - 1, 10)
    old_bucket = old[0].time_bucket
    assert storage.records.query(SegmentRecord, old_bucket, old_bucket) == []
    day = Downsampling.DAY.bucket_of(now_ms)
    assert storage.topics.trim("segment", Retention(3 * 86_400, 1), now_ms) == {}
    assert day > Downsampling.DAY.of_minute(old_bucket)


def test_retention_never_moves_a_start_past_the_end(storage: OpenStorage) -> None:
    """Every old record goes while a writer still holds a range below newer
    records: the start stops at the end, which alone says what is readable."""
    install(storage)
    topics = record_topics(storage)
    now_ms = int(time.time() * 1000)
    write(topics, storage, segments(8, "old", now_ms - 5 * 86_400_000))
    topics.run_once()
    ends = [b.end for b in storage.topics.bounds("segment")]
    stalled = topics.place(SEGMENTS, segments(6, "slow", now_ms), 0)  # a writer still at work
    assert {r.partition for r in stalled.reservations} == {0, 1}
    write(topics, storage, segments(6, "new", now_ms))  # above the stalled ranges
    storage.topics.make_readable("segment")

    assert sum(storage.topics.trim("segment", Retention(3 * 86_400, 1), now_ms).values()) == 8
    assert [(b.start, b.end) for b in storage.topics.bounds("segment")] == [(e, e) for e in ends]
