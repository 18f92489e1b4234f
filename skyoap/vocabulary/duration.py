"""SkyWalking's ``Duration`` input: a time range as two strings and a step.

The strings are read in the server's time zone, as SkyWalking reads them; a
skyoap server's zone is UTC, because its time buckets are UTC. Both ends are
inclusive: ``2026-11-21 1900`` to ``2026-11-21 1904`` by MINUTE is five points.
"""

from __future__ import annotations

import datetime
import enum
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from skyoap.model.metrics import Downsampling

SERVER_ZONE = datetime.UTC
"""The zone Duration strings are read in and MQE ids are counted from: the
zone of skyoap's time buckets. Clients learn it from ``getTimeInfo``."""

MAX_STEPS = 500
"""The most steps from a Duration's start to its end whose points are read
(SkyWalking's bound: 501 points, both ends included)."""


class DurationError(ValueError):
    """A Duration that cannot be read, or whose points cannot be listed."""


class Step(enum.Enum):
    """SkyWalking's ``Step``, in the protocol's order."""

    DAY = "DAY"
    HOUR = "HOUR"
    MINUTE = "MINUTE"
    SECOND = "SECOND"

    @property
    def layout(self) -> str:
        """The form of a Duration string at this step, as the protocol documents it."""
        return _LAYOUTS[self][0]

    @property
    def width(self) -> datetime.timedelta:
        return _WIDTHS[self]

    def downsampling(self) -> Downsampling:
        """The precision of the metrics read at this step; DurationError for
        SECOND, since skyoap keeps no per-second metrics."""
        level = _LEVELS.get(self)
        if level is None:
            raise DurationError(
                "skyoap keeps metrics per minute, hour and day: the smallest step for metrics is MINUTE, "
                "not SECOND"
            )
        return level

    def parse(self, text: str, what: str) -> datetime.datetime:
        """``text`` as a time in ``SERVER_ZONE``; DurationError saying what form it must have."""
        layout, pattern, example = _LAYOUTS[self]
        found = pattern.fullmatch(text)
        try:
            if found is None:
                raise ValueError(text)
            y, mo, d, h, mi, sec = [*(int(n) for n in found.groups()), 0, 0, 0][:6]
            return datetime.datetime(y, mo, d, h, mi, sec, tzinfo=SERVER_ZONE)
        except ValueError:
            raise DurationError(
                f"Duration {what} {text[:40]!r} is not a time of step {self.value}: "
                f"it is written {layout}, e.g. {example!r}"
            ) from None

    def format(self, time: datetime.datetime) -> str:
        """``time`` as a Duration string at this step."""
        return _strftime(time, _FORMATS[self])

    def bucket(self, time: datetime.datetime) -> int:
        """The time bucket holding ``time`` at this step, as skyoap numbers
        buckets (``202611211905``; seconds add two digits)."""
        return int(_strftime(time, _BUCKETS[self]))


def _strftime(time: datetime.datetime, layout: str) -> str:
    # %Y writes the years before 1000 without leading zeros, on glibc.
    at = time.astimezone(SERVER_ZONE)
    return at.strftime(layout.replace("%Y", f"{at.year:04d}"))


_D = r"(\d{4})-(\d{2})-(\d{2})"
_LAYOUTS = {
    Step.DAY: ("yyyy-MM-dd", re.compile(_D), "2026-11-21"),
    Step.HOUR: ("yyyy-MM-dd HH", re.compile(_D + r" (\d{2})"), "2026-11-21 19"),
    Step.MINUTE: ("yyyy-MM-dd HHmm", re.compile(_D + r" (\d{2})(\d{2})"), "2026-11-21 1905"),
    Step.SECOND: ("yyyy-MM-dd HHmmss", re.compile(_D + r" (\d{2})(\d{2})(\d{2})"), "2026-11-21 190530"),
}
_FORMATS = {
    Step.DAY: "%Y-%m-%d",
    Step.HOUR: "%Y-%m-%d %H",
    Step.MINUTE: "%Y-%m-%d %H%M",
    Step.SECOND: "%Y-%m-%d %H%M%S",
}
_BUCKETS = {Step.DAY: "%Y%m%d", Step.HOUR: "%Y%m%d%H", Step.MINUTE: "%Y%m%d%H%M", Step.SECOND: "%Y%m%d%H%M%S"}
_WIDTHS = {
    Step.DAY: datetime.timedelta(days=1),
    Step.HOUR: datetime.timedelta(hours=1),
    Step.MINUTE: datetime.timedelta(minutes=1),
    Step.SECOND: datetime.timedelta(seconds=1),
}
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_MS = datetime.timedelta(milliseconds=1)
_LEVELS = {Step.DAY: Downsampling.DAY, Step.HOUR: Downsampling.HOUR, Step.MINUTE: Downsampling.MINUTE}


