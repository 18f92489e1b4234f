"""What telemetry a receiver refuses, and how it tells: each refused item is
counted under its reason, logged (rate-limited), and the agent's call ends
with INVALID_ARGUMENT saying how many items were taken and why the others were
not. What is refused never reaches a metric, so it cannot corrupt one."""

from __future__ import annotations

import enum
import logging
import re
from dataclasses import dataclass

from edge.errors import InvalidRequest
from runtime.instruments import Instruments
from runtime.ratelimit import RateLimitedLog

log = logging.getLogger(__name__)


class Reason(enum.Enum):
    NO_SPANS = "no_spans"
    END_BEFORE_START = "end_before_start"
    UNKNOWN_ENUM = "unknown_enum"
    TIME_OUT_OF_RANGE = "time_out_of_range"
    NAME_TOO_LONG = "name_too_long"
    CONTROL_CHARACTER = "control_character"
    """A name holding a control character (the key separator among them)."""
    MISSING_NAME = "missing_name"
    NOT_A_NUMBER = "not_a_number"
    NO_VALUE = "no_value"
    """A meter with neither a single value nor a histogram."""
    UNDECODABLE = "undecodable"
    BROKEN_STREAM = "broken_stream"
    """The agent's stream ended with an error: what came before it is kept."""


CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")
"""What no name may hold: the entities' key separator (``model.metrics.SEP``)
is one of them, and none has a place in a name shown to people."""


def control_character(what: str, value: str) -> str | None:
    """Why ``value`` cannot be a name, if it holds a control character."""
    found = CONTROL_CHARACTERS.search(value)
    if found is None:
        return None
    return f"{what} {value[:100]!r} holds the control character {found.group()!r} at {found.start()}"


class Refused(ValueError):
    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


@dataclass(frozen=True)
class TelemetryLimits:
    max_name_length: int
    max_past_ms: int
    """How old a time stamp may be (agents buffer while the backend is away)."""
    max_future_ms: int
    """How far ahead of this node's clock a time stamp may be (clock skew)."""

    def name(self, what: str, value: str, required: bool = True) -> str:
        if required and not value:
            raise Refused(Reason.MISSING_NAME, f"{what} is empty")
        if len(value) > self.max_name_length:
            raise Refused(
                Reason.NAME_TOO_LONG,
                f"{what} has {len(value)} characters, more than the {self.max_name_length} allowed",
            )
        bad = control_character(what, value)
        if bad is not None:
            raise Refused(Reason.CONTROL_CHARACTER, bad)
        return value

    def time(self, what: str, ms: int, now_ms: int) -> int:
        if not now_ms - self.max_past_ms <= ms <= now_ms + self.max_future_ms:
            raise Refused(
                Reason.TIME_OUT_OF_RANGE,
                f"{what} {ms} ms since the epoch is more than {self.max_past_ms // 1000} s before or "
                f"{self.max_future_ms // 1000} s after this node's clock ({now_ms})",
            )
        return ms


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
        self._log.warning(
            f"{self.kind}-{e.reason.value}", "%s refused (%s): %s", self.kind, e.reason.value, e
        )


class Tally:
    """What one agent call had taken and refused."""

    def __init__(self, refusals: Refusals) -> None:
        self._refusals = refusals
        self.taken = 0
        self.bytes = 0
        """About the memory of what the call carried so far."""
        self.refused: dict[Reason, int] = {}
        self.first: Refused | None = None

    def refuse(self, e: Refused) -> None:
        self._refusals.count(e)
        self.refused[e.reason] = self.refused.get(e.reason, 0) + 1
        self.first = self.first or e

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
