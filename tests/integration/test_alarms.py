"""Alarms on a real node: an error spike from an agent fires the rule, and
its webhook, a real HTTP server in the test, gets SkyWalking's payload. With
SkyWalking's own Python agent: the firing, its silence and its recovery, over
a hook that fails twice first."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from skyoap.agent import Agent
from skyoap.agent.traces import chain_trace, report
from skyoap.model.records import AlarmRecord
from skyoap.runtime import clock
from skyoap.storage.api import RecordSearch
from skyoap.wiring.config import NodeConfig
from skyoap.wiring.node import Node
from tests.integration.helpers import eventually
from tests.integration.test_query_agents import AGENT_PYTHON, away_from_midnight, get, start_app
from tests.unit.test_alarm_delivery import Hook

SETTINGS = """
rules:
  shop_errors_rule:
    expression: sum(service_sla < 10000) >= 1
    period: 1
    message: Service {name} failed calls
    tags: {level: CRITICAL}
hooks:
  webhook:
    default:
      is-default: true
      urls: [URL]
"""


def with_alarms(config: NodeConfig, settings: str, tmp_path: Path) -> NodeConfig:
    """``config`` with the alarm ``settings``, a minute evaluated 3 s after
    it ends, and metrics persisted within a second."""
    path = tmp_path / "alarm-settings.yml"
    path.write_text(settings)
    return config.with_options(
        alarm_settings=str(path), alarm_settle_s=3.0, metrics_persist_interval_s=0.5,
        metrics_l1_flush_period_s=0.2,
    )  # fmt: skip


def test_an_error_spike_fires_the_rule_at_its_webhook(
    node_config: NodeConfig, start_node: Callable[[NodeConfig], Node], tmp_path: Path
) -> None:
    hook = Hook([])
    node = start_node(with_alarms(node_config, SETTINGS.replace("URL", hook.url), tmp_path))
    try:
        agent = Agent(node.address, "shop", retry_interval_s=0.2)
        agent.register(timeout_s=60)
        instances, endpoints = {"shop": [agent.instance_uuid]}, {"shop": ["GET:/buy"]}
        segments = chain_trace("t1", ["shop"], clock.now_ms(), random.Random(1), instances, endpoints, 1.0)
        report(node.address, segments)
        eventually(lambda: len(hook.taken) == 1, timeout_s=150)
        ((fired,),) = [json.loads(hook.taken[0])]
        assert (fired["scope"], fired["name"], fired["ruleName"], fired["alarmMessage"], fired["id0"]) == (
            "SERVICE", "shop", "shop_errors_rule", "Service shop failed calls", "c2hvcA==.1",
        )  # fmt: skip
        assert fired["tags"] == [{"key": "level", "value": "CRITICAL"}]
        agent.close()
    finally:
        hook.shutdown()


SPIKE = """
rules:
  service_errors_rule:
    expression: sum(service_sla < 10000) >= 1
    period: 1
    silence-period: 1
    recovery-observation-period: 1
    message: Service {name} has failed calls
    tags: {level: CRITICAL}
hooks:
  webhook:
    default:
      is-default: true
      urls: [URL]
      recovery-urls: [URL]
"""


def next_minute() -> int:
    """Waits until a second into the next minute; that minute (since the epoch)."""
    minute = int(time.time() // 60) + 1
    time.sleep(max(0.0, minute * 60 + 1 - time.time()))
    return minute


@pytest.mark.parametrize("node_config", ["embedded"], indirect=True)
def test_an_error_spike_from_the_python_agent_fires_is_silenced_and_recovers(
    node_config: NodeConfig, start_node: Callable[[NodeConfig], Node], tmp_path: Path
) -> None:
    """shop, under SkyWalking's Python agent, fails calls in two minutes in a
    row, then none. The rule fires at the first minute; the second, in the
    firing's silence, sends nothing; the third, without failures, recovers it.
    The hook answers 500 twice before it takes anything: it gets each notice once."""
    assert AGENT_PYTHON.exists(), "run deploy/install.sh: it installs SkyWalking's Python agent"
    hook = Hook([500, 500])
    node = start_node(with_alarms(node_config, SPIKE.replace("URL", hook.url), tmp_path))
    shop, port = start_app("shop", node, STOCK_URL="http://127.0.0.1:9")
    try:
        away_from_midnight()
        first = next_minute()
        for _ in range(2):
            assert get(f"http://127.0.0.1:{port}/buy-fail") == 500
        next_minute()
        assert get(f"http://127.0.0.1:{port}/buy-fail") == 500
        eventually(lambda: len(hook.taken) == 2, timeout_s=300)
    finally:
        assert shop.stdin is not None
        shop.stdin.close()
        shop.wait(60)
        hook.shutdown()
    fired, recovered = (json.loads(body)[0] for body in hook.taken)
    fields = ("scope", "name", "id0", "ruleName", "alarmMessage", "startTime", "tags")
    assert {k: fired[k] for k in fields} == {
        "scope": "SERVICE", "name": "shop", "id0": "c2hvcA==.1", "ruleName": "service_errors_rule",
        "alarmMessage": "Service shop has failed calls", "startTime": (first + 1) * 60_000,
        "tags": [{"key": "level", "value": "CRITICAL"}],
    }  # fmt: skip
    assert "recoveryTime" not in fired
    assert (recovered["uuid"], recovered["recoveryTime"]) == (fired["uuid"], (first + 3) * 60_000)
    assert hook.asked == 4  # 500, 500, the firing, the recovery
    assert node.instruments.value("skyoap_alarm_sent_total", kind="webhook") == 2
    assert node.instruments.value("skyoap_alarm_retried_total", kind="webhook") == 2
    assert node.storage is not None
    stored = node.storage.records.search(AlarmRecord, RecordSearch(first_bucket=0, last_bucket=10**12))
    # The firing and its recovery, each a record of its own.
    assert sorted((r.alarm_id, r.uuid, r.message, r.recovery_time) for r in stored) == [
        (fired["uuid"], fired["uuid"], "Service shop has failed calls", 0),
        (f"{fired['uuid']}/recovery", fired["uuid"], "Service shop has failed calls", (first + 3) * 60_000),
    ]
