"""The consumer-group coordinator: shares a group's partitions among its live
members, evenly, and moves them without two members processing one at once.

The coordinator is not a process. A group's state is one document in storage
(``StateStore``), and every member runs the coordinator's steps on it when it
joins, heartbeats, commits or leaves, replacing the document only if nobody
changed it meanwhile. The group therefore survives the loss of any member or
node: whoever heartbeats next finds the dead and rebalances.

Each partition is a *channel* with a state and a version (the Tunnel way):

    WAIT -> OPEN (owner, version n) -> CLOSING -> CLOSED -> OPEN (new owner, n+1)

A partition that must move is first CLOSING: its owner stops fetching, may
commit, and releases it on its next poll; only then is it OPEN for the new
owner, under a new version. An owner that misses its heartbeats for the
session timeout, or holds a CLOSING partition that long, loses it at once.
Commits carry the version the member was given, so a stale owner's commit
after the partition moved is refused. TERMINATED marks a partition that
no longer exists (its topic has fewer partitions than the group knew).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from skyoap.runtime.retry import RetryPolicy
from skyoap.storage.api import StateStore, StorageError

T = TypeVar("T")

SESSION_TIMEOUT_S = 12.0
"""A member with no heartbeat for this long is gone (TDengine's 12 s)."""
HEARTBEAT_INTERVAL_S = 3.0


class ChannelState(enum.Enum):
    WAIT = "WAIT"
    OPEN = "OPEN"
    CLOSING = "CLOSING"
    CLOSED = "CLOSED"
    TERMINATED = "TERMINATED"


class CommitRefused(ValueError):
    """A commit the group does not take; the message says why."""


class NotAMember(CommitRefused):
    """The member is no longer in the group (it left, or missed its heartbeats)."""


class Fenced(CommitRefused):
    """A static member whose ``group_instance_id`` a newer consumer took over:
    this one must stop (Kafka's FENCED_INSTANCE_ID)."""


def channel_name(topic: str, partition: int) -> str:
    return f"{topic}/{partition}"


def split_channel(name: str) -> tuple[str, int]:
    topic, _, partition = name.rpartition("/")
    return topic, int(partition)


def sticky_assignment(
    members: list[str], channels: list[str], current: Mapping[str, str | None]
) -> dict[str, str]:
    """Channel → member, even and sticky: each member gets
    ``len(channels) // len(members)`` channels and ``len(channels) %
    len(members)`` of them one more (4 partitions: 2 members get 2 each; 3 get
    2, 1, 1; 5: one is idle), and a channel stays with its ``current`` owner
    while that owner is a member with room for it, so a rebalance moves only
    the channels that must move (Kafka's cooperative sticky assignor)."""
    if not members:
        return {}
    channels = sorted(channels, key=split_channel)
    held = {m: [c for c in channels if current.get(c) == m] for m in members}
    # The members holding the most keep the extra channels; ties by name.
    by_holding = sorted(members, key=lambda m: (-len(held[m]), m))
    base, extra = divmod(len(channels), len(members))
    room = {m: base + (1 if n < extra else 0) for n, m in enumerate(by_holding)}
    out: dict[str, str] = {}
    for m in by_holding:
        for c in held[m][: room[m]]:
            out[c] = m
        room[m] -= min(room[m], len(held[m]))
    free = iter(c for c in channels if c not in out)
    for m in sorted(members):
        for _ in range(room[m]):
            out[next(free)] = m
    return out


@dataclass(frozen=True)
class Grant:
    """A channel as its owner sees it."""

    topic: str
    partition: int
    state: ChannelState
    version: int


@dataclass
class Member:
    topics: list[str]
    heartbeat_ms: int
    host: str = ""
    incarnation: str = ""
    """Set for a static member: the run of it that joined last (older runs are fenced)."""


@dataclass
class Channel:
    """A partition's place in the group."""

    state: ChannelState = ChannelState.WAIT
    owner: str | None = None
    version: int = 0
    since_ms: int = 0

    def move(self, state: ChannelState, now: int, owner: str | None = None) -> None:
        self.state, self.owner, self.since_ms = state, owner, now


@dataclass
class GroupState:
    """One group's shared state, stored as one JSON document."""

    members: dict[str, Member] = field(default_factory=dict)
    channels: dict[str, Channel] = field(default_factory=dict)
    committed: dict[str, int] = field(default_factory=dict)
    """Channel → the last offset the group processed."""
    topics: dict[str, int] = field(default_factory=dict)
    """Topic → the partitions the group knows it has."""

    def to_json(self) -> dict[str, Any]:
        members = {}
        for name, m in self.members.items():
            doc: dict[str, Any] = {"topics": m.topics, "heartbeat_ms": m.heartbeat_ms, "host": m.host}
            if m.incarnation:
                doc["incarnation"] = m.incarnation
            members[name] = doc
        channels = {
            name: {"state": ch.state.value, "owner": ch.owner, "version": ch.version, "since_ms": ch.since_ms}
            for name, ch in self.channels.items()
        }
        return {"members": members, "channels": channels, "committed": self.committed, "topics": self.topics}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any] | None) -> GroupState:
        if doc is None:
            return cls()
        return cls(
            members={
                name: Member(
                    list(m["topics"]), int(m["heartbeat_ms"]), m.get("host", ""), m.get("incarnation", "")
                )
                for name, m in doc["members"].items()
            },
            channels={
                name: Channel(ChannelState(ch["state"]), ch["owner"], int(ch["version"]), int(ch["since_ms"]))
                for name, ch in doc["channels"].items()
            },
            committed={name: int(offset) for name, offset in doc["committed"].items()},
            topics={topic: int(count) for topic, count in doc["topics"].items()},
        )


