"""Alarm rules evaluated every minute over the minute metrics, each entity by
one node of a cluster, each minute once.

Entities fall into ``BUCKETS`` buckets by their routing key; a bucket is
owned by the aggregator that rendezvous hashing picks among the live ones,
as remote clients pick the node an entity's metrics go to. A bucket's alarms
(the course of every rule and entity in it that is not at rest, and the
last minute evaluated) are one document of the shared state store, replaced
by compare-and-swap. So when the owner changes (a node joins, leaves or is
killed), the new owner goes on from the document: it evaluates the minutes
since the last one evaluated, reading their windows from storage, and a
minute two nodes evaluate at once is kept from the one whose swap lands
first; the other's notices are dropped unsent.

A minute is evaluated once ``settle_s`` has passed after its end, so that
its metrics have been persisted."""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from skyoap.alarm.delivery import Delivery
from skyoap.alarm.evaluation import (
    SCOPES,
    RuleError,
    Watched,
    entity_ids,
    entity_name,
    entity_of_key,
    watched,
    window,
)
from skyoap.alarm.messages import AlarmMessage, requests
from skyoap.alarm.settings import AlarmSettings
from skyoap.alarm.states import Course, Notice, State, step
from skyoap.alarm.vectorized import Frames, Listings, held_all
from skyoap.query.entity import Entity
from skyoap.query.metrics import StoredMetrics
from skyoap.remote.selector import owner
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.periodic import Periodic
from skyoap.storage.api import MetricsDAO, StateStore

log = logging.getLogger(__name__)

BUCKETS = 64
ROUND_S = 10.0
"""How often a node looks for minutes to evaluate."""
CATCH_UP_MINUTES = 10
"""Minutes a bucket's new owner evaluates at most, back from now, when the last
owner stopped evaluating it earlier: older ones are left."""


def bucket_of(key: str) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=4).digest(), "big") % BUCKETS


@dataclass
class _Bucket:
    number: int
    version: object
    last: int
    """The last minute evaluated."""
    courses: dict[str, Course]
    """By rule and entity key; none at rest."""
    notices: list[AlarmMessage]


