"""What a metrics L2 worker could not store by its close, kept in the node's
spill directory for the next start (``runtime/spill.py``), and what earlier
starts kept, stored again under their writer names, so that the rows' rounds
still tell which of their writes landed (``aggregator/metrics.py``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from skyoap.model.metrics import Downsampling, Metrics, merge_into
from skyoap.runtime import clock
from skyoap.runtime.budget import HeldBytes, memory_size
from skyoap.runtime.ratelimit import RateLimitedLog
from skyoap.runtime.spill import Spill, WorkerSpill

log = logging.getLogger(__name__)


@dataclass
class Held:
    """What one level holds for storage between rounds."""

    waiting: dict[str, Metrics] = field(default_factory=dict)
    """Deltas no write of which can have landed, merged by key."""
    unconfirmed: dict[str, tuple[int, Metrics]] = field(default_factory=dict)
    """Deltas written with an unknown outcome, each with the round of its first write."""

    def __len__(self) -> int:
        return len(self.waiting.keys() | self.unconfirmed.keys())


@dataclass
class Replay:
    """Deltas an earlier start of the worker spilled at close, stored under
    that start's writer name. Its ``held`` has only unconfirmed deltas: each
    is on file as such before it is written."""

    spill: Spill
    writer: str
    round: int
    held: dict[Downsampling, Held]
    behind: dict[Downsampling, dict[str, Metrics]]
    """Deltas of a key that also has an unconfirmed one: written once that one is settled."""
    nbytes: int = field(init=False)
    """About what it held in memory when read (counted as held until it is stored whole)."""

    def __post_init__(self) -> None:
        deltas = [m for h in self.held.values() for _, m in h.unconfirmed.values()]
        self.nbytes = memory_size(deltas + [m for b in self.behind.values() for m in b.values()])

    def __len__(self) -> int:
        return sum(len(h) for h in self.held.values()) + sum(len(b) for b in self.behind.values())


Store = Callable[[Downsampling, Held, int, str], None]
"""Writes what a ``Held`` holds of a level, in a round, as a writer; what
storage did not take stays in it."""


class SpilledMetrics:
    """The spills of one worker, named ``name``, of ``model``: ``keep`` writes
    one at close, ``store`` stores earlier starts' a round at a time."""

    def __init__(self, model: type[Metrics], name: str, spill: WorkerSpill, held: HeldBytes) -> None:
        """``held`` counts what the spills read take in memory, until stored."""
        self.model = model
        self.name = name
        self._spill = spill
        self._held = held
        self.replays: list[Replay] | None = None
        """Taken from the spill directory at the first ``store``."""
        self._error_log = RateLimitedLog(log)

    def count(self, level: Downsampling) -> int:
        """The rows of ``level`` the spills read hold."""
        return sum(len(r.held[level]) + len(r.behind[level]) for r in self.replays or ())

    def keep(
        self, writer: str, round_no: int, held: dict[Downsampling, Held], nbytes: int, reason: str
    ) -> None:
        """At close: writes what ``held`` holds to the spill directory, with
        the ``writer`` name and the rounds of its unconfirmed writes; without
        a directory, or if the file cannot be written, it is dropped, counted
        (as ``reason``) and logged with its size ``nbytes``."""
        rows = sum(len(h) for h in held.values())
        if rows:
            content = _spill_content(self.model, writer, round_no, held, {})
            self._spill.keep(content, rows, "metric rows", nbytes, reason)

    def store(self, store: Store, stop: Callable[[], bool]) -> None:
        """Stores what earlier starts spilled, a round of each spill per call,
        until ``stop()`` says storage is failing; a spill stored whole is removed."""
        if self.replays is None:
            self.replays = [
                Replay(spill, *parts) for spill, parts in self._spill.take(self.model.MODEL, self._replay_of)
            ]
            self._held.set(sum(r.nbytes for r in self.replays))
        for replay in list(self.replays):
            if stop():
                return  # the spills wait for the next round
            try:
                self._apply(replay, store)
            except OSError as e:
                self._error_log.error(
                    f"{self.name}-spill", "%s: cannot update %s: %s", self.name, replay.spill.path, e
                )
                continue
            if not len(replay):
                replay.spill.done()
                self.replays.remove(replay)
                self._held.add(-replay.nbytes)
                log.info("%s: stored what %s held", self.name, replay.spill.path)

    def _apply(self, replay: Replay, store: Store) -> None:
        replay.round = round_no = max(replay.round + 1, clock.now_ms())
        applied = 0
        for level in Downsampling:
            held, behind = replay.held[level], replay.behind[level]
            for key in [k for k in behind if k not in held.unconfirmed]:
                held.unconfirmed[key] = (round_no, behind.pop(key))
        # On file before any write of this round: each of them may land.
        replay.spill.save(_spill_content(self.model, replay.writer, round_no, replay.held, replay.behind))
        for level in Downsampling:
            held = replay.held[level]
            before = len(held)
            if before:
                store(level, held, round_no, replay.writer)
                applied += before - len(held)
        self._spill.applied.inc(applied)
        if len(replay):
            replay.spill.save(_spill_content(self.model, replay.writer, round_no, replay.held, replay.behind))

    def _replay_of(
        self, content: dict[str, Any]
    ) -> tuple[str, int, dict[Downsampling, Held], dict[Downsampling, dict[str, Metrics]]]:
        """A spill file's writer, round, held and behind deltas (``Replay``)."""
        held: dict[Downsampling, Held] = {}
        behind: dict[Downsampling, dict[str, Metrics]] = {}
        for level in Downsampling:
            rows = content["levels"][level.value]
            unconfirmed = {}
            for r, row in rows["unconfirmed"]:
                m = self.model.from_row(row)
                unconfirmed[m.key()] = (int(r), m)
            held[level] = Held(unconfirmed=unconfirmed)
            behind[level] = {}
            refused = merge_into(behind[level], (self.model.from_row(row) for row in rows["waiting"]))
            if refused:
                raise ValueError(f"its waiting {level.value} rows of one key sum past what storage holds")
        return str(content["writer"]), int(content["round"]), held, behind


def _spill_content(
    model: type[Metrics],
    writer: str,
    round_no: int,
    held: dict[Downsampling, Held],
    behind: dict[Downsampling, dict[str, Metrics]],
) -> dict[str, object]:
    """A spill file's content; ``behind`` deltas are written as ``waiting``."""
    levels = {}
    for level in Downsampling:
        waiting = [*held[level].waiting.values(), *behind.get(level, {}).values()]
        levels[level.value] = {
            "waiting": [m.to_row() for m in waiting],
            "unconfirmed": [[r, m.to_row()] for r, m in held[level].unconfirmed.values()],
        }
    return {"model": model.MODEL, "writer": writer, "round": round_no, "levels": levels}
