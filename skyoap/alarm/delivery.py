"""Alarm notices on their way to the hooks: taken into a bounded queue at
once (the evaluation that gives them never waits on a hook), and tried again
with growing pauses while the hook is down, slow or answers 5xx or 429. A
send is done at the first 2xx answer: a hook that failed twice, then took
it, gets it once. Each request carries the firing's id (in the payload), so
that a hook that took a request whose answer was lost can tell the resend
for what it is.

Each target (a hook's configured URL) has a queue and a sending thread of its
own, so a hook that is slow or hangs delays only its own notices; each send
is bounded as a whole (``posting.py``). A target's thread ends once its
queue has been empty ``LANE_IDLE_S``, and starts again with its next notice.

What is dropped is counted (``skyoap_alarm_dropped_total{reason}``, the
reasons in ``Drop``)."""

from __future__ import annotations

import enum
import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from skyoap.alarm.messages import Request
from skyoap.alarm.posting import Answer, Posted, post
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.ratelimit import RateLimitedLog
from skyoap.runtime.retry import RetryPolicy

log = logging.getLogger(__name__)

RETRIES = RetryPolicy(attempts=8, first_delay_s=1.0, multiplier=2.0, max_delay_s=60.0)
"""Eight tries over about two minutes."""
LANE_IDLE_S = 300.0
"""How long a target's thread waits for a notice before it ends."""


class Drop(enum.Enum):
    """Why a notice was given up."""

    FULL = "full"
    """Its target's queue held ``max_queued``."""
    CLOSING = "closing"
    """The node closed first (its bucket's outbox keeps it for the next node)."""
    REFUSED = "refused"
    """A 4xx other than 429, or a request that cannot be made."""
    REDIRECTED = "redirected"
    """A 3xx: redirects are not followed."""
    GAVE_UP = "gave_up"
    """Every try failed."""


_DROP_OF = {Answer.FAILED: Drop.GAVE_UP, Answer.REFUSED: Drop.REFUSED, Answer.REDIRECTED: Drop.REDIRECTED}


@dataclass(order=True)
class _Due:
    at: float
    order: int
    request: Request = field(compare=False)
    kind: str = field(compare=False)
    settled: Callable[[], None] = field(compare=False)
    failures: int = field(compare=False, default=0)


@dataclass
class _Lane:
    """One target's notices, sent one at a time by its own thread."""

    target: str
    wake: threading.Condition
    due: list[_Due] = field(default_factory=list)
    sending: bool = False
    thread: threading.Thread | None = None

    @property
    def held(self) -> int:
        return len(self.due) + self.sending


