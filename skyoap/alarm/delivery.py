"""Alarm notices on their way to the hooks: taken into a bounded queue at
once (the evaluation that gives them never waits on a hook), sent by a few
threads with a timeout each, and tried again with growing pauses while the
hook is down, slow or answers 5xx or 429. A send is done at the first 2xx
answer: a hook that failed twice, then took it, gets it once. Each request
carries the firing's id (in the payload), so that a hook that took a
request whose answer was lost can tell the resend for what it is.

What is dropped is counted (``skyoap_alarm_dropped_total{reason}``): the
queue full, a 4xx other than 429 (the hook refuses what it is sent), or
every try failed."""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field

from skyoap.alarm.messages import Request
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.ratelimit import RateLimitedLog
from skyoap.runtime.retry import RetryPolicy

log = logging.getLogger(__name__)

RETRIES = RetryPolicy(attempts=8, first_delay_s=1.0, multiplier=2.0, max_delay_s=60.0)
"""Eight tries over about two minutes."""
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no proxy from the environment


@dataclass(order=True)
class _Due:
    at: float
    order: int
    request: Request = field(compare=False)
    kind: str = field(compare=False)
    settled: Callable[[], None] = field(compare=False)
    failures: int = field(compare=False, default=0)


class Delivery:
    def __init__(
        self,
        instruments: Instruments,
        max_queued: int = 10_000,
        timeout_s: float = 5.0,
        retries: RetryPolicy = RETRIES,
        threads: int = 2,
    ) -> None:
        self._max, self._timeout_s, self._retries = max_queued, timeout_s, retries
        self._due: list[_Due] = []
        self._order = itertools.count()
        self._changed = threading.Condition()
        self._closing = False
        self._sending = 0
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
        instruments.gauge("skyoap_alarm_queued", "alarm notices waiting to be sent").set_function(
            lambda: len(self._due) + self._sending
        )
        self._threads = [
            threading.Thread(target=self._run, name=f"alarm-delivery-{i}", daemon=True)
            for i in range(threads)
        ]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def send(self, kind: str, request: Request, settled: Callable[[], None] = lambda: None) -> bool:
        """Queues ``request`` to a hook of ``kind``; False when it was dropped
        (the queue full, or closing). ``settled`` is called once it is done
        with: taken, refused, given up or dropped for a full queue; not when
        it is dropped because the node closes (its notice is sent again from
        its bucket's outbox)."""
        with self._changed:
            if self._closing:
                self._dropped.labels(kind, "closing").inc()
                return False
            full = len(self._due) + self._sending >= self._max
            if not full:
                heapq.heappush(self._due, _Due(time.monotonic(), next(self._order), request, kind, settled))
                self._changed.notify()
        if full:
            self._dropped.labels(kind, "full").inc()
            settled()
        return not full

    def idle(self) -> bool:
        """Whether nothing is queued or being sent."""
        with self._changed:
            return not self._due and not self._sending

    def close(self, timeout_s: float = 5.0) -> None:
        """Sends what is due within ``timeout_s``; what is left is dropped."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while (self._due or self._sending) and time.monotonic() < deadline:
                self._changed.wait(0.05)
            self._closing = True
            for due in self._due:
                self._dropped.labels(due.kind, "closing").inc()
            self._due.clear()
            self._changed.notify_all()
        for t in self._threads:
            if t.ident is not None:  # started
                t.join(self._timeout_s + 1)

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._closing and (not self._due or self._due[0].at > time.monotonic()):
                    self._changed.wait(self._due[0].at - time.monotonic() if self._due else None)
                if self._closing:
                    return
                due = heapq.heappop(self._due)
                self._sending += 1
            try:
                outcome = self._post(due.request)
            finally:
                with self._changed:
                    self._sending -= 1
                    self._changed.notify_all()
            self._settle(due, outcome)

    def _post(self, request: Request) -> str | None:
        """None when the hook took the request; else why not, and whether
        trying again may help (``retry:`` first)."""
        headers = {"Content-Type": "application/json", **request.headers}
        sent = urllib.request.Request(request.url, data=request.body, headers=headers, method="POST")
        try:
            with _DIRECT.open(sent, timeout=self._timeout_s) as answer:
                answer.read()
            return None
        except urllib.error.HTTPError as e:
            retry = e.code >= 500 or e.code == 429
            return f"{'retry:' if retry else ''}{request.url} answered {e.code}"
        except (OSError, ValueError) as e:  # refused, reset, timed out, a URL that is none
            return f"retry:{request.url}: {e}"

    def _settle(self, due: _Due, outcome: str | None) -> None:
        if outcome is None:
            self._sent.labels(due.kind).inc()
            due.settled()
            return
        retry = outcome.startswith("retry:")
        why = outcome.removeprefix("retry:")
        due.failures += 1
        attempts = self._retries.attempts or 0
        if not retry or (attempts and due.failures >= attempts):
            self._dropped.labels(due.kind, "gave_up" if retry else "refused").inc()
            self._log.warning(due.kind, "an alarm notice was dropped after %d tries: %s", due.failures, why)
            due.settled()
            return
        self._tried_again.labels(due.kind).inc()
        due.at = time.monotonic() + self._retries.delay_s(due.failures)
        with self._changed:
            if self._closing:
                self._dropped.labels(due.kind, "closing").inc()
                return
            heapq.heappush(self._due, due)
            self._changed.notify()
