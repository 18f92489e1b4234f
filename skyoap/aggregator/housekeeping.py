"""Housekeeping: marks instances whose heartbeats stopped inactive, trims
the topics of rows to their retention, and removes what outlived its time to
live."""

from __future__ import annotations

import dataclasses
import datetime
import logging
import sys
import time
from collections.abc import Callable, Sequence

from skyoap.aggregator.topics import RowTopics, Unpublished
from skyoap.model.inventory import EndpointInventory, ServiceInstanceInventory, ServiceInventory
from skyoap.model.metrics import METRICS_TYPES, Downsampling, EndpointMetrics
from skyoap.model.records import RECORD_MODELS
from skyoap.model.topics import Retention, Table, Topic
from skyoap.runtime import clock
from skyoap.runtime.periodic import Periodic
from skyoap.storage.api import I, InventoryDAO, MetricsDAO, SequenceAllocator, Stored, TopicDAO
from skyoap.vocabulary.ttl import TimesToLive

log = logging.getLogger(__name__)

DAY_MS = 86_400_000


class HeartbeatExpiry:
    """Every ``interval_s`` marks instances with no heartbeat for ``expiry_s``
    inactive. Several aggregators may run it at once: each row is only changed
    if it did not change since it was found, so a fresh heartbeat always wins."""

    def __init__(
        self, dao: InventoryDAO, expiry_s: float, interval_s: float, topics: RowTopics | None = None
    ) -> None:
        """``topics`` publishes every row marked inactive."""
        self._dao = dao
        self._topics = topics or Unpublished()
        self.expiry_s = expiry_s
        self.interval_s = interval_s
        self._task = Periodic(
            "heartbeat-expiry", interval_s, self.run_once, "marking silent instances inactive"
        )

    def run_once(self) -> int:
        cutoff_ms = int((time.time() - self.expiry_s) * 1000)
        model = ServiceInstanceInventory
        changes = [(s, dataclasses.replace(s.item, active=False)) for s in self._dao.stale(model, cutoff_ms)]
        if not changes:
            return 0
        with self._topics.writing(Table(model), changes) as placed:
            placed.refused = set(self._dao.update(model, changes, placed.positions))
        expired = len(changes) - len(placed.refused)
        if expired:
            log.info(
                "%d service instances sent no heartbeat for %g s: marked inactive", expired, self.expiry_s
            )
        return expired

    def start(self) -> None:
        self._task.start()

    def close(self, timeout_s: float = 5.0) -> None:
        self._task.close(timeout_s)


class TopicRetention:
    """Every ``interval_s`` removes what the retention of each topic of rows
    (inventory, metrics) no longer keeps; the topics of records keep what
    storage keeps (``TimeToLive``). Several aggregators may run it at once:
    bounds move only by versioned writes, and never back."""

    def __init__(self, dao: TopicDAO, retention: Retention, interval_s: float) -> None:
        self._dao = dao
        self.retention = retention
        self._task = Periodic(
            "topic-retention", interval_s, self.run_once, "trimming topics to their retention"
        )

    def run_once(self) -> dict[str, int]:
        now_ms = clock.now_ms()
        removed = {}
        for topic in (t for t in Topic if t.value not in RECORD_MODELS):
            by_partition = self._dao.trim(topic.value, self.retention, now_ms)
            if by_partition:
                removed[topic.value] = sum(by_partition.values())
                log.info("topic %s: retention removed %s records", topic.value, by_partition)
        return removed

    def start(self) -> None:
        self._task.start()

    def close(self, timeout_s: float = 5.0) -> None:
        self._task.close(timeout_s)


class TimeToLive:
    """Every ``interval_s`` removes what outlived its time to live: the
    records (with their topics), the metrics of each level, inactive instances
    and unused endpoints. One aggregator at a time does it, under the global
    lock; ``clock`` gives the time in seconds since the epoch.

    A removed row's last version stays on the inventory topic until its
    retention (it is kept in the history first); metrics rows leave the metrics
    topic with their day."""

    SCOPE = "housekeeping"
    """The global lock's scope."""

    def __init__(
        self,
        ttl: TimesToLive,
        inventory: InventoryDAO,
        metrics: MetricsDAO,
        topics: TopicDAO,
        lock: SequenceAllocator,
        interval_s: float,
        row_topics: RowTopics | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.ttl = ttl
        self._inventory = inventory
        self._metrics = metrics
        self._topics = topics
        self._lock = lock
        self._row_topics = row_topics or Unpublished()
        self._clock = clock
        self._task = Periodic(
            "time-to-live", interval_s, self.run_once, "removing data past its time to live"
        )

    def run_once(self) -> dict[str, int]:
        """What was removed: how many of each kind of data (records, rows), by name."""
        now_ms = int(self._clock() * 1000)
        removed: dict[str, int] = {}
        with self._lock.lock(self.SCOPE):
            keep = Retention(self.ttl.records_days * DAY_MS / 1000, sys.maxsize)
            for name in RECORD_MODELS:
                removed[name] = sum(self._topics.trim(name, keep, now_ms).values())
            for model in METRICS_TYPES:
                for level in Downsampling:
                    keep_from = _day(now_ms, self.ttl.metrics_days[level])
                    removed[f"{model.MODEL}_{level.value}"] = self._metrics.expire(model, level, keep_from)
            silent_since = now_ms - self.ttl.inactive_instance_days * DAY_MS
            instances = self._inventory.stale(ServiceInstanceInventory, silent_since, active=False)
            removed[ServiceInstanceInventory.MODEL] = self._remove(ServiceInstanceInventory, instances)
            removed[EndpointInventory.MODEL] = self._remove(EndpointInventory, self._unused_endpoints(now_ms))
        removed = {name: n for name, n in removed.items() if n}
        if removed:
            log.info("time to live removed %s", removed)
        return removed

    def _unused_endpoints(self, now_ms: int) -> list[Stored[EndpointInventory]]:
        """Endpoints registered before the endpoints' time to live that no
        daily metric of that time names."""
        cutoff_ms = now_ms - self.ttl.unused_endpoint_days * DAY_MS
        registered = self._inventory.stale(EndpointInventory, cutoff_ms, active=None)
        if not registered:
            return []
        first_day = Downsampling.DAY.bucket_of(cutoff_ms)
        used = self._metrics.distinct(EndpointMetrics, Downsampling.DAY, first_day, ("service", "endpoint"))
        services: dict[int, ServiceInventory | None] = {}
        unused = []
        for row in registered:
            sid = row.item.service_id
            if sid not in services:
                services[sid] = self._inventory.get_by_sequence(ServiceInventory, sid)
            service = services[sid]
            if service is None or (service.name, row.item.name) not in used:
                unused.append(row)
        return unused

    def _remove(self, model: type[I], rows: Sequence[Stored[I]]) -> int:
        """Removes ``rows`` unless they changed since they were read, their
        versions kept on the inventory topic first; how many went."""
        if not rows:
            return 0
        self._row_topics.keep(Table(model), rows)
        return len(rows) - len(self._inventory.remove(model, rows))

    def start(self) -> None:
        self._task.start()

    def close(self, timeout_s: float = 5.0) -> None:
        self._task.close(timeout_s)


def _day(now_ms: int, days_before: int) -> datetime.date:
    """The day (UTC) ``days_before`` days before ``now_ms``'s."""
    today = datetime.datetime.fromtimestamp(now_ms / 1000, datetime.UTC).date()
    return today - datetime.timedelta(days=days_before)
