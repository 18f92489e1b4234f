"""An aggregator killed (SIGKILL, by itself) at each point of a write that
matters to the topics, under agent load, on real processes: between keeping
the versions a write overwrites and the write (``versions-kept``), between
the write and handing its ranges over (``rows-written``), and between making
entries readable and completing their ranges (``topics-readable``). Another
aggregator takes over. Every version of a row that anyone could read from
storage, and every stored segment, must be on its topic."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from skyoap.deploy.cluster import LocalCluster
from skyoap.deploy.servers import ElasticsearchServer, RedisServer
from tests.conftest import FAST_CLUSTER, wipe
from tests.faults.support import AgentLoad, VersionWatch, settle, storage_config, unpublished_rows
from tests.faults.test_cluster_faults import UNPERSISTED_S
from tests.faults.test_storage_faults import NODE
from tests.integration.helpers import eventually

pytestmark = pytest.mark.faults

LOAD = "1 agent x 50 segments/s, 1 receiver"
REACHED = {"versions-kept": 60, "rows-written": 60, "topics-readable": 12}
"""How many times each point is passed before the kill: a few seconds into the load."""

ENOUGH_VERSIONS = 10
"""Versions of rows the watch must see for the check to tell anything."""


@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    server = RedisServer().start()
    yield server
    server.stop()


@pytest.mark.parametrize("point", list(REACHED))
def test_an_aggregator_killed_at_any_point_of_a_write_leaves_every_version_on_its_topic(
    point: str, redis: RedisServer, es_server: ElasticsearchServer, tmp_path: Path
) -> None:
    local = LocalCluster.create(tmp_path / "cluster", redis.url, es_server.url, [*FAST_CLUSTER, *NODE])
    config = storage_config(es_server.url, redis.url, local.state.prefix)
    try:
        doomed = local.add("aggregator", env={"SKYOAP_CRASH_AT": f"{point}:{REACHED[point]}"})
        receiver = local.add("receiver")
        with VersionWatch(config) as watch, AgentLoad(receiver.address, 10, 5) as load:
            eventually(lambda: local.exited(doomed))
            killed_at = time.time()
            local.remove(doomed)
            local.add("aggregator")
            time.sleep(5)
            # A slow machine reads fewer versions a second: the load goes on until enough are seen.
            eventually(lambda: len(watch.seen) >= ENOUGH_VERSIONS)
        held = load.ledger.taken_between(killed_at - UNPERSISTED_S, killed_at)
        outcome, _ = settle(f"aggregator killed at {point}", LOAD, load.ledger, config, local.nodes(), held)
        assert outcome.double_counted == 0
        assert outcome.lost <= held
        assert outcome.stored == outcome.accepted  # the receiver stores the records
        assert len(watch.seen) >= ENOUGH_VERSIONS, "the watch saw too few versions to tell anything"
        assert unpublished_rows(config, watch.seen) == 0
    finally:
        local.down()
        wipe(es_server.url, redis.url, local.state.prefix)