@dataclass(frozen=True, slots=True)
class PointOfTime:
    """One step of a Duration: its time bucket, and the epoch ms its bucket
    starts at (an MQE value's id)."""

    bucket: int
    epoch_ms: int


@dataclass(frozen=True)
class Duration:
    """The protocol's ``Duration``. Built from the strings a client sent;
    DurationError if one is not of its step's form or the end is before the
    start. ``cold_stage`` asks SkyWalking's BanyanDB for its cold data; skyoap's
    storages have no such stage and read the same data either way.

    What is derived from the strings is derived once: a list of entities
    evaluates hundreds of expressions over the same Duration."""

    start: str
    end: str
    step: Step
    cold_stage: bool = False

    @classmethod
    def of(cls, given: Mapping[str, Any]) -> Duration:
        """From the protocol's ``Duration`` input, as a resolver receives it:
        the same Duration for the same input, so that what is derived from
        it is derived once."""
        return _duration(given["start"], given["end"], given["step"], bool(given.get("coldStage")))

    def __post_init__(self) -> None:
        start = self.start_time  # read first, so that a bad start is the error when both are
        if self.end_time < start:
            raise DurationError(f"Duration end {self.end!r} is before its start {self.start!r}")

    @functools.cached_property
    def start_time(self) -> datetime.datetime:
        return self.step.parse(self.start, "start")

    @functools.cached_property
    def end_time(self) -> datetime.datetime:
        return self.step.parse(self.end, "end")

    @functools.cached_property
    def start_bucket(self) -> int:
        return self.step.bucket(self.start_time)

    @functools.cached_property
    def end_bucket(self) -> int:
        return self.step.bucket(self.end_time)

    def steps(self) -> int:
        """How many steps the end is past the start; DurationError past
        ``MAX_STEPS``, with SkyWalking's message."""
        steps = (self.end_time - self.start_time) // self.step.width
        if steps > MAX_STEPS:
            raise DurationError(
                "Duration data error, the range between the start time and the end time can't exceed "
                f"{MAX_STEPS} {self.step.value.lower()}s"
            )
        return steps

    @property
    def end_ms(self) -> int:
        """Epoch ms where the last step ends (the end's step whole), excluded."""
        end = self.end_time
        if end > datetime.datetime.max.replace(tzinfo=SERVER_ZONE) - self.step.width:
            return (datetime.datetime.max.replace(tzinfo=SERVER_ZONE) - _EPOCH) // _MS + 1
        return (end + self.step.width - _EPOCH) // _MS

    @functools.cached_property
    def _points(self) -> tuple[PointOfTime, ...]:
        start, step, steps = self.start_time, self.step.width, self.steps()
        times = (start + i * step for i in range(steps + 1))
        return tuple(PointOfTime(self.step.bucket(t), (t - _EPOCH) // _MS) for t in times)

    def points(self) -> tuple[PointOfTime, ...]:
        """Every step from the start to the end, both included; DurationError
        past ``MAX_STEPS`` steps, with SkyWalking's message."""
        return self._points

    @functools.cached_property
    def buckets(self) -> tuple[int, ...]:
        """Each point's time bucket."""
        return tuple(p.bucket for p in self._points)

    @functools.cached_property
    def point_ids(self) -> tuple[str, ...]:
        """Each point's MQE id: the epoch ms its bucket starts at, as text."""
        return tuple(str(p.epoch_ms) for p in self._points)

    def extended_back(self, steps: int) -> Duration:
        """The same Duration starting ``steps`` steps earlier (what ``increase``
        and ``rate`` read, to have a value to subtract at the first point);
        DurationError past ``MAX_STEPS`` steps or before the year 1."""
        if steps > MAX_STEPS:
            raise DurationError(
                f"a range of {steps} {self.step.value.lower()}s reaches back further than the "
                f"{MAX_STEPS} steps one read may span"
            )
        try:
            start = self.step.format(self.start_time - steps * self.step.width)
        except OverflowError:
            raise DurationError(
                f"Duration start {self.start!r} less {steps} {self.step.value.lower()}s is before the year 1"
            ) from None
        return Duration(start, self.end, self.step, self.cold_stage)


@functools.lru_cache(maxsize=256)
def _duration(start: str, end: str, step: str, cold_stage: bool) -> Duration:
    return Duration(start, end, Step(step), cold_stage)
