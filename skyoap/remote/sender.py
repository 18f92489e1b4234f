"""The remote sender: routes each L1 result to the node that owns it, parks
items while no node takes them (in the node's memory budget, so that a long
wait sheds agents rather than dropping what they sent), and re-routes what a
departed node's client still held."""

from __future__ import annotations

import logging
import threading
from collections import deque

from skyoap.model.stream import StreamData
from skyoap.remote.manager import RemoteClientManager
from skyoap.remote.selector import Selector
from skyoap.runtime.budget import HeldBytes, MemoryBudget, memory_size
from skyoap.runtime.buffer import BufferClosed
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.jobs import BackgroundJobs
from skyoap.runtime.ratelimit import RateLimitedLog

log = logging.getLogger(__name__)

MAX_ROUTING_ATTEMPTS = 5


class RemoteSender:
    def __init__(
        self, clients: RemoteClientManager, instruments: Instruments, budget: MemoryBudget | None = None
    ) -> None:
        """Parked items count against ``budget``."""
        self._clients = clients
        self._selectors: dict[int, Selector] = {}
        self._parked: deque[tuple[int, StreamData]] = deque()
        self._parked_bytes = HeldBytes()
        self._park_lock = threading.Lock()
        if budget is not None:
            budget.hold(self._parked_bytes)
        self._parked_total = instruments.counter(
            "skyoap_remote_parked_total", "items held because no node took L1 results at the time"
        )
        self._rerouted = instruments.counter(
            "skyoap_remote_rerouted_total", "items a departed node's client still held, sent to the new owner"
        )
        instruments.gauge(
            "skyoap_remote_parked_items", "items held until a node takes L1 results"
        ).set_function(lambda: len(self._parked))
        self._warn = RateLimitedLog(log)
        self._jobs = BackgroundJobs("remote-sender")
        clients.on_change = lambda: self._jobs.submit("flushing parked items", self.flush_parked)

    def route_with(self, next_worker_id: int, selector: Selector) -> None:
        """Items for worker ``next_worker_id`` are routed by ``selector``."""
        self._selectors[next_worker_id] = selector

    def send(self, next_worker_id: int, item: StreamData) -> None:
        selector = self._selectors[next_worker_id]
        for _ in range(MAX_ROUTING_ATTEMPTS):
            clients = self._clients.clients  # one read: the list in use right now
            if not clients:
                self._park(next_worker_id, item)
                return
            try:
                selector.select(item.routing_key(), clients).push(next_worker_id, item)
                return
            except BufferClosed:
                continue  # that node just left; the list has been swapped, route again
        self._park(next_worker_id, item)

    def reroute(self, items: list[tuple[int, StreamData]]) -> None:
        """Sends again, from a thread of its own, what a departed node's client
        held: the caller is the refresh that swapped the client list, and
        sending may wait for room in a busy client's queue."""

        def send_all() -> None:
            for next_worker_id, item in items:
                self.send(next_worker_id, item)
            self._rerouted.inc(len(items))

        self._jobs.submit("re-routing a departed node's items", send_all)

    def start(self) -> None:
        self._jobs.start()

    def close(self, timeout_s: float = 5.0) -> None:
        """Finishes the re-routing and flushing under way, for up to ``timeout_s``."""
        self._jobs.close(timeout_s)

    def _park(self, next_worker_id: int, item: StreamData) -> None:
        with self._park_lock:
            self._parked.append((next_worker_id, item))
            self._parked_bytes.add(memory_size([item]))
        self._parked_total.inc()
        if self._clients.clients:  # a node appeared while this item was on its way here
            self._jobs.submit("flushing parked items", self.flush_parked)
        self._warn.warning("no-target", "no node takes L1 results right now: holding items until one does")

    def flush_parked(self) -> None:
        """Sends what was parked, now that the client list changed."""
        if not self._clients.clients:
            return
        with self._park_lock:
            parked, self._parked = self._parked, deque()
            self._parked_bytes.set(0)
        for next_worker_id, item in parked:
            self.send(next_worker_id, item)
