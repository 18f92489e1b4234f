"""The consumer client and its groups on real storage: commits and where the
next member starts, rebalancing as members come and go, a member killed
mid-stream, and the commits the group refuses."""

from __future__ import annotations

import io
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from skyoap.consumer.client import Consumer, TopicPartition
from skyoap.consumer.group import CommitRefused, Fenced, load_group
from skyoap.deploy.consumer_table import print_consumers
from skyoap.storage.config import StorageConfig, StorageKind
from skyoap.storage.select import OpenStorage
from skyoap.wiring.config import NodeConfig
from skyoap.wiring.node import Node
from tests.entries import Entry, publish
from tests.integration.helpers import WAIT_S, eventually

TOPIC = "metrics"
FAST = {"session_timeout_s": 3.0, "heartbeat_interval_s": 0.5, "fetch_idle_s": 0.02}


def fill(storage: OpenStorage, per_partition: int, partitions: int = 4) -> None:
    storage.topics.install({TOPIC: partitions})
    for p in range(partitions):
        publish(storage.topics, TOPIC, p, [Entry(f"k{p}-{i}", {"i": i}, 1) for i in range(per_partition)])


@pytest.fixture
def consumers(node_config: NodeConfig) -> Iterator[list[Consumer]]:
    """Consumers a test opens; each is closed after it."""
    made: list[Consumer] = []
    yield made
    for c in made:
        c.close()


def open_consumer(
    config: StorageConfig, made: list[Consumer], group: str | None = "g1", **options: object
) -> Consumer:
    consumer = Consumer.open(config, group, **{**FAST, **options})
    made.append(consumer)
    return consumer


def drain(consumer: Consumer, want: int) -> list[tuple[int, int]]:
    """(partition, offset) of the next ``want`` records the consumer polls."""
    seen: list[tuple[int, int]] = []
    deadline = time.monotonic() + WAIT_S
    while len(seen) < want and time.monotonic() < deadline:
        seen += [(r.partition, r.offset) for r in consumer.poll(0.2, max_records=want - len(seen))]
    return seen


def test_a_new_member_resumes_after_the_commit_and_another_group_uses_its_reset(
    node_config: NodeConfig, storage: OpenStorage, consumers: list[Consumer]
) -> None:
    fill(storage, 10, partitions=1)
    tp = TopicPartition(TOPIC, 0)
    first = open_consumer(node_config.storage, consumers, member_id="first", enable_auto_commit=False)
    first.subscribe([TOPIC])
    assert drain(first, 4) == [(0, 0), (0, 1), (0, 2), (0, 3)]
    first.commit({tp: 3})
    assert first.committed(tp) == 3
    # What an operator sees: the member, its partition, the commit and the lag.
    out = io.StringIO()
    print_consumers(storage.topics, storage.state, "g1", out)
    lines = out.getvalue().splitlines()
    assert lines[lines.index("partition  state  owner  version  committed  end  lag") + 2].split() == [
        "metrics/0",
        "OPEN",
        "first",
        "1",
        "3",
        "10",
        "6",
    ]
    assert "lag in all: 6 records (a partition never committed counts from offset 0)" in lines
    with pytest.raises(ValueError, match="there is no consumer group 'nope'; the groups are g1"):
        print_consumers(storage.topics, storage.state, "nope", out)
    first.close()

    second = open_consumer(node_config.storage, consumers)
    second.subscribe([TOPIC])
    assert drain(second, 2) == [(0, 4), (0, 5)]
    assert second.position(tp) == 6

    latest = open_consumer(node_config.storage, consumers, "g2", auto_offset_reset="latest")
    latest.subscribe([TOPIC])
    eventually(lambda: latest.poll(0.1) == [] and latest.assignment() == {tp})
    assert latest.position(tp) == 10
    earliest = open_consumer(node_config.storage, consumers, "g3")
    earliest.subscribe([TOPIC])
    assert drain(earliest, 1) == [(0, 0)]
    assert earliest.committed(tp) is None