def load_group(store: StateStore, name: str) -> GroupState | None:
    """Group ``name``'s state as stored; None if it has none."""
    doc, _ = store.load(f"group:{name}")
    return None if doc is None else GroupState.from_json(doc)


class _Changed(Exception):
    """Another member replaced the group's state during a step."""

    retriable = True


SWAPS = RetryPolicy(attempts=100, first_delay_s=0.005, multiplier=2.0, max_delay_s=0.05)
"""A step whose state another member changed meanwhile is run again on the new
state, after a jittered pause so that contenders spread out."""


class Group:
    """The steps of one group's coordinator on its shared state."""

    def __init__(
        self,
        store: StateStore,
        group: str,
        session_timeout_s: float = SESSION_TIMEOUT_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not group or "/" in group:
            raise ValueError(f"a group name must be non-empty and without '/': {group!r}")
        self._store = store
        self.name = group
        self.session_timeout_ms = int(session_timeout_s * 1000)
        self._clock = clock

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _update(self, step: Callable[[GroupState], T]) -> T:
        """Runs ``step`` on the state and stores the result; again if another
        member changed the state meanwhile."""
        key = f"group:{self.name}"

        def attempt() -> T:
            doc, version = self._store.load(key)
            state = GroupState.from_json(doc)
            result = step(state)
            if not self._store.swap(key, version, state.to_json()):
                raise _Changed()
            return result

        try:
            return SWAPS.call(attempt, retriable=lambda e: isinstance(e, _Changed))
        except _Changed:
            raise StorageError(
                f"group {self.name}: its state kept changing under {SWAPS.attempts} attempts"
            ) from None

    def state(self) -> GroupState:
        return load_group(self._store, self.name) or GroupState()

    # The steps members take.

    def join(
        self, member: str, topics: Mapping[str, int], host: str = "", incarnation: str = ""
    ) -> dict[str, Grant]:
        """Adds ``member``, subscribed to ``topics`` (name → partition count).

        A static member (its ``group_instance_id`` is its member id) that joins
        again before its session timed out is the same member: it keeps its
        partitions at their versions and nobody else's move (Kafka's KIP-345).
        Its new ``incarnation`` fences the one before: that one's heartbeats
        and commits raise Fenced from now on."""

        def step(state: GroupState) -> dict[str, Grant]:
            now = self._now_ms()
            state.members[member] = Member(sorted(topics), now, host, incarnation)
            state.topics.update(topics)
            self._rebalance(state, now)
            return self._grants(state, member)

        return self._update(step)

    def _member(self, state: GroupState, member: str, incarnation: str) -> Member:
        """The member's entry; NotAMember once it is gone, Fenced once a newer
        incarnation of it joined."""
        info = state.members.get(member)
        if info is None:
            raise NotAMember(f"consumer {member} is not a member of group {self.name}: it left or missed "
                             f"its heartbeats for {self.session_timeout_ms // 1000} s")  # fmt: skip
        if info.incarnation != incarnation:
            raise Fenced(
                f"consumer {member} of group {self.name} was fenced: another consumer joined with its "
                "group_instance_id; close this one"
            )
        return info

    def heartbeat(
        self, member: str, released: frozenset[str] = frozenset(), incarnation: str = ""
    ) -> dict[str, Grant]:
        """Keeps ``member`` alive and hands back the CLOSING channels it
        ``released``; returns its channels. Raises NotAMember once it is gone."""

        def step(state: GroupState) -> dict[str, Grant]:
            now = self._now_ms()
            self._member(state, member, incarnation).heartbeat_ms = now
            for name in released:
                ch = state.channels.get(name)
                if ch and ch.owner == member and ch.state is ChannelState.CLOSING:
                    ch.move(ChannelState.CLOSED, now)
            self._rebalance(state, now)
            return self._grants(state, member)

        return self._update(step)

    def leave(self, member: str, incarnation: str = "") -> None:
        """Removes ``member`` (not a newer incarnation of it) and rebalances."""

        def step(state: GroupState) -> None:
            info = state.members.get(member)
            if info is not None and info.incarnation == incarnation:
                del state.members[member]
            self._rebalance(state, self._now_ms())

        self._update(step)

    def commit(
        self,
        member: str | None,
        offsets: Mapping[str, tuple[int, int | None]],
        ends: Mapping[str, int],
        incarnation: str = "",
    ) -> None:
        """Records ``offsets`` (channel → (last processed offset, version)) as
        the group's progress. ``ends`` are the partitions' ends. A member
        commits only channels it owns at that version; ``member`` None is a
        statically assigned consumer, which commits channels no member owns."""

        def step(state: GroupState) -> None:
            if member is not None and member in state.members:
                self._member(state, member, incarnation)
            for name, (offset, version) in offsets.items():
                end = ends[name]
                if offset >= end:
                    raise CommitRefused(
                        f"cannot commit offset {offset} of {name}: it is beyond the high watermark "
                        f"(the partition's records end at {end - 1})"
                    )
                if offset < -1:
                    raise CommitRefused(f"cannot commit offset {offset} of {name}: offsets start at 0")
                ch = state.channels.get(name)
                owner = ch.owner if ch else None
                if member is None:
                    if owner is not None:
                        raise CommitRefused(
                            f"cannot commit {name} for group {self.name}: member {owner} of the group owns it"
                        )
                elif owner != member:
                    raise CommitRefused(
                        f"consumer {member} cannot commit {name}: the partition is not assigned to it"
                        + (f" (it is {owner}'s now)" if owner else "")
                    )
                elif ch is not None and ch.version != version:
                    raise CommitRefused(
                        f"consumer {member} cannot commit {name}: its ownership (version {version}) is "
                        f"fenced; the partition was reassigned at version {ch.version}"
                    )
                state.committed[name] = offset

        self._update(step)

    def committed(self, name: str) -> int | None:
        return self.state().committed.get(name)

    # The coordinator's own work, done inside every step.

    def _rebalance(self, state: GroupState, now: int) -> None:
        members = state.members
        for m in [m for m, info in members.items() if now - info.heartbeat_ms >= self.session_timeout_ms]:
            del members[m]
        channels = state.channels
        for topic, count in state.topics.items():
            for p in range(count):
                channels.setdefault(channel_name(topic, p), Channel(since_ms=now))
        for name, ch in channels.items():
            topic, p = split_channel(name)
            if p >= state.topics.get(topic, 0):
                ch.move(ChannelState.TERMINATED, ch.since_ms)
        for topic in state.topics:
            subscribers = [m for m, info in members.items() if topic in info.topics]
            live = [
                n
                for n, ch in channels.items()
                if split_channel(n)[0] == topic and ch.state is not ChannelState.TERMINATED
            ]
            desired = sticky_assignment(subscribers, live, {n: channels[n].owner for n in live})
            for name in live:
                self._move(channels[name], desired.get(name), members, now)

    def _move(self, ch: Channel, target: str | None, members: Mapping[str, Member], now: int) -> None:
        if ch.owner is not None and ch.owner not in members:  # its owner is gone: nobody processes it
            ch.move(ChannelState.CLOSED, now)
        elif ch.state is ChannelState.CLOSING and now - ch.since_ms >= self.session_timeout_ms:
            ch.move(ChannelState.CLOSED, now)  # held too long
        if ch.state is ChannelState.OPEN and ch.owner != target:
            ch.move(ChannelState.CLOSING, now, ch.owner)
        elif ch.state is ChannelState.CLOSING and ch.owner == target:
            ch.move(ChannelState.OPEN, now, ch.owner)  # it stays where it was
        elif ch.state in (ChannelState.WAIT, ChannelState.CLOSED) and target is not None:
            ch.move(ChannelState.OPEN, now, target)
            ch.version += 1

    def _grants(self, state: GroupState, member: str) -> dict[str, Grant]:
        return {
            name: Grant(*split_channel(name), ch.state, ch.version)
            for name, ch in state.channels.items()
            if ch.owner == member
        }
