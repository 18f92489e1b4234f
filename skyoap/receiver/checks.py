"""What telemetry a receiver refuses, and how it tells: each refused item is
counted under its reason, logged (rate-limited), and the agent's call ends
with INVALID_ARGUMENT saying how many items were taken and why the others were
not. What is refused never reaches a metric, so it cannot corrupt one."""

from __future__ import annotations

import logging

from skyoap.edge.errors import InvalidRequest
from skyoap.model.checks import Reason, Refused
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.ratelimit import RateLimitedLog

log = logging.getLogger(__name__)


class Refusals:
    """Counters of one kind of telemetry's refused items, one per reason."""

    def __init__(self, kind: str, instruments: Instruments) -> None:
        self.kind = kind
        refused = instruments.counter(
            "skyoap_v3_refused_total", "telemetry items refused, by kind and reason", ["kind", "reason"]
        )
        self._counters = {r: refused.labels(kind=kind, reason=r.value) for r in Reason}
        self._log = RateLimitedLog(log)

    def tally(self) -> Tally:
        return Tally(self)

    def count(self, e: Refused) -> None:
        self._counters[e.reason].inc()
        # Its text: a log record that is kept (by a handler that buffers)
        # must not keep the error's frames, and the request in them.
        self._log.warning(
            f"{self.kind}-{e.reason.value}", "%s refused (%s): %s", self.kind, e.reason.value, str(e)
        )


class Tally:
    """What one agent call had taken and refused."""

    def __init__(self, refusals: Refusals) -> None:
        self._refusals = refusals
        self.taken = 0
        self.refused: dict[Reason, int] = {}
        self.first: str | None = None
        """What was wrong with the first item refused. Its text, not the
        exception: a caught exception's traceback holds the frames it passed
        through, and so the call's decoded requests, in a cycle through this
        tally that outlives the call until the cyclic collector happens to
        run; the budget would have released them meanwhile."""

    def refuse(self, e: Refused) -> None:
        self._refusals.count(e)
        self.refused[e.reason] = self.refused.get(e.reason, 0) + 1
        if self.first is None:
            self.first = str(e)

    def check(self) -> None:
        """Raises InvalidRequest (INVALID_ARGUMENT for the agent) if anything was refused."""
        if not self.refused:
            return
        reasons = ", ".join(
            f"{n} {r.value}" for r, n in sorted(self.refused.items(), key=lambda x: x[0].value)
        )
        raise InvalidRequest(
            f"{sum(self.refused.values())} {self._refusals.kind} refused ({reasons}; "
            f"the first: {self.first}); the other {self.taken} were taken"
        )