def test_members_joining_and_leaving_rebalance_evenly(
    node_config: NodeConfig, storage: OpenStorage, consumers: list[Consumer]
) -> None:
    fill(storage, 0)
    events: list[tuple[str, str, list[int]]] = []

    def recorder(who: str, what: str):  # type: ignore[no-untyped-def]
        return lambda tps: events.append((who, what, [tp.partition for tp in tps]))

    members = []
    for name in ("a", "b", "c"):
        c = open_consumer(
            node_config.storage, consumers, member_id=name, on_assigned=recorder(name, "assigned"),
            on_revoked=recorder(name, "revoked"),
        )  # fmt: skip
        c.subscribe([TOPIC])
        members.append(c)

    def sizes() -> list[int]:
        for c in members:
            c.poll(0.05)
        return [len(c.assignment()) for c in members]

    eventually(lambda: sizes() == [2, 1, 1])
    assert ("a", "assigned", [0, 1, 2, 3]) in events
    assert ("a", "revoked", [2, 3]) in events
    members.pop().close()  # c leaves: b takes its partition
    eventually(lambda: sizes() == [2, 2])
    assert {tp.partition for c in members for tp in c.assignment()} == {0, 1, 2, 3}


def test_a_killed_member_s_partitions_move_and_the_group_misses_no_offset(
    node_config: NodeConfig, storage: OpenStorage, consumers: list[Consumer]
) -> None:
    fill(storage, 100)
    args = [
        sys.executable,
        "-m",
        "tests.integration.consumer_child",
        "--storage",
        node_config.storage.kind.value,
    ]
    if node_config.storage.kind is StorageKind.EMBEDDED:
        args += ["--embedded-path", node_config.storage.embedded_path]
    else:
        args += ["--es-hosts", node_config.storage.es_hosts, "--prefix", node_config.storage.es_index_prefix]
    child = subprocess.Popen(
        [*args, "--group", "g1", "--topic", TOPIC, "--commit-every", "10", "--session-timeout-s", "3"],
        stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parents[2],
    )  # fmt: skip
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(child.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    eventually(lambda: sum(1 for x in lines if x.startswith("seen")) >= 40)

    survivor = open_consumer(node_config.storage, consumers, enable_auto_commit=False)
    survivor.subscribe([TOPIC])
    seen_by_survivor: list[tuple[int, int]] = []

    def survivor_holds(partitions: int) -> bool:
        seen_by_survivor.extend((r.partition, r.offset) for r in survivor.poll(0.05))
        return len(survivor.assignment()) == partitions

    eventually(lambda: survivor_holds(2))
    child.send_signal(signal.SIGKILL)
    child.wait()
    reader.join(5)
    seen_by_child = [tuple(map(int, x.split()[1:])) for x in lines if x.startswith("seen")]
    last_commit = max((i for i, x in enumerate(lines) if x.startswith("committed")), default=-1)
    since_commit = sum(1 for x in lines[last_commit + 1 :] if x.startswith("seen"))

    # Within the session timeout (3 s here) the survivor holds all four, and reads them to the end.
    eventually(lambda: survivor_holds(4))
    everything = {(p, o) for p in range(4) for o in range(100)}
    eventually(lambda: survivor_holds(4) and everything <= set(seen_by_child) | set(seen_by_survivor))
    assert len(seen_by_child) < 400  # it was killed mid-stream
    duplicates = len(set(seen_by_child) & set(seen_by_survivor))
    assert duplicates <= since_commit, (duplicates, since_commit)
    assert len(seen_by_survivor) == len(set(seen_by_survivor))


class Child:
    """A consumer_child process and the lines it wrote."""

    def __init__(self, config: StorageConfig, *options: str) -> None:
        args = [sys.executable, "-m", "tests.integration.consumer_child", "--storage", config.kind.value]
        if config.kind is StorageKind.EMBEDDED:
            args += ["--embedded-path", config.embedded_path]
        else:
            args += ["--es-hosts", config.es_hosts, "--prefix", config.es_index_prefix]
        self.proc = subprocess.Popen(
            [*args, "--group", "g1", "--topic", TOPIC, *options],
            stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parents[2],
        )  # fmt: skip
        self.lines: list[str] = []
        stdout = self.proc.stdout
        assert stdout is not None
        self._reader = threading.Thread(
            target=lambda: self.lines.extend(iter(stdout.readline, "")), daemon=True
        )
        self._reader.start()

    def events(self) -> list[str]:
        return [x.strip() for x in self.lines if x.startswith(("assigned", "revoked"))]

    def held(self) -> set[int]:
        held: set[int] = set()
        for event in self.events():
            what, *partitions = event.split()
            held = (
                held | set(map(int, partitions)) if what == "assigned" else held - set(map(int, partitions))
            )
        return held

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self._reader.join(5)


def test_a_static_member_restarted_within_its_session_takes_its_partitions_back_and_nobody_moves(
    node_config: NodeConfig, storage: OpenStorage
) -> None:
    """Kafka's KIP-345: a member with a group_instance_id is killed (SIGKILL)
    and started again within its session timeout (10 s here)."""
    fill(storage, 1000)
    static = ["--session-timeout-s", "10", "--commit-every", "5", "--pause-s", "0.2"]
    children = [Child(node_config.storage, *static, "--group-instance-id", name) for name in ("a", "b")]
    restarted: Child | None = None
    try:

        def channels() -> dict[str, tuple[str, str | None, int]]:
            found = load_group(storage.state, "g1")
            assert found is not None
            return {n: (ch.state.value, ch.owner, ch.version) for n, ch in found.channels.items()}

        eventually(
            lambda: sorted(str(o) for s, o, _ in channels().values() if s == "OPEN") == ["a", "a", "b", "b"]
        )

        def settled() -> bool:
            """Each child holds what the group gave it (the first to join took four, then gave two back)."""
            return all(
                c.held() == {int(n.split("/")[1]) for n, (_, owner, _) in channels().items() if owner == name}
                for c, name in zip(children, ("a", "b"), strict=True)
            )

        eventually(settled)
        before = channels()
        of_a = [int(n.split("/")[1]) for n, (_, owner, _) in before.items() if owner == "a"]
        b_events = children[1].events()

        children[0].kill()
        restarted = Child(node_config.storage, *static, "--group-instance-id", "a")
        eventually(
            lambda: restarted is not None and restarted.events() == [f"assigned {' '.join(map(str, of_a))}"]
        )
        time.sleep(12)  # past the session timeout the killed process would have had
        # Every partition is where it was, at the version it had: nothing was revoked or moved.
        assert channels() == before
        assert children[1].events() == b_events
        assert restarted.events() == [f"assigned {' '.join(map(str, of_a))}"]
        assert all(x.split()[0] == "seen" or x.strip() == "committed" for x in restarted.lines[1:])
    finally:
        for c in [*children, *([restarted] if restarted else [])]:
            if c.proc.poll() is None:
                c.kill()


def test_a_newer_instance_fences_the_older_one(
    node_config: NodeConfig, storage: OpenStorage, consumers: list[Consumer]
) -> None:
    fill(storage, 5, partitions=2)
    old = open_consumer(node_config.storage, consumers, group_instance_id="a", heartbeat_interval_s=3600)
    old.subscribe([TOPIC])
    assert len(drain(old, 10)) == 10
    new = open_consumer(node_config.storage, consumers, group_instance_id="a")
    new.subscribe([TOPIC])
    eventually(lambda: new.poll(0.1) is not None and len(new.assignment()) == 2)
    with pytest.raises(Fenced, match="consumer a of group g1 was fenced: another consumer joined with its "
                       "group_instance_id; close this one"):  # fmt: skip
        old.commit({TopicPartition(TOPIC, 0): 4})
    new.commit({TopicPartition(TOPIC, 0): 4})
    assert new.committed(TopicPartition(TOPIC, 0)) == 4


def test_lag_and_committed_offsets_are_exported_by_the_node_and_by_a_consumer(
    node_config: NodeConfig,
    storage: OpenStorage,
    consumers: list[Consumer],
    start_node: Callable[[NodeConfig], Node],
) -> None:
    fill(storage, 10, partitions=2)
    node = start_node(node_config.with_options(admin_port=0, publish_topics=False))
    consumer = open_consumer(node_config.storage, consumers, admin_port=0)
    consumer.subscribe([TOPIC])
    assert len(drain(consumer, 20)) == 20
    consumer.commit({TopicPartition(TOPIC, 0): 3, TopicPartition(TOPIC, 1): 9})
    want = {
        'skyoap_consumer_lag{group="g1",partition="0",topic="metrics"}': 6.0,
        'skyoap_consumer_lag{group="g1",partition="1",topic="metrics"}': 0.0,
        'skyoap_consumer_committed_offset{group="g1",partition="0",topic="metrics"}': 3.0,
        'skyoap_consumer_committed_offset{group="g1",partition="1",topic="metrics"}': 9.0,
    }
    assert consumer.admin is not None
    for address in (f"{node.admin_host}:{node.admin_port}", f"{consumer.admin.host}:{consumer.admin.port}"):
        body = urllib.request.urlopen(f"http://{address}/metrics", timeout=10).read().decode()
        found = {
            line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in body.splitlines()
            if line.startswith(("skyoap_consumer_lag{", "skyoap_consumer_committed_offset{"))
        }
        assert found == want


def test_commits_of_a_stale_owner_beyond_the_watermark_or_unassigned_are_refused(
    node_config: NodeConfig, storage: OpenStorage, consumers: list[Consumer]
) -> None:
    fill(storage, 5, partitions=2)
    stale = open_consumer(node_config.storage, consumers, member_id="stale", heartbeat_interval_s=3600)
    stale.subscribe([TOPIC])
    assert len(drain(stale, 10)) == 10
    tp0 = TopicPartition(TOPIC, 0)
    with pytest.raises(
        CommitRefused, match=r"cannot commit offset 5 of metrics/0: it is beyond the high watermark"
    ):
        stale.commit({tp0: 5})
    with pytest.raises(CommitRefused, match=r"cannot commit metrics/7: not assigned to this consumer"):
        stale.commit({TopicPartition(TOPIC, 7): 1})

    # "stale" stops beating; once the session timeout passes, the next member takes both partitions.
    fresh = open_consumer(node_config.storage, consumers, member_id="fresh")
    fresh.subscribe([TOPIC])
    eventually(lambda: fresh.poll(0.1) is not None and len(fresh.assignment()) == 2)
    with pytest.raises(CommitRefused, match=r"consumer stale cannot commit metrics/0: the partition is not "
                       r"assigned to it \(it is fresh's now\)"):  # fmt: skip
        stale.commit({tp0: 4})
    assert fresh.committed(tp0) is None


def test_offsets_for_times_replay_from_the_first_record_published_at_or_after_a_time(
    node_config: NodeConfig, storage: OpenStorage, consumers: list[Consumer]
) -> None:
    storage.topics.install({TOPIC: 2})
    publish(storage.topics, TOPIC, 0, [Entry(f"k{i}", {"i": i}, 1000 * (i + 1)) for i in range(5)])
    publish(storage.topics, TOPIC, 1, [Entry("k", {"i": 0}, 9000)])
    tp0, tp1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)
    consumer = open_consumer(node_config.storage, consumers, group=None)
    assert consumer.offsets_for_times({tp0: 2500, tp1: 2500}) == {tp0: 2, tp1: 0}
    assert consumer.offsets_for_times({tp0: 0, tp1: 9000}) == {tp0: 0, tp1: 0}
    assert consumer.offsets_for_times({tp0: 5001, tp1: 9001}) == {tp0: None, tp1: None}
    consumer.assign([tp0])
    consumer.seek(tp0, 3)
    assert drain(consumer, 2) == [(0, 3), (0, 4)]
