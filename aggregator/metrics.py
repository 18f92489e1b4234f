"""The metrics persistent worker (L2 of metrics): merges what receivers send in
memory, and every persistence period adds it to the stored values of its
minute, hour and day (downsampling) in bulk.

What is merged here is a delta: each delta is added to a stored value exactly
once. A delta storage did not take (an outage, a row changed meanwhile) stays
for the next period, per level, so that a level already written never gets it
twice.
"""

from __future__ import annotations

import functools
import logging
import threading

from aggregator.publish import TopicPublisher
from model.metrics import Downsampling, Metrics, merge_into
from model.topics import Topic
from runtime.buffer import BufferSpec
from runtime.instruments import Instruments
from runtime.pools import DrainPool
from runtime.ratelimit import RateLimitedLog
from runtime.worker import BufferedWorker
from storage.api import MetricsDAO, StorageError

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 5
"""Read-merge-write rounds per persistence for rows another writer changed."""


class MetricsPersistentWorker(BufferedWorker[Metrics]):
    def __init__(
        self,
        worker_id: int,
        name: str,
        model: type[Metrics],
        dao: MetricsDAO,
        pool: DrainPool,
        instruments: Instruments,
        buffer: BufferSpec,
        max_pending: int,
        publisher: TopicPublisher | None = None,
    ) -> None:
        """``max_pending`` bounds the keys held per level while storage does
        not take them; past it, the oldest deltas are dropped and counted.
        ``publisher`` appends every row written to the metrics topic."""
        super().__init__(worker_id, name, pool, instruments, buffer)
        self.model = model
        self._dao = dao
        self.max_pending = max_pending
        self._publisher = publisher
        self._pending: dict[Downsampling, dict[str, Metrics]] = {level: {} for level in Downsampling}
        self._lock = threading.Lock()
        self._persisting = threading.Lock()
        pending = instruments.gauge(
            "skyoap_metrics_pending", "metric rows an L2 worker holds for storage", ["worker", "level"]
        )
        for level in Downsampling:
            pending.labels(worker=name, level=level.value).set_function(functools.partial(self._held, level))
        self._error_log = RateLimitedLog(log)

    def _held(self, level: Downsampling) -> int:
        return len(self._pending[level])

    def process(self, batch: list[Metrics]) -> None:
        with self._lock:
            merge_into(self._pending[Downsampling.MINUTE], batch)

    def persist(self) -> None:
        """Adds every held delta to storage; called every persistence period
        and once more on close."""
        with self._persisting, self.series.persist_seconds.time():
            with self._lock:
                work, self._pending = self._pending, {level: {} for level in Downsampling}
            for level in (Downsampling.HOUR, Downsampling.DAY):
                merge_into(work[level], (m.downsampled(level) for m in work[Downsampling.MINUTE].values()))
            for level, items in work.items():
                left = self._store(level, items) if items else {}
                if left:
                    self._hold(level, left)

    def _store(self, level: Downsampling, items: dict[str, Metrics]) -> dict[str, Metrics]:
        """Adds ``items`` to their stored rows; returns those not written."""
        try:
            for _ in range(MAX_ATTEMPTS):
                stored = self._dao.get_many(self.model, level, list(items))
                rows = [
                    (stored.get(k), stored[k].item.combine(v) if k in stored else v) for k, v in items.items()
                ]
                with self.series.write_seconds.time():
                    outcome = self._dao.put(self.model, level, rows)
                if outcome.failed:
                    self.series.dropped("refused").inc(len(outcome.failed))
                    key, reason = next(iter(outcome.failed.items()))
                    self._error_log.error(
                        f"{self.name}-refused",
                        "%s: storage refused %d %s rows, e.g. %r: %s",
                        self.name, len(outcome.failed), level.value, key, reason,
                    )  # fmt: skip
                self.series.stored("write").inc(len(rows) - len(outcome.retry) - len(outcome.failed))
                if self._publisher is not None:
                    unwritten = {*outcome.retry, *outcome.failed}
                    written = (m for _, m in rows if m.key() not in unwritten)
                    self._publisher.publish(Topic.METRICS, written, model=self.model.MODEL, level=level.value)
                items = {k: items[k] for k in outcome.retry}
                if not items:
                    break
        except StorageError as e:
            self._error_log.error(
                f"{self.name}-storage",
                "%s: %d %s rows kept for the next period: %s",
                self.name, len(items), level.value, e,
            )  # fmt: skip
        return items

    def _hold(self, level: Downsampling, left: dict[str, Metrics]) -> None:
        with self._lock:
            pending = self._pending[level]
            merge_into(pending, left.values())
            excess = len(pending) - self.max_pending
            if excess > 0:
                for k in list(pending)[:excess]:
                    del pending[k]
                self.series.dropped("too_many_pending").inc(excess)
                self._error_log.error(
                    f"{self.name}-full",
                    "%s: more than %d %s rows wait for storage; %d dropped",
                    self.name, self.max_pending, level.value, excess,
                )  # fmt: skip