class Alarms:
    def __init__(
        self,
        settings: Callable[[], AlarmSettings],
        metrics: MetricsDAO,
        state: StateStore,
        me: str,
        nodes: Callable[[], Sequence[str]],
        delivery: Delivery,
        instruments: Instruments,
        settle_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._settings, self._metrics, self._state = settings, metrics, state
        self._me, self._nodes, self._delivery, self._settle_s, self._clock = (
            me,
            nodes,
            delivery,
            settle_s,
            clock,
        )
        self._fired = instruments.counter(
            "skyoap_alarm_notices_total", "alarm firings and recoveries this node raised", ["kind"]
        )
        self._lost = instruments.counter(
            "skyoap_alarm_minutes_taken_total", "bucket minutes another node evaluated first"
        )
        self._bad: set[str] = set()
        self._task = Periodic("alarms", ROUND_S, self.run_once, "evaluating the alarm rules")

    def start(self) -> None:
        self._task.start()

    def close(self, timeout_s: float = 5.0) -> None:
        self._task.close(timeout_s)

    def minute(self) -> int:
        """The last minute to evaluate now: settled, whole (minutes since the epoch)."""
        return int((self._clock() - self._settle_s) // 60) - 1

    def run_once(self) -> None:
        """Evaluates the minutes due in the buckets this node owns now."""
        nodes = sorted(self._nodes())
        if self._me not in nodes:
            return
        rules = self._watched(self._settings())
        now = self.minute()
        buckets = [b for n in range(BUCKETS) if owner(str(n), nodes) == self._me if (b := self._load(n, now))]
        for minute in sorted({m for b in buckets for m in self._due(b, now)}):
            self._evaluate(minute, rules, [b for b in buckets if minute in self._due(b, now)])
        for b in buckets:
            self._store(b, now, rules)

    def _watched(self, settings: AlarmSettings) -> list[Watched]:
        out = []
        for rule in settings.rules:
            try:
                out.append(watched(rule))
            except RuleError as e:
                if rule.name not in self._bad:
                    self._bad.add(rule.name)
                    log.error("alarm rule %s (line %d) is not evaluated: %s", rule.name, rule.line, e)
        return out

    def _load(self, number: int, now: int) -> _Bucket | None:
        doc, version = self._state.load(f"alarm:{number}")
        if doc is None:
            return _Bucket(number, version, now - 1, {}, [])
        if doc["minute"] >= now:
            return None
        courses = {k: Course.of(v) for k, v in doc["courses"].items()}
        return _Bucket(number, version, doc["minute"], courses, [])

    @staticmethod
    def _due(b: _Bucket, now: int) -> range:
        return range(max(b.last + 1, now - CATCH_UP_MINUTES + 1), now + 1)

    def _evaluate(self, minute: int, rules: Iterable[Watched], buckets: list[_Bucket]) -> None:
        by_number = {b.number: b for b in buckets}
        frames = Frames(self._metrics)  # each minute's rows read once for all the rules
        listings = Listings(frames, self._metrics, bucket_of, by_number)  # each window's entities, once
        reader = StoredMetrics(self._metrics, {})  # for what is evaluated entity by entity
        alarms: dict[str, list[tuple[_Bucket, str]]] = {}  # each rule's courses (none at rest), by key
        for b in buckets:
            for course_key in b.courses:
                name, key = course_key.split("\x00", 1)
                alarms.setdefault(name, []).append((b, key))
        for w in rules:
            duration = window(minute, w.rule.period)
            found = listings.of(w, duration)
            covered = found.covered(w.rule)
            wanted = covered & found.mine
            is_held = held_all(w, found.population, duration, frames, reader, wanted)
            # A step changes nothing for an entity at rest whose expression did not hold: skip those.
            stepped = is_held.copy()
            for _, key in alarms.get(w.rule.name, ()):
                if (alarmed := found.place.get(key)) is not None:
                    stepped[alarmed] = True
            for i in np.flatnonzero(stepped & wanted).tolist():
                e = found.population.entities[i]
                self._step(by_number[found.buckets[i]], w, found.keys[i], e, bool(is_held[i]), minute)
            # An alarm whose entity has no rows left in the window: the expression no longer holds.
            for b, key in alarms.get(w.rule.name, ()):
                listed_at = found.place.get(key)
                if listed_at is None or not covered[listed_at]:
                    self._step(b, w, key, None, False, minute)

    def _step(self, b: _Bucket, w: Watched, key: str, e: Entity | None, is_held: bool, minute: int) -> None:
        course_key = f"{w.rule.name}\x00{key}"
        course, notice = step(b.courses.get(course_key, Course()), is_held, minute, w.rule)
        if course.state is State.NORMAL:
            b.courses.pop(course_key, None)
        else:
            b.courses[course_key] = course
        if notice is not None:
            b.notices.append(self._message(w, e or entity_of_key(w, key), notice))

    def _message(self, w: Watched, entity: Entity, notice: Notice) -> AlarmMessage:
        scope_id, scope = SCOPES[w.scope]
        return AlarmMessage(
            scope_id=scope_id,
            scope=scope,
            name=entity_name(w.scope, entity),
            id0=entity_ids(w.scope, entity)[0],
            id1=entity_ids(w.scope, entity)[1],
            rule_name=w.rule.name,
            message=w.rule.text(entity_name(w.scope, entity)),
            firing=notice.firing,
            start_ms=(notice.started_minute + 1) * 60_000,
            tags=w.rule.tags,
            recovery_ms=None if notice.recovered_minute is None else (notice.recovered_minute + 1) * 60_000,
        )

    def _store(self, b: _Bucket, now: int, rules: Iterable[Watched]) -> None:
        # The courses of rules no longer in the settings end here.
        kept = {f"{w.rule.name}\x00" for w in rules}
        courses = {k: c.to_json() for k, c in b.courses.items() if k[: k.index("\x00") + 1] in kept}
        doc = {"minute": now, "courses": courses}
        if not self._state.swap(f"alarm:{b.number}", b.version, doc):
            self._lost.inc()
            return
        settings = self._settings()
        for message in b.notices:
            self._fired.labels("recovery" if message.is_recovery else "firing").inc()
            rule = next((r for r in settings.rules if r.name == message.rule_name), None)
            if rule is None:
                continue
            for hook in settings.hooks_of(rule):
                for request in requests(hook, message, int(self._clock() * 1000)):
                    self._delivery.send(hook.kind, request)
