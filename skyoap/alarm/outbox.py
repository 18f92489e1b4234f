"""A bucket's outbox: the notices its alarms raised, kept in the bucket's
document from the swap that raised them until they are recorded (stored as
an ``AlarmRecord``, which publishes them on the ``alarm`` topic) and every
hook has taken them or given them up.

A notice is handled by one node, the one it names (``by``): the node that
raised it or, once that node has left the cluster (killed, scaled in) or has
started again and forgotten it, the bucket's owner, which takes it over by a
swap. So a notice whose node dies after the swap that raised it is still
recorded and sent, by the next owner; a hook may then get it twice, with the
same firing id, and a record is written twice by its key (its topic may
carry it twice)."""

from __future__ import annotations

import dataclasses
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from skyoap.alarm.messages import AlarmMessage
from skyoap.model.metrics import minute_bucket
from skyoap.model.records import AlarmRecord
from skyoap.model.stream import Text, Words
from skyoap.vocabulary.alarm_identity import tag_terms


@dataclass(frozen=True)
class Entry:
    message: AlarmMessage
    service: str
    """The entity's service (a relation's source), for the record."""
    expression: str
    hooks: tuple[str, ...]
    """The ids (``kind.name``) of the hooks that have yet to take it."""
    by: str
    """The node that handles it."""
    recorded: bool = False
    snapshot: str = ""
    """What the expression read when it fired (``evaluation.snapshot``); "" in a recovery."""

    @property
    def key(self) -> str:
        """The notice's id: its firing's, and for a recovery that and ``/recovery``."""
        return f"{self.message.firing}/recovery" if self.message.is_recovery else self.message.firing

    def record(self) -> AlarmRecord:
        """The notice as stored and published."""
        m = self.message
        return AlarmRecord(
            alarm_id=self.key,
            uuid=m.firing,
            time_bucket=minute_bucket(m.start_ms),
            scope=m.scope_id,
            name=m.name,
            id0=m.id0,
            id1=m.id1,
            service=self.service,
            rule_name=m.rule_name,
            message=Words(m.message),
            start_time=m.start_ms,
            expression=Text(self.expression),
            snapshot=Text(self.snapshot),
            recovery_time=m.recovery_ms or 0,
            tags=tag_terms(m.tags),
        )

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "message": self.message.to_json()}

    @classmethod
    def of(cls, doc: Mapping[str, Any]) -> Entry:
        return cls(**{**doc, "message": AlarmMessage.of(doc["message"]), "hooks": tuple(doc["hooks"])})


@dataclass
class _Handled:
    bucket: int
    recorded: bool = False
    waiting: Counter[str] = field(default_factory=Counter)
    """Requests not yet settled, by hook id."""
    done: set[str] = field(default_factory=set)
    """Hooks whose every request is settled."""


class Handling:
    """The notices this node handles, and how far each has got: whether it
    was recorded, and which hooks are done with it. Delivery threads settle
    requests while the alarm round reads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._handled: dict[str, _Handled] = {}

    def knows(self, key: str) -> bool:
        with self._lock:
            return key in self._handled

    def buckets(self) -> set[int]:
        with self._lock:
            return {h.bucket for h in self._handled.values()}

    def take(self, bucket: int, entry: Entry, waiting: Mapping[str, int]) -> None:
        """``entry`` is this node's now, with ``waiting[hook]`` requests sent
        to each of its hooks (a hook with none is done)."""
        with self._lock:
            self._handled[entry.key] = _Handled(
                bucket,
                entry.recorded,
                Counter({h: n for h, n in waiting.items() if n}),
                {h for h in entry.hooks if not waiting.get(h)},
            )

    def settled(self, key: str, hook: str) -> None:
        """One request of ``key`` to ``hook`` is done with."""
        with self._lock:
            h = self._handled.get(key)
            if h is None:
                return
            h.waiting[hook] -= 1
            if h.waiting[hook] <= 0:
                del h.waiting[hook]
                h.done.add(hook)

    def recorded(self, keys: Iterable[str]) -> None:
        with self._lock:
            for key in keys:
                if key in self._handled:
                    self._handled[key].recorded = True

    def unrecorded(self, entries: Iterable[Entry]) -> list[Entry]:
        """Those of ``entries`` this node handles and has not recorded."""
        with self._lock:
            return [e for e in entries if e.key in self._handled and not self._handled[e.key].recorded]

    def progressed(self, entries: Iterable[Entry]) -> list[Entry]:
        """``entries`` as they stand now: this node's with their progress, the
        finished ones left out."""
        out = []
        with self._lock:
            for e in entries:
                h = self._handled.get(e.key)
                if h is not None:
                    e = dataclasses.replace(
                        e,
                        recorded=e.recorded or h.recorded,
                        hooks=tuple(x for x in e.hooks if x not in h.done),
                    )
                if not (e.recorded and not e.hooks):
                    out.append(e)
        return out

    def forget(self, bucket: int, kept: Iterable[Entry]) -> None:
        """The bucket's outbox was stored holding ``kept``: the notices of it
        that are not among them are finished."""
        keys = {e.key for e in kept}
        with self._lock:
            for key in [k for k, h in self._handled.items() if h.bucket == bucket and k not in keys]:
                del self._handled[key]
