"""Storage-side trace sampling, as SkyWalking's OAP samples: which segments are
stored, by SkyWalking's ``trace-sampling-policy-settings.yml`` read as is. A
default rate and per-service rates in 1/10,000, and a duration (ms) past
which a segment is kept whatever its rate (-1: none); a segment with an
error is always kept (SkyWalking's ``forceSampleErrorSegment``). Every
segment feeds the metrics either way: sampling decides only what is stored.

A segment is kept by rate when its trace id's draw, CRC-32 of the id modulo
10,000, is below its service's rate. Every node draws the same number for a
trace, so the segments of a trace its services' rates keep are all kept, on
whichever receivers they land, with nothing said between the nodes. A trace
whose services have different rates is kept whole where the draw is below
the lowest of them. An error or a slow segment is kept alone: the other
segments of its trace are kept only if their own rule keeps them.

A segment a profiling task may have dumped is kept too (its service and
first endpoint the task's, started while it ran, lasting past its
threshold): the task's analysis starts from the segment."""

from __future__ import annotations

import enum
import logging
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from skyoap.model.profiling import ProfileTask
from skyoap.model.records import SegmentRecord
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.ratelimit import RateLimitedLog
from skyoap.storage.api import StorageError

log = logging.getLogger(__name__)

SCALE = 10_000
"""A rate's denominator: 10,000 keeps every trace."""


@dataclass(frozen=True)
class Policy:
    rate: int = SCALE
    """Traces kept per 10,000."""
    duration_ms: int = -1
    """A segment lasting at least this long is kept; -1: none is kept for its length."""


@dataclass(frozen=True)
class Policies:
    default: Policy = Policy()
    services: Mapping[str, Policy] = field(default_factory=dict)

    def of(self, service: str) -> Policy:
        return self.services.get(service, self.default)

    def keeps_all(self) -> bool:
        return all(p.rate >= SCALE for p in (self.default, *self.services.values()))

    def describe(self) -> str:
        return f"default rate {self.default.rate}/{SCALE}, {len(self.services)} services of their own"


_KEYS = {"rate", "duration"}


def _policy(where: str, given: object, default: Policy) -> Policy:
    """The policy of a ``default`` or service entry; a key it leaves out is the default's."""
    if not isinstance(given, dict):
        raise ValueError(f"{where} must be a mapping with rate and duration, not {given!r}")
    unknown = sorted(set(given) - _KEYS - {"name"})
    if unknown:
        hint = " (SkyWalking 8's sampleRate is now rate)" if "sampleRate" in unknown else ""
        raise ValueError(f"{where}: unknown key {unknown[0]!r}{hint}: a policy has rate and duration")
    rate, duration = given.get("rate", default.rate), given.get("duration", default.duration_ms)
    if not isinstance(rate, int) or isinstance(rate, bool) or not 0 <= rate <= SCALE:
        raise ValueError(f"{where}: rate must be a whole number of 1/10000 from 0 to {SCALE}, not {rate!r}")
    if not isinstance(duration, int) or isinstance(duration, bool) or duration < -1:
        raise ValueError(f"{where}: duration must be a whole number of ms, or -1 for none, not {duration!r}")
    return Policy(rate, duration)


def parse(text: str, where: str) -> Policies:
    """The policies of a settings file's ``text``; ValueError saying what is wrong."""
    try:
        loaded: Any = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ValueError(f"{where}: not YAML: {e}") from None
    if loaded is None:
        return Policies()
    if not isinstance(loaded, dict) or set(loaded) - {"default", "services"}:
        raise ValueError(f"{where}: the file has a default and services, nothing else")
    default = _policy(f"{where}: default", loaded.get("default") or {}, Policy())
    services: dict[str, Policy] = {}
    for i, entry in enumerate(loaded.get("services") or []):
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name:
            raise ValueError(f"{where}: services[{i}] has no name")
        if name in services:
            raise ValueError(f"{where}: service {name!r} is given twice")
        services[name] = _policy(f"{where}: service {name!r}", entry, default)
    return Policies(default, services)


def load(path: Path) -> Policies:
    try:
        text = path.read_text()
    except OSError as e:
        raise ValueError(f"--trace-sampling-settings: cannot read {path}: {e.strerror}") from None
    return parse(text, f"--trace-sampling-settings {path}")


class Why(enum.Enum):
    """Why a segment was kept, or dropped."""

    RATE = "rate"
    ERROR = "error"
    SLOW = "duration"
    PROFILED = "profiling"


def draw(trace_id: str) -> int:
    """The trace's number from 0 to 9,999, the same on every node."""
    return zlib.crc32(trace_id.encode()) % SCALE


def decide(policies: Policies, segment: SegmentRecord) -> tuple[bool, Why]:
    """Whether ``segment`` is stored, and why."""
    policy = policies.of(segment.service)
    if draw(segment.trace_id) < policy.rate:
        return True, Why.RATE
    if segment.is_error:
        return True, Why.ERROR
    if policy.duration_ms >= 0 and segment.latency_ms >= policy.duration_ms:
        return True, Why.SLOW
    return False, Why.RATE


def profiled(segment: SegmentRecord, tasks: Sequence[ProfileTask]) -> bool:
    """Whether one of its service's profiling ``tasks`` may have dumped ``segment``."""
    return any(
        t.endpoint == segment.endpoint
        and t.start_time <= segment.start_time <= t.end_time
        and segment.latency_ms >= t.min_duration_ms
        for t in tasks
    )


class Sampler:
    """Picks the segments to store by the ``policies`` in force and the
    profiling ``tasks`` of each service, counting what it keeps and drops by why."""

    def __init__(
        self,
        policies: Callable[[], Policies],
        instruments: Instruments,
        tasks: Callable[[str], Sequence[ProfileTask]] = lambda _: (),
    ) -> None:
        self._policies = policies
        self._tasks = tasks
        self._unread = RateLimitedLog(log)
        counted = instruments.counter(
            "skyoap_trace_sampling_segments_total",
            "segments trace sampling kept or dropped, by why (rate, error, duration, profiling)",
            ["outcome", "reason"],
        )
        self._counted = {(True, why): counted.labels(outcome="kept", reason=why.value) for why in Why}
        self._counted[False, Why.RATE] = counted.labels(outcome="dropped", reason=Why.RATE.value)

    def kept(self, segments: list[SegmentRecord]) -> list[SegmentRecord]:
        policies = self._policies()
        if policies.keeps_all():
            self._counted[True, Why.RATE].inc(len(segments))
            return segments
        kept = []
        running: dict[str, Sequence[ProfileTask]] = {}  # each service's tasks, asked once a call
        for segment in segments:
            keep, why = decide(policies, segment)
            if not keep:
                if (tasks := running.get(segment.service)) is None:
                    tasks = running[segment.service] = self._profiling(segment.service)
                if tasks and profiled(segment, tasks):
                    keep, why = True, Why.PROFILED
            self._counted[keep, why].inc()
            if keep:
                kept.append(segment)
        return kept

    def _profiling(self, service: str) -> Sequence[ProfileTask]:
        try:
            return self._tasks(service)
        except StorageError as e:
            self._unread.warning(
                "profiling-tasks", "profiling tasks cannot be read, no segment is kept for them: %s", e
            )
            return ()
