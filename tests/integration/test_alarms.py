"""Alarms on a real node: an error spike from an agent fires the rule, and
its webhook, a real HTTP server in the test, gets SkyWalking's payload, once:
the test waits further alarm rounds (``skyoap_alarm_rounds_total``) for any
resend. With SkyWalking's own Python agent: the firing, its silence and its
recovery, over a hook that fails twice first."""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


def rounds_later(node: Node, rounds: int = 2) -> None:
    """Waits until the node has finished ``rounds`` more alarm rounds: what
    they would send again has been sent."""
    done = node.instruments.value("skyoap_alarm_rounds_total")
    eventually(lambda: node.instruments.value("skyoap_alarm_rounds_total") >= done + rounds, timeout_s=120)


def stored_alarms(node: Node, count: int) -> list[AlarmRecord]:
    """The node's alarm records, once there are ``count``."""
    assert node.storage is not None
    storage = node.storage

    def found() -> list[AlarmRecord]:
        records = storage.records.search(AlarmRecord, RecordSearch(first_bucket=0, last_bucket=10**12))
        assert len(records) == count, records
        return records

    return eventually(found)


def away_from_the_minute_s_end() -> None:
    """Waits, if need be, until a trace started now ends in the same minute."""
    if time.time() % 60 > 55:
        time.sleep(61 - time.time() % 60)


def test_an_error_spike_fires_the_rule_at_its_webhook_once(
    node_config: NodeConfig, start_node: Callable[[NodeConfig], Node], tmp_path: Path
) -> None:
    hook = Hook([])
    node = start_node(with_alarms(node_config, SETTINGS.replace("URL", hook.url), tmp_path))
    try:
        agent = Agent(node.address, "shop", retry_interval_s=0.2)
        agent.register(timeout_s=60)
        instances, endpoints = {"shop": [agent.instance_uuid]}, {"shop": ["GET:/buy"]}
        away_from_the_minute_s_end()
        start_ms = clock.now_ms()
        segments = chain_trace("t1", ["shop"], start_ms, random.Random(1), instances, endpoints, 1.0)
        report(node.address, segments)
        eventually(lambda: len(hook.taken) == 1, timeout_s=150)
        rounds_later(node)
        agent.close()
    finally:
        hook.shutdown()
    (body,) = hook.taken
    (fired,) = json.loads(body)
    (record,) = stored_alarms(node, 1)
    assert re.fullmatch("[0-9a-f]{32}", fired["uuid"]) and record.uuid == fired["uuid"]
    assert fired == {
        "scopeId": 1, "scope": "SERVICE", "name": "shop", "uuid": record.uuid, "id0": "c2hvcA==.1", "id1": "",
        "ruleName": "shop_errors_rule", "alarmMessage": "Service shop failed calls",
        "startTime": (start_ms // 60_000 + 1) * 60_000, "tags": [{"key": "level", "value": "CRITICAL"}],
    }  # fmt: skip
    assert node.instruments.value("skyoap_alarm_sent_total", kind="webhook") == 1


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
        rounds_later(node)
    finally:
        assert shop.stdin is not None
        shop.stdin.close()
        shop.wait(60)
        hook.shutdown()
    fired, recovered = (json.loads(body)[0] for body in hook.taken)
    firing: dict[str, Any] = {
        "scopeId": 1, "scope": "SERVICE", "name": "shop", "uuid": fired["uuid"], "id0": "c2hvcA==.1",
        "id1": "", "ruleName": "service_errors_rule", "alarmMessage": "Service shop has failed calls",
        "startTime": (first + 1) * 60_000, "tags": [{"key": "level", "value": "CRITICAL"}],
    }  # fmt: skip
    assert re.fullmatch("[0-9a-f]{32}", fired["uuid"])
    assert fired == firing
    assert recovered == {**firing, "recoveryTime": (first + 3) * 60_000}
    assert hook.asked == 4  # 500, 500, the firing, the recovery
    assert node.instruments.value("skyoap_alarm_sent_total", kind="webhook") == 2
    assert node.instruments.value("skyoap_alarm_retried_total", kind="webhook") == 2
    # The firing and its recovery, each a record of its own.
    assert sorted((r.alarm_id, r.uuid, r.message, r.recovery_time) for r in stored_alarms(node, 2)) == [
        (fired["uuid"], fired["uuid"], "Service shop has failed calls", 0),
        (f"{fired['uuid']}/recovery", fired["uuid"], "Service shop has failed calls", (first + 3) * 60_000),
    ]
