"""The consumer-group coordinator's steps on a group state, with a clock the
test moves."""

from __future__ import annotations

import pytest

from skyoap.consumer.group import (
    Channel,
    ChannelState,
    CommitRefused,
    Grant,
    Group,
    GroupState,
    Member,
    NotAMember,
    sticky_assignment,
)
from tests.unit.fakes import MemoryStateStore

TOPICS = {"segment": 4}


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def group(clock: Clock | None = None) -> Group:
    return Group(MemoryStateStore(), "analysts", session_timeout_s=12, clock=clock or Clock())


def owned(grants: dict[str, Grant], state: ChannelState = ChannelState.OPEN) -> list[str]:
    return sorted(n for n, g in grants.items() if g.state is state)


@pytest.mark.parametrize(
    ("consumers", "counts"),
    [(1, [4]), (2, [2, 2]), (3, [2, 1, 1]), (4, [1, 1, 1, 1]), (5, [1, 1, 1, 1, 0])],
)
def test_four_partitions_are_shared_evenly_among_one_to_five_consumers(
    consumers: int, counts: list[int]
) -> None:
    members = [f"c{i}" for i in range(consumers)]
    assignment = sticky_assignment(members, [f"segment/{p}" for p in range(4)], {})
    assert sorted(assignment) == ["segment/0", "segment/1", "segment/2", "segment/3"]
    assert [sum(1 for m in assignment.values() if m == c) for c in members] == counts


def test_a_rebalance_moves_only_the_partitions_that_must_move() -> None:
    channels = [f"segment/{p}" for p in range(6)]
    before = sticky_assignment(["a", "b", "c"], channels, {})
    assert before == dict(zip(channels, "aabbcc", strict=True))
    # c leaves: a and b keep all they had, and share c's.
    left = sticky_assignment(["a", "b"], channels, before)
    assert {c: m for c, m in left.items() if m == before[c]} == {c: m for c, m in before.items() if m != "c"}
    assert sorted(left.values()) == ["a", "a", "a", "b", "b", "b"]
    # d joins: each of a and b gives up one partition, no more.
    joined = sticky_assignment(["a", "b", "d"], channels, left)
    assert sum(1 for c in channels if joined[c] != left[c]) == 2
    assert sorted(joined.values()) == ["a", "a", "b", "b", "d", "d"]
    # 3 partitions, 2 members: the member that held two keeps both.
    assert sticky_assignment(["a", "b"], channels[:3], {"segment/1": "b", "segment/2": "b"}) == {
        "segment/0": "a", "segment/1": "b", "segment/2": "b",
    }  # fmt: skip


def test_a_member_leaving_leaves_the_others_their_partitions_and_versions() -> None:
    g = group()
    for m in "abc":
        g.join(m, {"segment": 6})
    for _ in range(2):  # each hands back what it must give up, then takes what it gets
        for m in "abc":
            g.heartbeat(m, frozenset(owned(g.heartbeat(m), ChannelState.CLOSING)))
    before = {m: g.heartbeat(m) for m in "ab"}
    assert [len(owned(grants)) for grants in before.values()] == [2, 2]
    g.leave("c")
    for m in "ab":
        after = g.heartbeat(m)
        assert {n: after[n] for n in before[m]} == before[m]  # nothing closing, same versions
        assert len(owned(after)) == 3


def test_the_group_reaches_the_even_assignment_as_members_join() -> None:
    g = group()
    for n in range(1, 6):
        g.join(f"c{n}", TOPICS)
        # Every member hands back what it must give up, then takes what it gets.
        for _ in range(2):
            for m in range(1, n + 1):
                grants = g.heartbeat(f"c{m}")
                g.heartbeat(f"c{m}", frozenset(owned(grants, ChannelState.CLOSING)))
        sizes = sorted((len(owned(g.heartbeat(f"c{m}"))) for m in range(1, n + 1)), reverse=True)
        assert sizes == {1: [4], 2: [2, 2], 3: [2, 1, 1], 4: [1, 1, 1, 1], 5: [1, 1, 1, 1, 0]}[n]


def test_a_partition_moves_only_after_its_owner_released_it_and_under_a_new_version() -> None:
    g = group()
    assert owned(g.join("a", TOPICS)) == ["segment/0", "segment/1", "segment/2", "segment/3"]
    assert g.join("b", TOPICS) == {}  # nothing is free yet: a still holds all four
    grants = g.heartbeat("a")
    assert owned(grants, ChannelState.CLOSING) == ["segment/2", "segment/3"]
    assert g.heartbeat("b") == {}
    g.heartbeat("a", frozenset({"segment/2", "segment/3"}))
    assert g.heartbeat("b") == {
        "segment/2": Grant("segment", 2, ChannelState.OPEN, 2),
        "segment/3": Grant("segment", 3, ChannelState.OPEN, 2),
    }
    # b leaves: its partitions go back to a, under a third version.
    g.leave("b")
    assert {n: x.version for n, x in g.heartbeat("a").items()} == {
        "segment/0": 1, "segment/1": 1, "segment/2": 3, "segment/3": 3,
    }  # fmt: skip