class Delivery:
    def __init__(
        self,
        instruments: Instruments,
        max_queued: int = 10_000,
        timeout_s: float = 5.0,
        retries: RetryPolicy = RETRIES,
    ) -> None:
        """``max_queued`` notices at most wait for each target (the one being
        sent counts); each send takes ``timeout_s`` at most, all of it."""
        self._max, self._timeout_s, self._retries = max_queued, timeout_s, retries
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        """Notified when a send ends or the queues are emptied."""
        self._lanes: dict[str, _Lane] = {}
        self._order = itertools.count()
        self._names = itertools.count()
        self._started = self._closing = False
        self._log = RateLimitedLog(log)
        self._sent = instruments.counter(
            "skyoap_alarm_sent_total", "alarm notices a hook took, by kind", ["kind"]
        )
        self._dropped = instruments.counter(
            "skyoap_alarm_dropped_total", "alarm notices given up, by reason", ["kind", "reason"]
        )
        self._tried_again = instruments.counter(
            "skyoap_alarm_retried_total", "alarm notices sent again after a failed try", ["kind"]
        )
        instruments.gauge("skyoap_alarm_queued", "alarm notices waiting to be sent").set_function(self._held)

    def start(self) -> None:
        with self._lock:
            self._started = True
            for lane in self._lanes.values():
                self._start(lane)

    def send(self, kind: str, request: Request, settled: Callable[[], None] = lambda: None) -> bool:
        """Queues ``request`` to a hook of ``kind``; False when it was dropped
        (its target's queue full, or closing). ``settled`` is called once it is
        done with: taken, refused, given up or dropped for a full queue; not
        when it is dropped because the node closes (its notice is sent again
        from its bucket's outbox)."""
        with self._lock:
            if self._closing:
                self._dropped.labels(kind, Drop.CLOSING.value).inc()
                return False
            lane = self._lanes.get(request.lane)
            if lane is None:
                lane = self._lanes[request.lane] = _Lane(request.lane, threading.Condition(self._lock))
                if self._started:
                    self._start(lane)
            full = lane.held >= self._max
            if not full:
                heapq.heappush(lane.due, _Due(time.monotonic(), next(self._order), request, kind, settled))
                lane.wake.notify()
        if full:
            self._dropped.labels(kind, Drop.FULL.value).inc()
            settled()
        return not full

    def idle(self) -> bool:
        """Whether nothing is queued or being sent."""
        return self._held() == 0

    def close(self, timeout_s: float = 5.0) -> None:
        """Sends what is due within ``timeout_s``; what is left is dropped.
        Idempotent."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while any(lane.held for lane in self._lanes.values()) and time.monotonic() < deadline:
                self._changed.wait(deadline - time.monotonic())
            self._closing = True
            threads = []
            for lane in self._lanes.values():
                for due in lane.due:
                    self._dropped.labels(due.kind, Drop.CLOSING.value).inc()
                lane.due.clear()
                lane.wake.notify_all()
                if lane.thread is not None:
                    threads.append(lane.thread)
        # A send under way ends by its own deadline.
        joined_by = time.monotonic() + self._timeout_s + 1
        for t in threads:
            t.join(max(0.0, joined_by - time.monotonic()))

    def _held(self) -> int:
        with self._lock:
            return sum(lane.held for lane in self._lanes.values())

    def _start(self, lane: _Lane) -> None:
        # Named by number: a target's URL may hold its secret.
        lane.thread = threading.Thread(
            target=self._run, args=(lane,), name=f"alarm-hook-{next(self._names)}", daemon=True
        )
        lane.thread.start()

    def _run(self, lane: _Lane) -> None:
        while (due := self._next(lane)) is not None:
            try:
                posted = post(due.request.url, due.request.body, due.request.headers, self._timeout_s)
            except Exception as e:  # not the hook's doing: counted as a failed try
                log.exception("sending an alarm notice failed")
                posted = Posted(Answer.FAILED, repr(e))
            retry_at = self._judge(due, posted)
            if retry_at is None:
                due.settled()
            with self._lock:
                lane.sending = False
                if retry_at is not None:
                    if self._closing:
                        self._dropped.labels(due.kind, Drop.CLOSING.value).inc()
                    else:
                        due.at = retry_at
                        heapq.heappush(lane.due, due)
                self._changed.notify_all()

    def _next(self, lane: _Lane) -> _Due | None:
        """The lane's next notice, once it is due; None when closing, or when
        the lane was idle ``LANE_IDLE_S`` (it is then removed)."""
        idle_since = time.monotonic()
        with self._lock:
            while not self._closing:
                now = time.monotonic()
                if lane.due and lane.due[0].at <= now:
                    lane.sending = True
                    return heapq.heappop(lane.due)
                if lane.due:
                    lane.wake.wait(lane.due[0].at - now)
                elif now - idle_since >= LANE_IDLE_S:
                    del self._lanes[lane.target]
                    return None
                else:
                    lane.wake.wait(LANE_IDLE_S - (now - idle_since))
            return None

    def _judge(self, due: _Due, posted: Posted) -> float | None:
        """Counts how the send ended; when to try again, or None: done with."""
        if posted.answer is Answer.TAKEN:
            self._sent.labels(due.kind).inc()
            return None
        due.failures += 1
        attempts = self._retries.attempts or 0
        if posted.answer is Answer.FAILED and not (attempts and due.failures >= attempts):
            self._tried_again.labels(due.kind).inc()
            return time.monotonic() + self._retries.delay_s(due.failures)
        drop = _DROP_OF[posted.answer]
        self._dropped.labels(due.kind, drop.value).inc()
        tries = f"{due.failures} {'try' if due.failures == 1 else 'tries'}"
        self._log.warning(
            f"{due.kind}-{drop.value}",
            "an alarm notice was dropped (%s, %s): %s",
            drop.value,
            tries,
            posted.why,
        )
        return None
