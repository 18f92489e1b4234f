"""What each hook is sent, in its service's own format: SkyWalking's webhook
payload (a JSON list of alarm messages), Slack's blocks, WeChat's,
DingTalk's and Feishu's text messages (signed when the hook has a secret),
Discord's content and PagerDuty's Events API v2, whose ``dedup_key`` is the
firing's id, so that a recovery resolves what its firing triggered.

An alarm's message holds names that agents chose (a service may register as
``<!channel> <https://evil.example|Open the runbook>``), so a chat hook gets
it escaped in its service's own way (``ESCAPES``): it reads as the text it
is, mentions no one and links nowhere. The webhook's payload is data for a
program and carries the names as they are, in JSON."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import json
import re
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from skyoap.alarm.settings import Hook

DEFAULT_TEMPLATES = {
    "slack": '{"type": "section", "text": {"type": "mrkdwn", '
    '"text": ":alarm_clock: *skyoap alarm* \\n **%s**."}}',
    "wechat": '{"msgtype": "text", "text": {"content": "skyoap alarm: \\n %s."}}',
    "dingtalk": '{"msgtype": "text", "text": {"content": "skyoap alarm: \\n %s."}}',
    "feishu": '{"msg_type": "text", "content": {"text": "skyoap alarm: \\n %s."}}',
    "discord": "skyoap alarm: \n %s.",
    "pagerduty": "skyoap alarm: \n %s.",
}
DEFAULT_RECOVERY_TEMPLATES = {
    "slack": '{"type": "section", "text": {"type": "mrkdwn", '
    '"text": ":green_heart: *skyoap alarm recovered* \\n **%s**."}}',
    "wechat": '{"msgtype": "text", "text": {"content": "skyoap alarm recovered: \\n %s."}}',
    "dingtalk": '{"msgtype": "text", "text": {"content": "skyoap alarm recovered: \\n %s."}}',
    "feishu": '{"msg_type": "text", "content": {"text": "skyoap alarm recovered: \\n %s."}}',
    "discord": "skyoap alarm recovered: \n %s.",
    "pagerduty": "skyoap alarm recovered: \n %s.",
}


def _slack(text: str) -> str:
    """Slack's mrkdwn escapes: its links and mentions (``<!channel>``) start with <."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


_DISCORD_MARKDOWN = re.compile(r"([\\*_~`|<>\[\]#])")


def _discord(text: str) -> str:
    """Discord's markdown (masked links ``[text](url)``, spoilers, headings)
    backslash-escaped; its mentions are off in the payload (``allowed_mentions``)."""
    return _DISCORD_MARKDOWN.sub(r"\\\1", text)


_FULL_WIDTH = str.maketrans({"@": "\uff20", "<": "\uff1c", ">": "\uff1e"})


def _plain(text: str) -> str:
    """For text messages that mention by ``@`` (WeChat, DingTalk) or by a tag
    (Feishu's ``<at user_id="all">``): @, < and > as their full-width forms
    (U+FF20, U+FF1C, U+FF1E), which read the same and mention no one."""
    return text.translate(_FULL_WIDTH)


ESCAPES: Mapping[str, Callable[[str], str]] = {
    "webhook": str,
    "slack": _slack,
    "discord": _discord,
    "wechat": _plain,
    "dingtalk": _plain,
    "feishu": _plain,
    "pagerduty": _plain,
}
"""How each kind of hook gets an alarm's message (names that agents chose in it)."""


@dataclass(frozen=True)
class AlarmMessage:
    """One firing or recovery, as SkyWalking's ``AlarmMessage``."""

    scope_id: int
    scope: str
    name: str
    id0: str
    id1: str
    rule_name: str
    message: str
    firing: str
    """The firing's id (``uuid``): its recovery, and any resend, carry it too."""
    start_ms: int
    tags: tuple[tuple[str, str], ...] = ()
    recovery_ms: int | None = None

    @property
    def is_recovery(self) -> bool:
        return self.recovery_ms is not None

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "tags": [list(t) for t in self.tags]}

    @classmethod
    def of(cls, doc: Mapping[str, Any]) -> AlarmMessage:
        return cls(**{**doc, "tags": tuple((k, v) for k, v in doc["tags"])})

    def webhook(self) -> dict[str, Any]:
        """As SkyWalking's webhook payload names its fields."""
        out: dict[str, Any] = {
            "scopeId": self.scope_id, "scope": self.scope, "name": self.name, "uuid": self.firing,
            "id0": self.id0, "id1": self.id1, "ruleName": self.rule_name, "alarmMessage": self.message,
            "startTime": self.start_ms, "tags": [{"key": k, "value": v} for k, v in self.tags],
        }  # fmt: skip
        if self.recovery_ms is not None:
            out["recoveryTime"] = self.recovery_ms
        return out


