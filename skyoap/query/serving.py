"""What every query goes through, whichever protocol asks it (SkyWalking's
GraphQL, Prometheus's query API): admitted onto the endpoint's threads under
its deadline (``runtime/admission.py``), its answer awaited no longer, and
counted by outcome and timed. Each protocol answers a refusal in its own
envelope."""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Callable
from typing import TypeVar

from skyoap.runtime.admission import Admission
from skyoap.runtime.instruments import Instruments

T = TypeVar("T")


class Outcome(enum.Enum):
    ANSWERED = "answered"
    """Every field answered."""
    FAILED = "failed"
    """A field failed (its error beside what the others answered); for PromQL, the query."""
    INVALID = "invalid"
    """Not a query this node runs: a syntax error, an unknown field, a
    variable of the wrong type, nesting past the depth bound."""
    DEADLINE = "deadline"
    """Not answered within the deadline."""


class Refused(enum.Enum):
    """Why a request was answered without running a query."""

    METHOD = "method"
    """Not a method the route answers (405)."""
    TOO_LARGE = "too_large"
    """A body past ``--query-max-body-bytes`` (413)."""
    TIMEOUT = "timeout"
    """A body not whole within the query deadline (408)."""
    BAD_REQUEST = "bad_request"
    """Not a request of the protocol (400)."""
    BUSY = "busy"
    """Every thread running a query and as many waiting as may (503)."""
    CLOSING = "closing"
    """The node is stopping (503)."""


class Serving:
    def __init__(self, admission: Admission, instruments: Instruments) -> None:
        if admission.deadline_s is None:
            raise ValueError("a query's admission needs a deadline")
        self.admission = admission
        self.deadline_s: float = admission.deadline_s
        self._served = instruments.counter(
            "skyoap_query_served_total", "queries answered, by outcome", ["outcome"]
        )
        self._seconds = instruments.histogram(
            "skyoap_query_seconds", "one query, from its request's arrival to its answer"
        )
        self._refused = instruments.counter(
            "skyoap_query_refused_total",
            "requests to the query endpoint answered without running",
            ["reason"],
        )
        instruments.gauge("skyoap_query_pending", "queries running or waiting for a thread").set_function(
            lambda: admission.pending
        )

    async def run(self, work: Callable[[], T]) -> T | None:
        """What ``work`` answers on a thread of the endpoint, or None if it did
        not within the deadline. Raises ``Busy`` past the bound, RuntimeError
        once the endpoint closes."""
        waiting = asyncio.wrap_future(self.admission.submit(work))
        done, _ = await asyncio.wait([waiting], timeout=self.deadline_s)
        return waiting.result() if done else None

    def served(self, outcome: Outcome, arrived: float) -> None:
        """Counts a query answered, ``arrived`` at that ``time.monotonic()``."""
        self._served.labels(outcome.value).inc()
        self._seconds.observe(time.monotonic() - arrived)

    def refused(self, reason: str) -> None:
        self._refused.labels(reason).inc()
