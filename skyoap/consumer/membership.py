"""A consumer's part in its group (aiokafka's group coordinator, client side):
the heartbeat thread, the grants the group's coordinator steps return,
applying them (the callbacks, the commit of revoked partitions, the hand
back), and every commit, serialised by one lock.

Threads: the heartbeat thread beats every ``heartbeat_interval_s``; the
caller's ``poll`` applies what the beats learned (``apply_grants``), because
the callbacks and a revoked partition's last commit belong to the caller;
asynchronous commits run on an executor of one thread, in order.

What a failed heartbeat leads to is ``HEARTBEAT_ERRORS``: the group forgot the
member (it missed its heartbeats for the session timeout) → join again at
once; storage failed, or the group document kept changing under it → beat
again at the next interval; anything else → the heartbeat thread stops and
every ``poll`` raises ``HeartbeatStopped``.
"""

from __future__ import annotations

import enum
import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor

from skyoap.consumer.group import ChannelState, CommitRefused, Group, NotAMember, channel_name
from skyoap.consumer.subscription import PartitionState, SubscriptionState, TopicPartition, Work
from skyoap.runtime.ratelimit import RateLimitedLog
from skyoap.runtime.retry import STORAGE_WRITES
from skyoap.storage.api import StorageError, TopicDAO

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)

Callback = Callable[[list[TopicPartition]], None]


class HeartbeatAction(enum.Enum):
    REJOIN = "rejoin"
    """The group no longer knows the member: its partitions are gone; join again at once."""
    RETRY = "retry"
    """Nothing is lost yet: beat again at the next interval."""
    FAIL = "fail"
    """Not something beating again fixes: stop, and raise it from ``poll``."""


HEARTBEAT_ERRORS: tuple[tuple[type[Exception], HeartbeatAction], ...] = (
    (NotAMember, HeartbeatAction.REJOIN),
    (StorageError, HeartbeatAction.RETRY),
)
"""Heartbeat error → action, the first class that matches; FAIL for the rest."""


def heartbeat_action(error: Exception) -> HeartbeatAction:
    return next((a for kind, a in HEARTBEAT_ERRORS if isinstance(error, kind)), HeartbeatAction.FAIL)


class HeartbeatStopped(RuntimeError):
    """The heartbeat thread failed in a way it cannot recover from; ``__cause__`` is why."""


