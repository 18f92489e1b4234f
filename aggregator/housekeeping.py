"""Housekeeping: marks instances whose heartbeats stopped inactive."""

from __future__ import annotations

import logging
import threading
import time

from pipeline.inventory import ServiceInstanceInventory
from storage.api import InventoryDAO

log = logging.getLogger(__name__)


class HeartbeatExpiry:
    """Every ``interval_s`` marks instances with no heartbeat for ``expiry_s``
    inactive. Several aggregators may run it at once: each row is only changed
    if it did not change since it was found, so a fresh heartbeat always wins."""

    def __init__(self, dao: InventoryDAO, expiry_s: float, interval_s: float) -> None:
        self._dao = dao
        self.expiry_s = expiry_s
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> int:
        cutoff_ms = int((time.time() - self.expiry_s) * 1000)
        expired = self._dao.deactivate_stale(ServiceInstanceInventory, cutoff_ms)
        if expired:
            log.info(
                "%d service instances sent no heartbeat for %g s: marked inactive", expired, self.expiry_s
            )
        return expired

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="heartbeat-expiry", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.run_once()
            except Exception:
                log.exception("heartbeat expiry failed; trying again in %g s", self.interval_s)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