def test_a_member_silent_for_the_session_timeout_loses_its_partitions() -> None:
    clock = Clock()
    g = group(clock)
    g.join("a", TOPICS)
    g.join("b", TOPICS)
    g.heartbeat("a", frozenset(owned(g.heartbeat("a"), ChannelState.CLOSING)))
    assert owned(g.heartbeat("b")) == ["segment/2", "segment/3"]
    clock.now += 11.999  # a keeps beating, b falls silent
    assert owned(g.heartbeat("a")) == ["segment/0", "segment/1"]
    clock.now += 0.001
    assert owned(g.heartbeat("a")) == ["segment/0", "segment/1", "segment/2", "segment/3"]
    with pytest.raises(NotAMember, match="consumer b is not a member of group analysts"):
        g.heartbeat("b")


def test_a_closing_partition_held_past_the_session_timeout_is_taken_away() -> None:
    clock = Clock()
    g = group(clock)
    g.join("a", TOPICS)
    g.join("b", TOPICS)
    clock.now += 11
    assert owned(g.heartbeat("a"), ChannelState.CLOSING) == ["segment/2", "segment/3"]  # never released
    clock.now += 1
    assert owned(g.heartbeat("b")) == ["segment/2", "segment/3"]


def test_commits_are_refused_beyond_the_watermark_unassigned_or_fenced() -> None:
    g = group()
    g.join("a", TOPICS)
    ends = {f"segment/{p}": 10 for p in range(4)}
    g.commit("a", {"segment/0": (3, 1)}, ends)
    assert g.committed("segment/0") == 3
    with pytest.raises(CommitRefused, match=r"offset 10 of segment/0: it is beyond the high watermark \(the "
                       r"partition's records end at 9\)"):  # fmt: skip
        g.commit("a", {"segment/0": (10, 1)}, ends)
    g.join("b", TOPICS)
    g.heartbeat("a", frozenset({"segment/2", "segment/3"}))
    g.heartbeat("b")
    with pytest.raises(CommitRefused, match=r"consumer a cannot commit segment/3: the partition is not "
                       r"assigned to it \(it is b's now\)"):  # fmt: skip
        g.commit("a", {"segment/3": (5, 1)}, ends)
    # b leaves and a gets segment/3 again, under version 3: its old version 1 is stale.
    g.leave("b")
    g.heartbeat("a")
    with pytest.raises(CommitRefused, match=r"its ownership \(version 1\) is fenced; the partition was "
                       r"reassigned at version 3"):  # fmt: skip
        g.commit("a", {"segment/3": (5, 1)}, ends)
    g.commit("a", {"segment/3": (5, 3)}, ends)
    assert g.committed("segment/3") == 5
    with pytest.raises(CommitRefused, match="member a of the group owns it"):
        g.commit(None, {"segment/3": (6, None)}, ends)


def test_a_topic_that_lost_partitions_terminates_their_channels() -> None:
    g = group()
    g.join("a", {"log": 2})
    g.join("a", {"log": 1})
    assert g.state().channels["log/1"].state is ChannelState.TERMINATED
    assert owned(g.heartbeat("a")) == ["log/0"]


def test_the_state_reads_and_writes_the_stored_document_unchanged() -> None:
    stored = {  # as every release so far has stored it
        "members": {
            "a": {"topics": ["segment"], "heartbeat_ms": 1000, "host": "10.0.0.1"},
            "b": {"topics": ["log", "segment"], "heartbeat_ms": 2000, "host": "", "incarnation": "run-2"},
        },
        "channels": {
            "segment/0": {"state": "OPEN", "owner": "a", "version": 3, "since_ms": 900},
            "segment/1": {"state": "WAIT", "owner": None, "version": 0, "since_ms": 0},
        },
        "committed": {"segment/0": 41},
        "topics": {"segment": 2, "log": 1},
    }
    state = GroupState.from_json(stored)
    assert state.members["b"] == Member(["log", "segment"], 2000, "", "run-2")
    assert state.channels["segment/0"] == Channel(ChannelState.OPEN, "a", 3, 900)
    assert state.to_json() == stored
    assert GroupState.from_json(None) == GroupState()
