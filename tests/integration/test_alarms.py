"""Alarms on a real node: an error spike from an agent fires the rule, and
its webhook, a real HTTP server in the test, gets SkyWalking's payload."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

from skyoap.agent import Agent
from skyoap.agent.traces import chain_trace, report
from skyoap.runtime import clock
from skyoap.wiring.config import NodeConfig
from skyoap.wiring.node import Node
from tests.integration.helpers import eventually
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


def test_an_error_spike_fires_the_rule_at_its_webhook(
    node_config: NodeConfig, start_node: Callable[[NodeConfig], Node], tmp_path: Path
) -> None:
    hook = Hook([])
    settings = tmp_path / "alarm-settings.yml"
    settings.write_text(SETTINGS.replace("URL", hook.url))
    node = start_node(
        node_config.with_options(
            alarm_settings=str(settings), alarm_settle_s=1.0, metrics_persist_interval_s=0.5,
            metrics_l1_flush_period_s=0.2,
        )
    )  # fmt: skip
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
