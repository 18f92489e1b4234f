"""Housekeeping: marks instances whose heartbeats stopped inactive, and trims
topics to their retention."""

from __future__ import annotations

import dataclasses
import logging
import time

from aggregator.topics import RowTopics, Unpublished
from model.inventory import ServiceInstanceInventory
from model.topics import Retention, Table, Topic
from runtime.periodic import Periodic
from storage.api import InventoryDAO, TopicDAO

log = logging.getLogger(__name__)


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
    """Every ``interval_s`` removes what each topic's retention no longer
    keeps. Several aggregators may run it at once: bounds move only by
    versioned writes, and never back."""

    def __init__(self, dao: TopicDAO, retention: Retention, interval_s: float) -> None:
        self._dao = dao
        self.retention = retention
        self._task = Periodic(
            "topic-retention", interval_s, self.run_once, "trimming topics to their retention"
        )

    def run_once(self) -> dict[str, int]:
        now_ms = int(time.time() * 1000)
        removed = {}
        for topic in Topic:
            by_partition = self._dao.trim(topic.value, self.retention, now_ms)
            if by_partition:
                removed[topic.value] = sum(by_partition.values())
                log.info("topic %s: retention removed %s records", topic.value, by_partition)
        return removed

    def start(self) -> None:
        self._task.start()

    def close(self, timeout_s: float = 5.0) -> None:
        self._task.close(timeout_s)
