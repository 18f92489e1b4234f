"""What each kind of hook is sent for a firing and its recovery."""

from __future__ import annotations

import base64
import json
import urllib.parse
from typing import Any

from skyoap.alarm.messages import AlarmMessage, requests
from skyoap.alarm.settings import parse_settings

HOOKS = parse_settings("""
hooks:
  webhook:
    default:
      urls: [http://h/fired]
      recovery-urls: [http://h/recovered]
      headers: {Authorization: Bearer t}
    quiet:
      urls: [http://h/fired-only]
  slack:
    default:
      webhooks: [https://hooks.slack.com/services/x]
  dingtalk:
    default:
      webhooks: [{url: "https://oapi.dingtalk.com/robot/send?access_token=t", secret: s}]
  feishu:
    default:
      webhooks: [{url: "https://open.feishu.cn/hook/t", secret: s}]
  pagerduty:
    default:
      integration-keys: [k1]
  discord:
    default:
      webhooks: [{url: "https://discord.com/api/webhooks/1", username: bot}]
""").hooks

FIRED = AlarmMessage(1, "SERVICE", "shop", "c2hvcA==.1", "", "sla_rule", 'shop said "no"', "f1", 1_000,
                     (("level", "WARNING"),))  # fmt: skip
RECOVERED = AlarmMessage(**{**FIRED.__dict__, "recovery_ms": 61_000})


def sent(hook: str, message: AlarmMessage) -> list[tuple[str, Any, dict[str, str]]]:
    return [
        (r.url, json.loads(r.body), dict(r.headers))
        for r in requests(HOOKS[hook], message, 1_700_000_000_000)
    ]


def test_a_webhook_gets_skywalking_s_alarm_messages_and_its_recovery_at_its_recovery_urls() -> None:
    payload = {
        "scopeId": 1, "scope": "SERVICE", "name": "shop", "uuid": "f1", "id0": "c2hvcA==.1", "id1": "",
        "ruleName": "sla_rule", "alarmMessage": 'shop said "no"', "startTime": 1_000,
        "tags": [{"key": "level", "value": "WARNING"}],
    }  # fmt: skip
    bearer = {"Authorization": "Bearer t"}
    assert sent("webhook.default", FIRED) == [("http://h/fired", [payload], bearer)]
    assert sent("webhook.default", RECOVERED) == [
        ("http://h/recovered", [{**payload, "recoveryTime": 61_000}], bearer)
    ]
    assert sent("webhook.quiet", RECOVERED) == []


def test_chat_hooks_get_their_own_messages() -> None:
    ((_, slack, _),) = sent("slack.default", FIRED)
    assert slack == {"blocks": [{"type": "section", "text": {"type": "mrkdwn",
                     "text": ':alarm_clock: *skyoap alarm* \n **shop said "no"**.'}}]}  # fmt: skip
    ((_, discord, _),) = sent("discord.default", RECOVERED)
    assert discord == {"username": "bot", "content": 'skyoap alarm recovered: \n shop said "no".'}


def test_pagerduty_triggers_and_resolves_by_the_firing_s_id() -> None:
    ((url, trigger, _),) = sent("pagerduty.default", FIRED)
    ((_, resolve, _),) = sent("pagerduty.default", RECOVERED)
    assert url == "https://events.pagerduty.com/v2/enqueue"
    assert (trigger["routing_key"], trigger["dedup_key"], trigger["event_action"]) == ("k1", "f1", "trigger")
    assert (resolve["dedup_key"], resolve["event_action"]) == ("f1", "resolve")


def test_dingtalk_and_feishu_messages_are_signed_with_their_secret() -> None:
    ((url, body, _),) = sent("dingtalk.default", FIRED)
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    assert (query["access_token"], query["timestamp"]) == (["t"], ["1700000000000"])
    assert len(base64.b64decode(query["sign"][0])) == 32  # an HMAC-SHA256
    assert body == {"msgtype": "text", "text": {"content": 'skyoap alarm: \n shop said "no".'}}
    ((_, feishu, _),) = sent("feishu.default", FIRED)
    assert feishu["timestamp"] == "1700000000" and len(base64.b64decode(feishu["sign"])) == 32
    assert feishu["content"] == {"text": 'skyoap alarm: \n shop said "no".'}
