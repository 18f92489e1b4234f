"""Storage faults under agent load, on real processes: an Elasticsearch of the
module's own (so that freezing or killing it disturbs no other test), the
session's Redis, and a mixed ``skyoap node`` process. Each test prints its
figures and asserts that every segment taken is stored once and that each
level's metrics are exactly those of the segments taken."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from elasticsearch import Elasticsearch

from skyoap.deploy.cluster import LocalCluster, NodeProcess
from skyoap.deploy.servers import ElasticsearchServer, RedisServer
from skyoap.model.inventory import ServiceInventory
from skyoap.model.metrics import Downsampling
from skyoap.proto.skywalking import common_pb2, management_pb2
from skyoap.runtime.scrape import Scrape, read_metrics
from skyoap.storage.config import StorageConfig
from skyoap.storage.select import open_storage
from tests.conftest import FAST_CLUSTER
from tests.faults.proxy import AnswerLosingProxy
from tests.faults.support import AgentLoad, Ledger, Outcome, Sums, settle, storage_config
from tests.integration.helpers import rss_mb

pytestmark = pytest.mark.faults

NODE = [
    "--metrics-persist-interval-s", "1",
    "--metrics-l1-flush-period-s", "0.2",
    "--es-request-timeout-s", "2",
    "--call-deadline-s", "3",
    "--memory-limit-mb", "64",
    "--topic-lease-s", "3",
]  # fmt: skip
"""Timeouts short enough that a fault passes every one of them in seconds."""
ANSWERED = {"OK", "UNAVAILABLE", "RESOURCE_EXHAUSTED"}


@pytest.fixture(scope="module")
def es() -> Iterator[ElasticsearchServer]:
    server = ElasticsearchServer().start()
    yield server
    server.stop()


MixedNode = Callable[..., tuple[NodeProcess, StorageConfig]]


@pytest.fixture
def mixed_node(redis_server: RedisServer, tmp_path: Path) -> Iterator[MixedNode]:
    """Starts a mixed node with ``options`` on an Elasticsearch (reached at
    ``es_hosts`` if given); returns it and its storage as the test reads it."""
    made: list[LocalCluster] = []

    def start(
        es: ElasticsearchServer, *options: str, es_hosts: str | None = None
    ) -> tuple[NodeProcess, StorageConfig]:
        cluster = LocalCluster.create(
            tmp_path / "cluster", redis_server.url, es_hosts or es.url, [*FAST_CLUSTER, *NODE]
        )
        made.append(cluster)
        node = cluster.add("mixed", *options)
        return node, storage_config(es.url, redis_server.url, cluster.state.prefix)

    yield start
    for cluster in made:
        cluster.down()


def assert_exact(outcome: Outcome, levels: list[tuple[Downsampling, Sums, Sums]], ledger: Ledger) -> None:
    assert set(ledger.refused) <= ANSWERED - {"OK"}, ledger.refused
    assert outcome.accepted > 0
    for level, want, got in levels:
        assert got == want, level
    assert (outcome.lost, outcome.double_counted) == (0, 0)


def keep_alive_answers(address: str, calls: int, timeout_s: float, until: str = "") -> list[str]:
    """What new instances' keepAlive calls get (they read storage for ids),
    up to the first that gets ``until``."""
    codes = []
    with grpc.insecure_channel(address) as channel:
        keep_alive = channel.unary_unary(
            "/skywalking.v3.ManagementService/keepAlive",
            request_serializer=management_pb2.InstancePingPkg.SerializeToString,
            response_deserializer=common_pb2.Commands.FromString,
        )
        for n in range(calls):
            try:
                keep_alive(
                    management_pb2.InstancePingPkg(service=f"new-{n}", serviceInstance="i"), timeout=timeout_s
                )
                codes.append("OK")
            except grpc.RpcError as e:
                codes.append(e.code().name)
            if codes[-1] == until:
                break
    return codes


def test_elasticsearch_frozen_past_every_timeout_then_thawed(
    es: ElasticsearchServer, mixed_node: MixedNode
) -> None:
    node, config = mixed_node(es)
    with AgentLoad(node.address, calls_per_s=10, segments_per_call=5, threads=2) as load:
        time.sleep(4)
        es.kill(signal.SIGSTOP)
        frozen_at = time.monotonic()
        try:
            # Each reads storage within its 3 s deadline. Without that, the read
            # would take the client's four tries of 2 s, past the 6 s the agent waits
            # (DEADLINE_EXCEEDED). A call that finds its name's read claimed by the
            # registration worker (a race a busy machine makes likelier) reads nothing
            # and answers OK, its names kept to register once storage answers; so
            # new names are tried until one reads storage (at most 3 s each).
            during = keep_alive_answers(node.address, 4, timeout_s=6, until="UNAVAILABLE")
            time.sleep(max(0.0, 15 - (time.monotonic() - frozen_at)))  # 7 request timeouts, 15 rounds
        finally:
            es.kill(signal.SIGCONT)
        time.sleep(4)
    outcome, levels = settle(
        "Elasticsearch frozen (SIGSTOP) 15 s", "2 agents x 50 segments/s", load.ledger, config, node
    )
    assert_exact(outcome, levels, load.ledger)
    assert during[-1] == "UNAVAILABLE" and set(during) <= {"UNAVAILABLE", "OK"}, during  # none waited 6 s
    kept = [f"new-{n}" for n, code in enumerate(during) if code == "OK"]
    storage = open_storage(config)
    try:
        assert sorted(storage.inventory.get_many(ServiceInventory, kept)) == kept
    finally:
        storage.close()


def test_writes_that_land_while_their_answers_are_lost(
    es: ElasticsearchServer, mixed_node: MixedNode
) -> None:
    """Between the node and Elasticsearch, the answers are lost for 20 s: the
    writes sent meanwhile land, and the node times out on each of them. It
    must find out from the rows which landed, not write them again."""
    proxy = AnswerLosingProxy(es.port)
    try:
        node, config = mixed_node(es, es_hosts=proxy.url)
        with AgentLoad(node.address, calls_per_s=10, segments_per_call=5, threads=2) as load:
            time.sleep(4)
            proxy.losing.set()
            time.sleep(20)  # the answers of many writes: every bulk waits out its 2 s timeout
            proxy.losing.clear()
            time.sleep(4)
        outcome, levels = settle(
            "answers to bulk writes lost for 20 s (they land; the node times out)",
            "2 agents x 50 segments/s", load.ledger, config, node,
        )  # fmt: skip
        assert_exact(outcome, levels, load.ledger)
        assert outcome.unconfirmed > 0  # the node did not know whether its writes had landed
    finally:
        proxy.close()


def test_elasticsearch_killed_and_restarted_on_its_data(
    es: ElasticsearchServer, mixed_node: MixedNode
) -> None:
    node, config = mixed_node(es)
    with AgentLoad(node.address, calls_per_s=10, segments_per_call=5, threads=2) as load:
        time.sleep(4)
        es.restart(signal.SIGKILL)
        time.sleep(4)
    outcome, levels = settle(
        "Elasticsearch killed (SIGKILL), restarted on its data",
        "2 agents x 50 segments/s",
        load.ledger,
        config,
        node,
    )
    assert_exact(outcome, levels, load.ledger)


def bulk_noise(url: str, stop: threading.Event) -> None:
    """Bulk writes of its own, to keep a one-thread write pool busy."""
    with Elasticsearch(url) as client:
        doc = {"index": {"_index": "noise"}}
        body = [x for n in range(200) for x in (doc, {"n": n})]
        while not stop.is_set():
            with contextlib.suppress(Exception):  # rejections are the point
                client.bulk(operations=body)


def rejected_writes(url: str) -> int:
    with Elasticsearch(url) as client:
        nodes = client.nodes.stats(metric="thread_pool")["nodes"]
        return sum(n["thread_pool"]["write"]["rejected"] for n in nodes.values())


def test_elasticsearch_answering_429(mixed_node: MixedNode) -> None:
    busy = ElasticsearchServer(
        settings={"thread_pool.write.size": 1, "thread_pool.write.queue_size": 1}
    ).start()
    try:
        node, config = mixed_node(busy)
        stop = threading.Event()
        noise = [threading.Thread(target=bulk_noise, args=(busy.url, stop), daemon=True) for _ in range(4)]
        with AgentLoad(node.address, calls_per_s=20, segments_per_call=10, threads=2) as load:
            for t in noise:
                t.start()
            time.sleep(15)
            stop.set()
        for t in noise:
            t.join(30)
        assert rejected_writes(busy.url) > 0  # Elasticsearch did answer 429s
        outcome, levels = settle(
            "Elasticsearch answering 429 (write pool of 1, queue of 1)", "2 agents x 200 segments/s",
            load.ledger, config, node,
        )  # fmt: skip
        assert_exact(outcome, levels, load.ledger)
    finally:
        busy.stop()


def allocator_mb(scrape: Scrape) -> str:
    return ", ".join(
        f"C allocator {state} {scrape.value('skyoap_allocator_bytes', state=state) / 2**20:.0f} MB"
        for state in ("in_use", "free", "mapped")
    )


def test_overload_is_shed_whole_within_the_deadline_and_memory_stays_bounded(
    es: ElasticsearchServer, mixed_node: MixedNode
) -> None:
    """Six agents send 8 KB segments as fast as they are answered while
    Elasticsearch is frozen for 15 s: the node holds at most its 8 MB budget
    (by its own count, and its RSS grows by less than 8 times that), sheds the
    rest whole with RESOURCE_EXHAUSTED, answers every call, and stores every
    segment it took once it can.

    Every call is answered within its 3 s deadline, give or take the time the
    busy node takes to read and check it: the bound is half the freeze, which
    a call that waited for room until Elasticsearch thawed would pass."""
    node, config = mixed_node(es, "--memory-limit-mb", "8")
    load = AgentLoad(
        node.address,
        calls_per_s=1000,
        segments_per_call=50,
        threads=6,
        client_timeout_s=20,
        payload_bytes=2000,
    )
    with load:
        time.sleep(3)
        baseline = peak = rss_mb(node.pid)
        held = 0.0
        at_peak = allocator_mb(read_metrics(node.admin))
        es.kill(signal.SIGSTOP)
        try:
            for _ in range(30):  # 15 s
                rss, scrape = rss_mb(node.pid), read_metrics(node.admin)
                held = max(held, scrape.value("skyoap_memory_held_bytes"))
                if rss > peak:  # what the allocator held then: in use, or freed and kept
                    peak, at_peak = rss, allocator_mb(scrape)
                time.sleep(0.5)
        finally:
            es.kill(signal.SIGCONT)
    outcome, levels = settle(
        "overload while Elasticsearch is frozen 15 s (8 MB budget)", "6 agents, 50 segments of 8 KB a call",
        load.ledger, config, node,
    )  # fmt: skip
    print(
        f"RSS {baseline:.0f} MB before the freeze, {peak:.0f} MB at most ({at_peak}); "
        f"held {held / 2**20:.1f} MB at most"
    )
    assert_exact(outcome, levels, load.ledger)
    assert load.ledger.refused["RESOURCE_EXHAUSTED"] > 0
    assert load.ledger.slowest_answer_s < 15 / 2, load.ledger.slowest_answer_s
    assert held <= 8 * 2**20 + 50 * 9000  # the budget, give or take the call being admitted
    assert peak - baseline < 8 * 8
