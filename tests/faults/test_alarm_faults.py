"""Alarms in a cluster of real processes: two aggregators and a receiver
(``skyoap node`` processes) on the session's Elasticsearch and Redis, a
webhook served by the test. Each entity's alarms are raised by one
aggregator; one killed while the rules' periods run, right after it stored
notices it had not yet recorded or sent, leaves the other to record and send
them, and to evaluate its entities from then on, each firing once. The test
waits on states and on the survivor's alarm rounds
(``skyoap_alarm_rounds_total``), never on the clock: ``errors_3_of_10_rule``'s
period is long enough that the third failing minute falls in it however long
the failover takes up to the 240 s the test waits."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from skyoap.agent.traces import chain_trace, report
from skyoap.alarm.rounds import bucket_of
from skyoap.deploy.cluster import LocalCluster, NodeProcess
from skyoap.deploy.servers import ElasticsearchServer, RedisServer
from skyoap.model.records import AlarmRecord
from skyoap.runtime import clock
from skyoap.storage.api import RecordSearch
from skyoap.storage.select import open_storage
from tests.conftest import FAST_CLUSTER, wipe
from tests.faults.support import storage_config
from tests.integration.cluster_support import metric, rendezvous_owner
from tests.integration.helpers import eventually
from tests.integration.test_alarms import next_minute
from tests.unit.test_alarm_delivery import Hook

pytestmark = pytest.mark.faults

# errors_rule: two failing minutes in a row fire it, once in ten minutes at most.
# errors_3_of_10_rule: three failing minutes in ten.
SETTINGS = """
rules:
  errors_rule:
    expression: sum(service_sla < 10000) >= 2
    period: 2
    silence-period: 10
    message: Service {name} fails
  errors_3_of_10_rule:
    expression: sum(service_sla < 10000) >= 3
    period: 10
    silence-period: 10
    message: Service {name} keeps failing
hooks:
  webhook:
    default:
      is-default: true
      urls: [URL]
"""
NODE = ["--metrics-persist-interval-s", "0.5", "--metrics-l1-flush-period-s", "0.2"]
ALARMS = ["--alarm-settle-s", "3"]


@pytest.fixture
def hook() -> Iterator[Hook]:
    h = Hook([])
    yield h
    h.shutdown()


def services_of_each(aggregators: list[NodeProcess], count: int) -> list[str]:
    """``count`` service names whose alarms each aggregator raises: a
    service's bucket is owned by rendezvous hashing over the aggregators."""
    addresses = [a.address for a in aggregators]
    owned: dict[str, list[str]] = {a: [] for a in addresses}
    for i in range(1000):
        name = f"svc-{i}"
        mine = owned[rendezvous_owner(str(bucket_of(name)), addresses)]
        if len(mine) < count:
            mine.append(name)
    assert all(len(names) == count for names in owned.values())
    return sorted(n for names in owned.values() for n in names)


def fail(receiver: NodeProcess, services: list[str], rng: random.Random) -> None:
    """One failing call to each service, now."""
    for name in services:
        instances, endpoints = {name: [f"{name}-1"]}, {name: ["GET:/"]}
        trace = chain_trace(f"{name}-{rng.random()}", [name], clock.now_ms(), rng, instances, endpoints, 1.0)
        report(receiver.address, trace)


def test_an_aggregator_killed_after_raising_alarms_loses_none_and_repeats_none(
    redis_server: RedisServer, es_server: ElasticsearchServer, hook: Hook, tmp_path: Path
) -> None:
    settings = tmp_path / "alarm-settings.yml"
    settings.write_text(SETTINGS.replace("URL", hook.url))
    local = LocalCluster.create(tmp_path / "cluster", redis_server.url, es_server.url, [*FAST_CLUSTER, *NODE])
    try:
        options = ["--alarm-settings", str(settings), *ALARMS]
        # The first dies right after the swap that stores the first notices it raises.
        doomed = local.add("aggregator", *options, env={"SKYOAP_CRASH_AT": "alarms-raised"})
        survivor = local.add("aggregator", *options)
        receiver = local.add("receiver")
        eventually(lambda: metric(receiver, "skyoap_remote_targets") == 2, timeout_s=60)
        services = services_of_each([doomed, survivor], 3)
        rng = random.Random(7)
        first = next_minute()
        fail(receiver, services, rng)
        next_minute()
        # Evaluating this minute, each aggregator fires `errors_rule` for its services;
        # the doomed one dies after storing its first firings.
        fail(receiver, services, rng)
        eventually(lambda: metric(receiver, "skyoap_remote_targets") == 1, timeout_s=150)
        fail(receiver, services, rng)  # a third failing minute, in errors_3_of_10_rule's period
        eventually(lambda: len(hook.taken) == 2 * len(services), timeout_s=240)
        rounds = metric(survivor, "skyoap_alarm_rounds_total")
        # Two more rounds: nothing fires again, nothing is sent again.
        eventually(lambda: metric(survivor, "skyoap_alarm_rounds_total") >= rounds + 2, timeout_s=120)
        messages = [m for body in hook.taken for m in json.loads(body)]
        assert len(messages) == 2 * len(services)
        assert Counter((m["ruleName"], m["name"]) for m in messages) == {
            (rule, name): 1 for rule in ("errors_rule", "errors_3_of_10_rule") for name in services
        }
        assert len({m["uuid"] for m in messages}) == len(messages)
        assert all("recoveryTime" not in m for m in messages)
        # errors_rule fired evaluating the second failing minute, whichever node evaluated it.
        assert {m["startTime"] for m in messages if m["ruleName"] == "errors_rule"} == {(first + 2) * 60_000}
        # Every notice was sent by the survivor: the doomed node died before sending any.
        assert metric(survivor, "skyoap_alarm_sent_total", kind="webhook") == len(messages)
        config = storage_config(es_server.url, redis_server.url, local.state.prefix)
        storage = open_storage(config)
        try:
            stored = storage.records.search(AlarmRecord, RecordSearch(first_bucket=0, last_bucket=10**12))
        finally:
            storage.close()
        assert sorted(r.uuid for r in stored) == sorted(m["uuid"] for m in messages)
    finally:
        local.down()
        wipe(es_server.url, redis_server.url, local.state.prefix)
