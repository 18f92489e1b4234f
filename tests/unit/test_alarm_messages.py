"""What each kind of hook is sent for a firing and its recovery, with the
names agents chose escaped for each chat."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import urllib.parse
from typing import Any

import pytest

from skyoap.alarm.hooks import requests
from skyoap.alarm.messages import AlarmMessage
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
  wechat:
    default:
      webhooks: ["https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=k"]
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
    assert discord == {
        "username": "bot",
        "content": 'skyoap alarm recovered: \n shop said "no".',
        "allowed_mentions": {"parse": []},
    }


def test_pagerduty_triggers_and_resolves_by_the_firing_s_id() -> None:
    ((url, trigger, _),) = sent("pagerduty.default", FIRED)
    ((_, resolve, _),) = sent("pagerduty.default", RECOVERED)
    assert url == "https://events.pagerduty.com/v2/enqueue"
    assert (trigger["routing_key"], trigger["dedup_key"], trigger["event_action"]) == ("k1", "f1", "trigger")
    assert (resolve["dedup_key"], resolve["event_action"]) == ("f1", "resolve")


def test_dingtalk_and_feishu_messages_are_signed_with_their_secret() -> None:
    """Each as its service documents it, over the secret ``s`` and the send's time."""
    ((url, body, _),) = sent("dingtalk.default", FIRED)
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    assert (query["access_token"], query["timestamp"]) == (["t"], ["1700000000000"])
    # DingTalk: HMAC-SHA256 keyed by the secret of "timestamp\nsecret", in base64.
    dingtalk = hmac.new(b"s", b"1700000000000\ns", hashlib.sha256).digest()
    assert query["sign"] == [base64.b64encode(dingtalk).decode()]
    assert body == {"msgtype": "text", "text": {"content": 'skyoap alarm: \n shop said "no".'}}
    ((_, feishu, _),) = sent("feishu.default", FIRED)
    # Feishu: HMAC-SHA256 keyed by "timestamp\nsecret" (in seconds) of nothing, in base64.
    signature = hmac.new(b"1700000000\ns", b"", hashlib.sha256).digest()
    assert feishu == {
        "msg_type": "text",
        "content": {"text": 'skyoap alarm: \n shop said "no".'},
        "timestamp": "1700000000",
        "sign": base64.b64encode(signature).decode(),
    }


EVIL = "<!channel> @everyone <https://evil.example/login|Open the runbook>"
"""A service name an agent registered."""
NAMED = AlarmMessage(**{**FIRED.__dict__, "name": EVIL, "message": f"Service {EVIL} fails"})
PLAIN = (
    "Service \uff1c!channel\uff1e \uff20everyone "
    "\uff1chttps://evil.example/login|Open the runbook\uff1e fails"
)
"""For WeChat, DingTalk, Feishu and PagerDuty: @ < > as their full-width forms."""


def text_of(hook: str, message: AlarmMessage) -> Any:
    """What a chat shows of ``message``: the field of its payload that holds it."""
    ((_, body, _),) = sent(hook, message)
    kind = hook.split(".")[0]
    return {
        "slack": lambda: body["blocks"][0]["text"]["text"],
        "discord": lambda: body["content"],
        "wechat": lambda: body["text"]["content"],
        "dingtalk": lambda: body["text"]["content"],
        "feishu": lambda: body["content"]["text"],
        "pagerduty": lambda: body["payload"]["summary"],
    }[kind]()


@pytest.mark.parametrize(
    ("hook", "shown"),
    [
        ("slack.default", ":alarm_clock: *skyoap alarm* \n **Service &lt;!channel&gt; @everyone "
                          "&lt;https://evil.example/login|Open the runbook&gt; fails**."),
        ("discord.default", "skyoap alarm: \n Service \\<!channel\\> @everyone "
                            "\\<https://evil.example/login\\|Open the runbook\\> fails."),
        ("wechat.default", f"skyoap alarm: \n {PLAIN}."),
        ("dingtalk.default", f"skyoap alarm: \n {PLAIN}."),
        ("feishu.default", f"skyoap alarm: \n {PLAIN}."),
        ("pagerduty.default", f"skyoap alarm: \n {PLAIN}."),
    ],
)  # fmt: skip
def test_a_name_an_agent_chose_mentions_no_one_and_links_nowhere_in_any_chat(hook: str, shown: str) -> None:
    assert text_of(hook, NAMED) == shown


def test_discord_is_told_to_ping_no_one_and_its_markdown_is_escaped() -> None:
    masked = AlarmMessage(**{**FIRED.__dict__, "message": "[Open](https://evil.example) *x* `y` ||z|| # h"})
    ((_, body, _),) = sent("discord.default", masked)
    assert body == {
        "username": "bot",
        "content": "skyoap alarm: \n \\[Open\\](https://evil.example) \\*x\\* \\`y\\` \\|\\|z\\|\\| \\# h.",
        "allowed_mentions": {"parse": []},
    }


def test_the_webhook_carries_the_name_as_it_is_for_the_program_that_reads_it() -> None:
    ((_, (payload,), _),) = sent("webhook.default", NAMED)
    assert (payload["name"], payload["alarmMessage"]) == (EVIL, f"Service {EVIL} fails")


@pytest.mark.parametrize(
    ("hook", "shown"),
    [
        ("slack.default", ':green_heart: *skyoap alarm recovered* \n **shop said "no"**.'),
        ("discord.default", 'skyoap alarm recovered: \n shop said "no".'),
        ("wechat.default", 'skyoap alarm recovered: \n shop said "no".'),
        ("dingtalk.default", 'skyoap alarm recovered: \n shop said "no".'),
        ("feishu.default", 'skyoap alarm recovered: \n shop said "no".'),
        ("pagerduty.default", 'skyoap alarm recovered: \n shop said "no".'),
    ],
)
def test_each_kind_s_default_recovery_text(hook: str, shown: str) -> None:
    assert text_of(hook, RECOVERED) == shown
