"""Housekeeping: marks instances whose heartbeats stopped inactive."""

from __future__ import annotations

import logging
import time

from pipeline.inventory import ServiceInstanceInventory
from pipeline.periodic import Periodic
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
        self._task = Periodic(
            "heartbeat-expiry", interval_s, self.run_once, "marking silent instances inactive"
        )

    def run_once(self) -> int:
        cutoff_ms = int((time.time() - self.expiry_s) * 1000)
        expired = self._dao.deactivate_stale(ServiceInstanceInventory, cutoff_ms)
        if expired:
            log.info(
                "%d service instances sent no heartbeat for %g s: marked inactive", expired, self.expiry_s
            )
        return expired

    def start(self) -> None:
        self._task.start()

    def close(self) -> None:
        self._task.close()