@dataclass(frozen=True)
class Request:
    """One HTTP POST of JSON to a hook's target."""

    url: str
    body: bytes
    headers: Mapping[str, str]
    target: str | None = None
    """The hook's URL as configured (a signed URL differs at each send); None: ``url``."""

    @property
    def lane(self) -> str:
        """Which queue the request waits in: its target's."""
        return self.target or self.url


def requests(hook: Hook, message: AlarmMessage, now_ms: int) -> list[Request]:
    """What ``hook`` is sent for ``message``: one request per target (none
    for a recovery to a webhook that names no target for recoveries)."""
    targets = hook.recovery_targets if message.is_recovery else hook.targets
    template = (hook.recovery_text_template if message.is_recovery else hook.text_template) or (
        (DEFAULT_RECOVERY_TEMPLATES if message.is_recovery else DEFAULT_TEMPLATES).get(hook.kind, "")
    )
    return [_request(hook.kind, target, template, message, now_ms) for target in targets]


def _text(template: str, text: str) -> str:
    return template.replace("%s", text)


def _json_text(template: str, text: str) -> Any:
    """A template that is JSON with ``text`` in its place, escaped as JSON
    (a message may hold quotes)."""
    escaped = json.dumps(text)[1:-1]
    return json.loads(template.replace("%s", escaped))


def _request(kind: str, target: Mapping[str, Any], template: str, m: AlarmMessage, now_ms: int) -> Request:
    url = configured = str(target["url"])
    headers = {str(k): str(v) for k, v in (target.get("headers") or {}).items()}
    text = ESCAPES[kind](m.message)
    body: Any
    if kind == "webhook":
        body = [m.webhook()]
    elif kind == "slack":
        body = {"blocks": [_json_text(template, text)]}
    elif kind == "discord":
        body = {
            "username": target.get("username", "skyoap"),
            "content": _text(template, text),
            "allowed_mentions": {"parse": []},  # no @everyone, @here, user or role mention pings
        }
    elif kind == "pagerduty":
        body = {
            "routing_key": target["integration-key"],
            "dedup_key": m.firing,
            "event_action": "resolve" if m.is_recovery else "trigger",
            "payload": {"summary": _text(template, text), "severity": "warning", "source": "skyoap"},
        }
    else:  # wechat, dingtalk, feishu: their text message, from the template
        body = _json_text(template, text)
        secret = target.get("secret")
        if secret and kind == "dingtalk":
            url = _dingtalk_signed(url, str(secret), now_ms)
        elif secret and kind == "feishu":
            body = {**body, **_feishu_signature(str(secret), now_ms // 1000)}
    return Request(url, json.dumps(body, separators=(",", ":")).encode(), headers, configured)


def _dingtalk_signed(url: str, secret: str, now_ms: int) -> str:
    """DingTalk's signature: HMAC-SHA256 of "timestamp\\nsecret" by the secret, in the URL."""
    digest = hmac.new(secret.encode(), f"{now_ms}\n{secret}".encode(), hashlib.sha256).digest()
    sign = urllib.parse.quote_plus(base64.b64encode(digest).decode())
    return f"{url}{'&' if '?' in url else '?'}timestamp={now_ms}&sign={sign}"


def _feishu_signature(secret: str, now_s: int) -> dict[str, str]:
    """Feishu's signature: HMAC-SHA256 keyed by "timestamp\\nsecret" of nothing, in the body."""
    digest = hmac.new(f"{now_s}\n{secret}".encode(), b"", hashlib.sha256).digest()
    return {"timestamp": str(now_s), "sign": base64.b64encode(digest).decode()}
