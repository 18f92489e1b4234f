"""How far each consumer group is behind: per partition, the offset it last
committed and the records after it (the lag), read from the groups' shared
state and the topics' ends. ``skyoap consumer`` prints it; ``LagCollector``
exports it to Prometheus from a node's or a consumer's admin port, read when
scraped, so an alert on a stuck group needs no CLI."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from skyoap.consumer.group import Channel, load_group, split_channel
from skyoap.runtime.ratelimit import RateLimitedLog
from skyoap.storage.api import StateStore, TopicDAO

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PartitionLag:
    group: str
    topic: str
    partition: int
    committed: int | None
    """The last offset the group processed; None if it never committed."""
    end: int | None
    """The partition's end (the next offset written); None for a partition no longer there."""
    channel: Channel | None
    """The partition's place in the group: state, owner, version (None if never assigned)."""

    @property
    def lag(self) -> int | None:
        """Records after the commit (all of them when nothing was committed)."""
        if self.end is None:
            return None
        return self.end - (self.committed + 1 if self.committed is not None else 0)


def group_names(state: StateStore) -> list[str]:
    return sorted(n.removeprefix("group:") for n in state.names() if n.startswith("group:"))


def lags(topics: TopicDAO, state: StateStore, groups: list[str] | None = None) -> list[PartitionLag]:
    """The lag of every partition each of ``groups`` (every group if None) was
    assigned or committed."""
    ends: dict[str, dict[int, int]] = {}
    out = []
    for group in group_names(state) if groups is None else groups:
        found = load_group(state, group)
        if found is None:
            continue
        channels, committed = found.channels, found.committed
        for name in sorted(set(channels) | set(committed), key=split_channel):
            topic, partition = split_channel(name)
            if topic not in ends:
                ends[topic] = {b.partition: b.end for b in topics.bounds(topic)}
            value = committed.get(name)
            out.append(
                PartitionLag(
                    group, topic, partition, value, ends[topic].get(partition), channels.get(name),
                )
            )  # fmt: skip
    return out


class LagCollector(Collector):
    """``skyoap_consumer_lag`` and ``skyoap_consumer_committed_offset``, by
    group, topic and partition, read from storage at each scrape; a scrape
    when they cannot be read shows neither (and logs why, at most every 10 s)."""

    def __init__(self, read: Callable[[], list[PartitionLag]]) -> None:
        self._read = read
        self._log = RateLimitedLog(log)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        labels = ["group", "topic", "partition"]
        lag = GaugeMetricFamily(
            "skyoap_consumer_lag", "records a consumer group has not committed yet", labels=labels
        )
        committed = GaugeMetricFamily(
            "skyoap_consumer_committed_offset", "the last offset a consumer group committed", labels=labels
        )
        try:
            found = self._read()
        except Exception as e:  # a scrape shows the node's other series whatever fails here
            self._log.warning("consumer-lag", "cannot read the consumer groups' lag: %r", e)
            return
        for p in found:
            values = [p.group, p.topic, str(p.partition)]
            if p.lag is not None:
                lag.add_metric(values, p.lag)
            if p.committed is not None:
                committed.add_metric(values, p.committed)
        yield lag
        yield committed

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter(())  # read only when scraped, not when registered