class Membership:
    """A consumer's membership of ``group`` and its commits there.

    A consumer that ``join``s is a member: it heartbeats, and its grants
    decide what it owns. One that does not (``assign`` with a group) only
    commits, to partitions no member owns."""

    def __init__(
        self,
        group: Group,
        topics: TopicDAO,
        subscription: SubscriptionState,
        member_id: str,
        *,
        first_position: Callable[[TopicPartition, int | None], int],
        enable_auto_commit: bool = True,
        auto_commit_interval_s: float = 5.0,
        heartbeat_interval_s: float = 3.0,
        retry_backoff_s: float = 1.0,
        on_assigned: Callback | None = None,
        on_revoked: Callback | None = None,
        static: bool = False,
    ) -> None:
        self._group = group
        self._topics = topics
        self._subscription = subscription
        self.member_id = member_id
        self._first_position = first_position
        self.enable_auto_commit = enable_auto_commit
        self.auto_commit_interval_s = auto_commit_interval_s
        self.heartbeat_interval_s = heartbeat_interval_s
        self.retry_backoff_s = retry_backoff_s
        self._on_assigned = on_assigned
        self._on_revoked = on_revoked
        self._host = socket.gethostname()
        self.static = static
        """A static member (its id is its ``group_instance_id``) does not leave
        when it closes: restarted within the session timeout, it takes its
        partitions back and nobody else's move."""
        self._incarnation = uuid.uuid4().hex if static else ""
        self._joined: dict[str, int] | None = None
        """The topics (name → partition count) it joined for; None: not a member."""
        # One heartbeat at a time: an answer that arrives late must not replace a newer one.
        self._beat_lock = threading.Lock()
        self._rejoin = False
        self._commit_lock = threading.Lock()
        self._next_auto_commit = time.monotonic() + auto_commit_interval_s
        self._stopping = threading.Event()
        self._closed = False
        self._heartbeat: threading.Thread | None = None
        # Its thread starts with the first asynchronous commit.
        self._committer = ThreadPoolExecutor(1, thread_name_prefix=f"consumer-commit-{member_id}")
        self.done: Future[None] = Future()
        """The heartbeat thread's outcome: set when it stops, with its error if it died of one."""

    @property
    def is_member(self) -> bool:
        return self._joined is not None

    def join(self, topics: Mapping[str, int]) -> None:
        """Joins the group for ``topics`` (name → partition count); ``poll`` applies what it grants."""
        self._joined = joined = dict(topics)
        # A storage busy or unreachable for a moment is asked again (joining twice is joining once).
        self._subscription.granted(
            STORAGE_WRITES.call(
                lambda: self._group.join(self.member_id, joined, self._host, self._incarnation)
            )
        )

    def committed(self, tp: TopicPartition) -> int | None:
        return self._group.committed(str(tp))

    def start_state(self, tp: TopicPartition, version: int | None) -> PartitionState:
        """A partition's state as it starts being read: after the group's commit."""
        committed = self.committed(tp)
        position = self._first_position(tp, committed)
        return PartitionState(version, position, position, committed=committed)

    def raise_error(self) -> None:
        if self.done.done() and (stopped := self.done.exception()) is not None:
            raise HeartbeatStopped(
                f"the heartbeat thread of consumer {self.member_id} stopped: {stopped!r}; the group "
                "drops the member after its session timeout; close this consumer and open another"
            ) from stopped

    # Commits.

    def commit(
        self, offsets: Mapping[TopicPartition, int] | None = None, asynchronous: bool = False
    ) -> Future[None]:
        work = self._subscription.commit_work(offsets)
        if asynchronous:
            return self._committer.submit(self._commit, work)
        self._commit(work)
        done: Future[None] = Future()
        done.set_result(None)
        return done

    def _commit(self, work: Work) -> None:
        if not work:
            return
        with self._commit_lock:
            # The group checks offsets against the ends: one read of bounds per topic.
            ends = {
                channel_name(topic, b.partition): b.end
                for topic in {tp.topic for tp in work}
                for b in self._topics.bounds(topic)
            }
            member = self.member_id if self.is_member else None
            self._group.commit(member, {str(tp): v for tp, v in work.items()}, ends, self._incarnation)
            self._subscription.committed(work)

    def maybe_auto_commit(self) -> None:
        """Commits what ``poll`` returned, once every ``auto_commit_interval_s``."""
        now = time.monotonic()
        if not self.enable_auto_commit or now < self._next_auto_commit:
            return
        self._next_auto_commit = now + self.auto_commit_interval_s
        try:
            self.commit()
        except CommitRefused as e:
            log.warning("auto-commit refused: %s", e)
        except StorageError as e:
            # What was not committed is committed by a later try: retry soon, not after a whole interval.
            self._next_auto_commit = now + self.retry_backoff_s
            _limited.warning(f"auto-commit {self.member_id}", "auto-commit failed (retrying): %s", e)

    # Grants.

    def apply_grants(self) -> None:
        """Hands back what the group revoked (after the revoked callback and a
        commit), drops what it lost, and starts on what it was given. Runs in
        the caller's ``poll``, as do the callbacks."""
        if not self.is_member:
            return
        grants, versions = self._subscription.snapshot()
        revoked = [
            tp for tp in versions if str(tp) not in grants or grants[str(tp)].state is not ChannelState.OPEN
        ]
        closing = [tp for tp in revoked if str(tp) in grants]  # still ours to commit; the rest is lost
        given: dict[TopicPartition, int] = {}
        for g in grants.values():
            tp = TopicPartition(g.topic, g.partition)
            if g.state is ChannelState.OPEN and (tp not in versions or versions[tp] != g.version):
                given[tp] = g.version  # new, or given back under a new version after it was lost
        if revoked:
            if self._on_revoked is not None:
                self._on_revoked(sorted(revoked))
            if closing and self.enable_auto_commit:
                position = self._subscription.position
                try:
                    self.commit({tp: position(tp) - 1 for tp in closing if position(tp) > 0})
                except CommitRefused as e:
                    log.warning("commit before handing back %s refused: %s", closing, e)
            self._subscription.remove(revoked)
            self._subscription.release(str(tp) for tp in closing)
            self._heartbeat_once()  # hand them back now, not at the next heartbeat
        if given:
            started = {tp: self.start_state(tp, version) for tp, version in given.items()}
            self._subscription.add(started)
            if self._on_assigned is not None:
                self._on_assigned(sorted(started))

    # Heartbeats.

    def start(self) -> None:
        """Starts the heartbeat thread, if this consumer joined the group."""
        if self._heartbeat is not None or self._stopping.is_set() or not self.is_member:
            return
        self._heartbeat = threading.Thread(
            target=self._heartbeats, name=f"consumer-heartbeat-{self.member_id}", daemon=True
        )
        self._heartbeat.start()

    def _heartbeats(self) -> None:
        try:
            next_beat = time.monotonic() + self.heartbeat_interval_s
            while not self._stopping.wait(max(0.0, next_beat - time.monotonic())):
                next_beat = time.monotonic() + self.heartbeat_interval_s
                self._heartbeat_once()
        except Exception as e:  # FAIL: stop, and let poll say so rather than die silently
            log.exception("the heartbeat thread of %s stopped", self.member_id)
            self.done.set_exception(e)
            self._subscription.interrupt()
        else:
            self.done.set_result(None)

    def _heartbeat_once(self) -> None:
        """A heartbeat, and the action ``HEARTBEAT_ERRORS`` gives if it fails;
        raises only what it gives FAIL."""
        for _ in range(2):  # a heartbeat; a join after it if the group forgot the member
            try:
                self._beat()
                return
            except Exception as e:
                action = heartbeat_action(e)
                if action is HeartbeatAction.FAIL:
                    raise
                if action is HeartbeatAction.RETRY:
                    _limited.warning(
                        f"heartbeat {self.member_id}", "heartbeat of %s failed: %s", self.member_id, e
                    )
                    return
                if self._stopping.is_set():  # leaving anyway: joining again would undo it
                    return
                log.warning("%s; joining again", e)
                with self._beat_lock:
                    self._rejoin = True

    def _beat(self) -> None:
        assert self._joined is not None
        with self._beat_lock:
            released = self._subscription.to_release()
            if self._rejoin:
                grants = self._group.join(self.member_id, self._joined, self._host, self._incarnation)
                self._rejoin = False
            else:
                grants = self._group.heartbeat(self.member_id, released, self._incarnation)
            self._subscription.granted(grants, released)

    # Stopping.

    def close(self, timeout_s: float) -> None:
        """Stops heartbeating, waits for queued asynchronous commits, commits
        what ``poll`` returned (with auto-commit), and leaves the group. The
        last commit's errors are raised, after the member has left. Idempotent."""
        if self._closed:
            return
        self._closed = True
        deadline = time.monotonic() + timeout_s
        self._stopping.set()
        try:
            if self._heartbeat is not None:
                self._heartbeat.join(max(0.0, deadline - time.monotonic()))
                if self._heartbeat.is_alive():
                    log.warning(
                        "the heartbeat thread of %s did not stop within %.1f s", self.member_id, timeout_s
                    )
            # Commits queued before close come first: they must not land after the last one.
            self._committer.shutdown(wait=True)
            if self.enable_auto_commit and self._subscription.owns_any():
                try:
                    self.commit()
                except CommitRefused as e:
                    log.warning("auto-commit refused: %s", e)
        finally:
            if self.is_member and not self.static:
                self._group.leave(self.member_id)
