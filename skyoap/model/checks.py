"""What a valid item is: the rules every name, time and count obeys, whoever
sends it. A receiver applies them to what agents report (``receiver/``), and
an aggregator again to what other nodes send (``remote/service.py``), so that
no client can make L2 merge or store what an agent could not."""

from __future__ import annotations

import calendar
import enum
import functools
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass


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
    """A value or a histogram bound that is NaN or infinite."""
    OVERFLOW = "overflow"
    """A value that, added to the others of its meter and minute, makes a sum
    past what a 64-bit float holds (about 1.8e308): no storage keeps it."""
    MISSING_TIME = "missing_time"
    """An event with neither a start nor an end."""
    NO_VALUE = "no_value"
    """A meter with neither a single value nor a histogram."""
    OVER_LIMIT = "over_limit"
    """More spans, references, tags, buckets or bytes than the node's limits allow."""
    INCONSISTENT = "inconsistent"
    """Values no receiver produces: counts that do not add up, an id below 1."""
    UNDECODABLE = "undecodable"
    BROKEN_STREAM = "broken_stream"
    """The agent's stream ended with an error: what came before it is kept."""
    UNKNOWN_TASK = "unknown_task"
    """A thread dump for a profiling task there is none of."""


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
    """The node's limits (``--max-name-length`` and the others of its limits
    section, built by ``LimitsConfig.items``)."""

    max_name_length: int
    max_past_ms: int
    """How old a time stamp may be (agents buffer while the backend is away)."""
    max_future_ms: int
    """How far ahead of this node's clock a time stamp may be (clock skew)."""
    max_properties_chars: int
    max_spans_per_segment: int
    max_refs_per_span: int
    max_tags_per_item: int
    max_log_body_bytes: int
    max_histogram_buckets: int

    def name(self, what: What, value: str, required: bool = True) -> str:
        if required and not value:
            raise Refused(Reason.MISSING_NAME, f"{said(what)} is empty")
        if len(value) > self.max_name_length:
            raise Refused(
                Reason.NAME_TOO_LONG,
                f"{said(what)} has {len(value)} characters, more than the {self.max_name_length} allowed",
            )
        if CONTROL_CHARACTERS.search(value):
            raise Refused(Reason.CONTROL_CHARACTER, str(control_character(said(what), value)))
        return value

    def time(self, what: What, ms: int, now_ms: int) -> int:
        if not now_ms - self.max_past_ms <= ms <= now_ms + self.max_future_ms:
            raise Refused(
                Reason.TIME_OUT_OF_RANGE,
                f"{said(what)} {ms} ms since the epoch is more than {self.max_past_ms // 1000} s before or "
                f"{self.max_future_ms // 1000} s after this node's clock ({now_ms})",
            )
        return ms

    def not_ahead(self, what: What, ms: int, now_ms: int) -> None:
        if ms > now_ms + self.max_future_ms:
            raise Refused(
                Reason.TIME_OUT_OF_RANGE,
                f"{said(what)} {ms} ms since the epoch is more than {self.max_future_ms // 1000} s "
                f"after this node's clock ({now_ms})",
            )

    @staticmethod
    def minute(what: What, bucket: int) -> int:
        """The start of minute ``bucket`` (yyyyMMddHHmm) in ms since the epoch;
        Refused if it is no real minute. Only its form is judged, not its
        distance from any clock: the receiver judged the telemetry's times
        once, against its own clock, when it took them."""
        seconds = _minute_start(bucket)
        if seconds is None:
            raise Refused(Reason.INCONSISTENT, f"{said(what)} {bucket} is not a minute (yyyyMMddHHmm)")
        return seconds * 1000

    def at_most(self, what: What, count: int, bound: int, option: str) -> None:
        if count > bound:
            raise Refused(
                Reason.OVER_LIMIT, f"{said(what)}: {count}, more than the {bound} allowed ({option})"
            )

    def properties(self, what: What, properties: Mapping[str, str]) -> None:
        size = sum(len(k) + len(v) for k, v in properties.items())
        if size > self.max_properties_chars:
            self.at_most(
                f"characters of {said(what)}", size, self.max_properties_chars, "--max-properties-chars"
            )


What = str | Callable[[], str]
"""What a rule is applied to, as its refusal names it; a function when naming
it costs more than the check (the message is built only for a refusal)."""


def said(what: What) -> str:
    return what if isinstance(what, str) else what()


@functools.lru_cache(maxsize=4096)
def _minute_start(bucket: int) -> int | None:
    """Seconds since the epoch at the start of minute ``bucket``; None if it is
    no real minute. Items of a few minutes at a time arrive: each is parsed once."""
    digits = str(bucket)
    if len(digits) != 12:
        return None
    try:
        seconds = calendar.timegm(
            (int(digits[:4]), int(digits[4:6]), int(digits[6:8]), int(digits[8:10]), int(digits[10:]), 0)
        )
    except ValueError:
        return None
    return seconds if minute_of(seconds) == bucket else None


def minute_of(seconds: int) -> int:
    """The yyyyMMddHHmm bucket of ``seconds`` since the epoch (UTC)."""
    y, mo, d, h, mi = time.gmtime(seconds)[:5]
    return (((y * 100 + mo) * 100 + d) * 100 + h) * 100 + mi


def consistent(condition: bool, detail: What) -> None:
    if not condition:
        raise Refused(Reason.INCONSISTENT, said(detail))
