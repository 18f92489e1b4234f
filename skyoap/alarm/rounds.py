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

The notices a minute raises are stored in the same swap, in the bucket's
outbox (``outbox.py``), and leave it once they are recorded and every hook
is done with them: a node killed after the swap loses none of them.

A minute is evaluated once ``settle_s`` has passed after its end, so that
its metrics have been persisted."""

from __future__ import annotations

import functools
import hashlib
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from skyoap.aggregator.records import insert_published
from skyoap.aggregator.topics import Topics
from skyoap.alarm.delivery import Delivery
from skyoap.alarm.evaluation import (
    RuleError,
    Watched,
    entity_name,
    entity_of_key,
    held_all,
    period_ending,
    snapshots,
    watched,
)
from skyoap.alarm.hooks import requests
from skyoap.alarm.listings import Listings
from skyoap.alarm.messages import AlarmMessage, Request
from skyoap.alarm.outbox import Entry, Handling
from skyoap.alarm.settings import AlarmSettings
from skyoap.alarm.states import Course, Notice, State, step
from skyoap.model.records import AlarmRecord
from skyoap.mqe.stored import StoredMetrics
from skyoap.mqe.vectorized import Frames
from skyoap.remote.selector import owner
from skyoap.runtime.budget import memory_size
from skyoap.runtime.crash import crash_point
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.periodic import Periodic
from skyoap.runtime.ratelimit import RateLimitedLog
from skyoap.storage.api import MetricsDAO, RecordDAO, StateStore
from skyoap.vocabulary.alarm_identity import AlarmScope, entity_ids
from skyoap.vocabulary.entity import Entity

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
    owned: bool
    last: int
    """The last minute evaluated."""
    courses: dict[str, Course]
    """By ``course_key``; none at rest."""
    outbox: list[Entry]
    raised: list[Entry] = field(default_factory=list)
    """The notices of the minutes evaluated now."""


_SEP = "\x00"


def course_key(rule: str, entity_key: str) -> str:
    """Where a rule's course for an entity is kept in its bucket."""
    return f"{rule}{_SEP}{entity_key}"


def course_of(key: str) -> tuple[str, str]:
    """The rule and the entity key of a ``course_key``."""
    rule, _, entity_key = key.partition(_SEP)
    return rule, entity_key


@dataclass(frozen=True)
class AlarmStorage:
    """What the rules read and write: the minute metrics, the shared state
    their buckets are kept in, the records alarms are stored as, and the
    topics alarms are published on (None: not published)."""

    metrics: MetricsDAO
    state: StateStore
    records: RecordDAO
    topics: Topics | None = None


@dataclass(frozen=True)
class Membership:
    """This node's name in the cluster, and the live nodes' names."""

    me: str
    nodes: Callable[[], Sequence[str]]


