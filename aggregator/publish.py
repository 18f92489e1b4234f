"""The topic publisher: the inventory and metric rows L2 has just stored are
appended to their topics as well, so consumers can follow them by offset
(``model/topics.py``). Segments and logs need none: the write that stores
them publishes them (``aggregator/record_topics.py``).

Publishing happens after the store succeeded, in the persisting thread. A row
stored twice (a metric merged again) is published twice, and consumers see
the latest value last. A node that dies
between the store and the append, or an append whose retries run out, leaves
the row stored and not published (the second is counted).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable

from model.stream import StreamData
from model.topics import Entry, Topic, partition_of
from runtime.batching import BatchPolicy
from runtime.instruments import Instruments
from runtime.ratelimit import RateLimitedLog
from runtime.retry import STORAGE_WRITES
from storage.api import StorageError, TopicDAO

log = logging.getLogger(__name__)

APPEND = BatchPolicy(max_items=1000)
"""Records one append carries at most."""


class TopicPublisher:
    def __init__(self, dao: TopicDAO, partitions: dict[Topic, int], instruments: Instruments) -> None:
        """``partitions``: each topic's partition count, as storage has it."""
        self._dao = dao
        self._partitions = partitions
        self._closing = threading.Event()
        published = instruments.counter(
            "skyoap_topic_published_total", "records published on a topic", ["topic"]
        )
        dropped = instruments.counter(
            "skyoap_topic_dropped_total", "stored records storage did not take into their topic", ["topic"]
        )
        self._published = {t: published.labels(topic=t.value) for t in Topic}
        self._dropped = {t: dropped.labels(topic=t.value) for t in Topic}
        self._error_log = RateLimitedLog(log)

    def publish(self, topic: Topic, items: Iterable[StreamData], **extra: object) -> None:
        """Appends the stored ``items`` to ``topic``, each keyed by what routes
        it (so one entity's changes stay in one partition, in order) and valued
        by its row and ``extra``."""
        now_ms = int(time.time() * 1000)
        by_partition: dict[int, list[Entry]] = {}
        for item in items:
            e = Entry(item.routing_key(), {"key": item.key(), **extra, **item.to_row()}, now_ms)
            by_partition.setdefault(partition_of(e.key, self._partitions[topic]), []).append(e)
        for partition, entries in by_partition.items():
            for chunk in APPEND.chunks(entries):
                self._append(topic, partition, list(chunk))

    def _append(self, topic: Topic, partition: int, entries: list[Entry]) -> None:
        try:
            STORAGE_WRITES.call(lambda: self._dao.append(topic.value, partition, entries), self._closing)
        except StorageError as e:
            self._dropped[topic].inc(len(entries))
            self._error_log.error(
                f"{topic.value}-{partition}", "%d records not appended to %s/%d: %s",
                len(entries), topic.value, partition, e,
            )  # fmt: skip
            return
        self._published[topic].inc(len(entries))

    def interrupt_retries(self) -> None:
        """Stops waiting to retry (the node closes): what storage does not take
        at once is dropped."""
        self._closing.set()
