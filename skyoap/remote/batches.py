"""The batches of one remote client: what it took from its queue and has not
sent, what failed streams carried (sent again first, with their numbers), and
what the stream under way carries until the target confirms it."""

from __future__ import annotations

import itertools
import sys
import threading
from collections import deque

from skyoap.model.stream import StreamData
from skyoap.runtime.batching import BatchPolicy
from skyoap.runtime.buffer import BufferQueue

BATCH = BatchPolicy(max_items=500, max_bytes=512 * 1024)
"""One RemoteBatch: far below any node's message limit."""

Item = tuple[int, StreamData]
"""An item and the id of the worker it goes to on the target."""
Batch = tuple[int, list[Item]]
"""A batch's number and its items."""


class Outbox:
    """One client's batches between its queue and its target. gRPC's request
    thread takes batches while the client's thread ends streams, hence one
    lock over all of it."""

    def __init__(self, queue: BufferQueue[Item]) -> None:
        self._queue = queue
        self._pending: deque[Item] = deque()
        """Taken from the queue, not yet sent."""
        self._resend: deque[Batch] = deque()
        """Batches of failed streams, to send again first."""
        self._unacked: list[Batch] = []
        """Batches of the stream under way."""
        self._unacked_resent = 0
        """How many of them (the first ones) failed streams carried before."""
        self._open = False
        """Whether the stream under way may take more batches."""
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()

    def held(self) -> int:
        """Items taken from the queue and not yet confirmed."""
        with self._lock:
            return len(self._pending) + sum(len(items) for _, items in (*self._resend, *self._unacked))

    def has_work(self, leaving: bool) -> bool:
        """Whether there is anything to send (for a leaving client: to send again)."""
        if leaving:
            return bool(self._resend)
        return bool(self._resend or self._pending or self._queue.depth())

    def open(self) -> None:
        """A stream begins: it takes batches until it ends."""
        with self._lock:
            self._open, self._unacked_resent = True, 0

    def take(self, leaving: bool) -> Batch | None:
        """The next batch: one of a failed stream, else a new one of up to
        ``BATCH.max_items`` items of about ``BATCH.max_bytes`` at most; None
        when there is none or the stream ended (a ``leaving`` client only sends
        again)."""
        with self._lock:
            if not self._open:
                return None
            if self._resend:
                batch = self._resend.popleft()
                self._unacked_resent += 1
            elif leaving:
                return None
            else:
                items = self._new_batch()
                if not items:
                    return None
                batch = (next(self._numbers), items)
            self._unacked.append(batch)
            return batch

    def _new_batch(self) -> list[Item]:
        if not self._pending:
            self._pending.extend(self._queue.drain(0, BATCH.max_items))
        items: list[Item] = []
        size = 0
        max_bytes = BATCH.max_bytes or sys.maxsize
        while self._pending and len(items) < BATCH.max_items and size < max_bytes:
            entry = self._pending.popleft()
            items.append(entry)
            size += entry[1].size_hint()
        return items

    def end(self, failed: bool) -> None:
        """No batch joins the stream any more (gRPC may still ask for one after
        the call ended); a failed stream's batches are to be sent again first."""
        with self._lock:
            self._open = False
            if failed:
                self._resend.extendleft(reversed(self._unacked))
            self._unacked.clear()

    def readdress(self) -> int:
        """The target restarted and took none of the stream under way: its
        batches that no failed stream carried before go to the new run as new
        items; returns how many items failed streams carried (to the earlier
        run, which may have taken them), which are dropped."""
        with self._lock:
            self._open = False
            carried_before = [*self._unacked[: self._unacked_resent], *self._resend]
            never_taken = [entry for _, items in self._unacked[self._unacked_resent :] for entry in items]
            self._pending.extendleft(reversed(never_taken))
            self._unacked.clear()
            self._resend.clear()
        return sum(len(items) for _, items in carried_before)

    def empty(self) -> tuple[list[Item], list[Item]]:
        """Empties the outbox and the closed queue: returns the items never
        sent and those sent but not confirmed."""
        with self._lock:
            never_sent = list(self._pending) + self._queue.drain(0, self._queue.capacity)
            unconfirmed = [item for _, items in (*self._resend, *self._unacked) for item in items]
            self._pending.clear()
            self._resend.clear()
            self._unacked.clear()
        return never_sent, unconfirmed
