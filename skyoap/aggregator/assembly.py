"""An aggregator's own parts, built from its sections: the topics what L2
stores is published on, and its periodic housekeeping."""

from __future__ import annotations

from collections.abc import Iterator

from skyoap.aggregator.config import TopicsConfig, TtlConfig
from skyoap.aggregator.housekeeping import HeartbeatExpiry, TimeToLive, TopicRetention
from skyoap.aggregator.topics import Topics
from skyoap.model.topics import Retention, Topic
from skyoap.runtime.budget import MemoryBudget
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.lifecycle import Component
from skyoap.storage.select import OpenStorage


def publishing(
    config: TopicsConfig, storage: OpenStorage, instruments: Instruments, budget: MemoryBudget
) -> Topics | None:
    """What publishes L2's writes on the topics; None with ``--publish-topics false``."""
    if not config.publish:
        return None
    # A topic keeps the partition count it was created with.
    partitions = {t: len(storage.topics.bounds(t.value)) for t in Topic}
    topics = Topics(
        storage.topics, storage.records, storage.offsets, partitions, instruments, config.commit_interval_s
    )
    budget.hold(topics.held)
    return topics


def housekeeping(
    topics_config: TopicsConfig,
    ttl: TtlConfig,
    heartbeat_expiry_s: float,
    interval_s: float,
    storage: OpenStorage,
    topics: Topics | None,
) -> Iterator[Component]:
    """Heartbeat expiry, topic retention and time to live, each every ``interval_s``
    (time to live every ``--ttl-interval-s``)."""
    yield HeartbeatExpiry(storage.inventory, heartbeat_expiry_s, interval_s, topics)
    retention = Retention(topics_config.retention_s, topics_config.retention_records)
    yield TopicRetention(storage.topics, retention, interval_s)
    yield TimeToLive(
        ttl.ttl(),
        storage.inventory,
        storage.metrics,
        storage.topics,
        storage.sequences,
        ttl.interval_s,
        topics,
    )