class Alarms:
    def __init__(
        self,
        settings: Callable[[], AlarmSettings],
        storage: AlarmStorage,
        members: Membership,
        delivery: Delivery,
        instruments: Instruments,
        settle_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._settings, self._delivery, self._settle_s, self._clock = settings, delivery, settle_s, clock
        self._metrics, self._state = storage.metrics, storage.state
        self._records, self._topics = storage.records, storage.topics
        self._me, self._nodes = members.me, members.nodes
        self._fired = instruments.counter(
            "skyoap_alarm_notices_total", "alarm firings and recoveries this node raised", ["kind"]
        )
        self._lost = instruments.counter(
            "skyoap_alarm_minutes_taken_total", "bucket minutes another node evaluated first"
        )
        self._rounds = instruments.counter(
            "skyoap_alarm_rounds_total",
            "alarm rounds this node finished: its buckets evaluated, its notices sent",
        )
        self._bad: set[str] = set()
        self._handling = Handling()
        self._error_log = RateLimitedLog(log)
        self._task = Periodic("alarms", ROUND_S, self.run_once, "evaluating the alarm rules")

    def start(self) -> None:
        self._task.start()

    def close(self, timeout_s: float = 5.0) -> None:
        self._task.close(timeout_s)

    def minute(self) -> int:
        """The last minute to evaluate now: settled, whole (minutes since the epoch)."""
        return int((self._clock() - self._settle_s) // 60) - 1

    def run_once(self) -> None:
        """Evaluates the minutes due in the buckets this node owns now, and
        records and sends the notices it handles."""
        nodes = sorted(self._nodes())
        if self._me not in nodes:
            return
        settings = self._settings()
        rules = self._watched(settings)
        now = self.minute()
        owned = {n for n in range(BUCKETS) if owner(str(n), nodes) == self._me}
        buckets = [self._load(n, now, n in owned) for n in sorted(owned | self._handling.buckets())]
        for minute in sorted({m for b in buckets for m in self._due(b, now)}):
            self._evaluate(minute, rules, [b for b in buckets if minute in self._due(b, now)])
        stored = [
            (b.number, outbox) for b in buckets if (outbox := self._store(b, now, rules, nodes)) is not None
        ]
        self._handle(settings, stored)
        self._rounds.inc()

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

    def _load(self, number: int, now: int, owned: bool) -> _Bucket:
        doc, version = self._state.load(f"alarm:{number}")
        if doc is None:
            return _Bucket(number, version, owned, now - 1, {}, [])
        courses = {k: Course.of(v) for k, v in doc["courses"].items()}
        outbox = [Entry.of(e) for e in doc.get("outbox", ())]
        return _Bucket(number, version, owned, doc["minute"], courses, outbox)

    @staticmethod
    def _due(b: _Bucket, now: int) -> range:
        if not b.owned:
            return range(0)
        return range(max(b.last + 1, now - CATCH_UP_MINUTES + 1), now + 1)

    def _evaluate(self, minute: int, rules: Iterable[Watched], buckets: list[_Bucket]) -> None:
        by_number = {b.number: b for b in buckets}
        frames = Frames(self._metrics)  # each minute's rows read once for all the rules
        listings = Listings(frames, self._metrics, bucket_of, by_number)  # each window's entities, once
        reader = StoredMetrics(self._metrics, {})  # for what is evaluated entity by entity
        alarms: dict[str, list[tuple[_Bucket, str]]] = {}  # each rule's courses (none at rest), by key
        for b in buckets:
            for held in b.courses:
                name, key = course_of(held)
                alarms.setdefault(name, []).append((b, key))
        for w in rules:
            duration = period_ending(minute, w.rule.period)
            found = listings.of(w, duration)
            covered = found.covered(w.rule)
            wanted = covered & found.mine
            is_held = held_all(w, found.population, duration, frames, reader, wanted)
            # A step changes nothing for an entity at rest whose expression did not hold: skip those.
            stepped = is_held.copy()
            for _, key in alarms.get(w.rule.name, ()):
                if (alarmed := found.place.get(key)) is not None:
                    stepped[alarmed] = True
            fired: list[tuple[_Bucket, int, Entity]] = []  # the firings raised, for their snapshots
            for i in np.flatnonzero(stepped & wanted).tolist():
                e = found.population.entities[i]
                fired += self._step(
                    by_number[found.buckets[i]], w, found.keys[i], e, bool(is_held[i]), minute
                )
            # An alarm whose entity has no rows left in the window: the expression no longer holds.
            for b, key in alarms.get(w.rule.name, ()):
                listed_at = found.place.get(key)
                if listed_at is None or not covered[listed_at]:
                    fired += self._step(b, w, key, None, False, minute)
            taken = snapshots(w, [e for _, _, e in fired], duration, reader, frames)
            for (b, at, _), read in zip(fired, taken, strict=True):
                b.raised[at] = replace(b.raised[at], snapshot=read)

    def _step(
        self, b: _Bucket, w: Watched, key: str, e: Entity | None, is_held: bool, minute: int
    ) -> list[tuple[_Bucket, int, Entity]]:
        """Steps the entity's course; the firing it raised, if any: its bucket,
        where in the bucket's raised notices, and its entity."""
        kept_at = course_key(w.rule.name, key)
        course, notice = step(b.courses.get(kept_at, Course()), is_held, minute, w.rule)
        if course.state is State.NORMAL:
            b.courses.pop(kept_at, None)
        else:
            b.courses[kept_at] = course
        if notice is None:
            return []
        entity = e or entity_of_key(w, key)
        hooks = tuple(h.id for h in self._settings().hooks_of(w.rule))
        message = self._message(w, entity, notice)
        b.raised.append(Entry(message, str(entity.service_name), w.rule.expression, hooks, self._me))
        return [] if message.is_recovery else [(b, len(b.raised) - 1, entity)]

    def _message(self, w: Watched, entity: Entity, notice: Notice) -> AlarmMessage:
        scope = AlarmScope.of(w.scope)
        assert scope is not None, "watched() takes the rules of alarm scopes alone"
        id0, id1 = entity_ids(w.scope, entity)
        return AlarmMessage(
            scope_id=scope.value,
            scope=scope.defined_name,
            name=entity_name(w.scope, entity),
            id0=id0,
            id1=id1,
            rule_name=w.rule.name,
            message=w.rule.text(entity_name(w.scope, entity)),
            firing=notice.firing,
            start_ms=(notice.started_minute + 1) * 60_000,
            tags=w.rule.tags,
            recovery_ms=None if notice.recovered_minute is None else (notice.recovered_minute + 1) * 60_000,
        )

    def _store(
        self, b: _Bucket, now: int, rules: Iterable[Watched], nodes: Sequence[str]
    ) -> list[Entry] | None:
        """Stores the bucket's courses and outbox; the outbox stored, or None
        when another node changed the bucket first (the notices raised now
        are dropped: that node's evaluation stands)."""
        outbox = self._handling.progressed(b.outbox)
        if b.owned:  # the notices of a node that is gone, or that forgot them in a restart, are taken over
            outbox = [
                replace(e, by=self._me)
                if e.by not in nodes or (e.by == self._me and not self._handling.knows(e.key))
                else e
                for e in outbox
            ]
        evaluated = bool(self._due(b, now))
        outbox += b.raised
        if not evaluated and outbox == b.outbox:
            return outbox
        # The courses of rules no longer in the settings end here.
        kept = {w.rule.name for w in rules}
        courses = {k: c.to_json() for k, c in b.courses.items() if not evaluated or course_of(k)[0] in kept}
        doc = {
            "minute": now if evaluated else b.last,
            "courses": courses,
            "outbox": [e.to_json() for e in outbox],
        }
        if not self._state.swap(f"alarm:{b.number}", b.version, doc):
            self._lost.inc()
            return None
        self._handling.forget(b.number, outbox)
        for entry in b.raised:
            self._fired.labels("recovery" if entry.message.is_recovery else "firing").inc()
        if b.raised:
            crash_point("alarms-raised")  # stored, not yet recorded or sent
        return outbox

    def _handle(self, settings: AlarmSettings, stored: Sequence[tuple[int, list[Entry]]]) -> None:
        """Takes up the stored notices this node handles and does not know yet,
        records those not recorded, and sends the new ones."""
        sends: list[tuple[str, str, str, Request]] = []
        now_ms = int(self._clock() * 1000)
        for number, outbox in stored:
            for e in outbox:
                if e.by != self._me or self._handling.knows(e.key):
                    continue
                waiting = {}
                for hook_id in e.hooks:
                    hook = settings.hooks.get(hook_id)
                    if hook is None:  # no longer in the settings: done
                        continue
                    sent = requests(hook, e.message, now_ms)
                    waiting[hook_id] = len(sent)
                    sends += [(e.key, hook_id, hook.kind, r) for r in sent]
                self._handling.take(number, e, waiting)
        self._record(self._handling.unrecorded(e for _, outbox in stored for e in outbox))
        for key, hook_id, kind, request in sends:
            self._delivery.send(kind, request, functools.partial(self._handling.settled, key, hook_id))

    def _record(self, entries: Sequence[Entry]) -> None:
        """Stores the alarms of ``entries``, in their order: a firing before its recovery."""
        if not entries:
            return
        records = [e.record() for e in entries]
        try:
            refused = insert_published(
                self._records, AlarmRecord, records, memory_size(records), self._topics
            )
        except Exception as error:  # tried again next round
            self._error_log.error("record", "%d alarm records not stored yet: %s", len(entries), error)
            return
        # A record's key is its notice's.
        self._handling.recorded(e.key for e in entries if e.key not in refused)
