"""PagerDuty's Events API v2, one event per integration key. The event's
``dedup_key`` is the firing's id, so that a recovery resolves what its
firing triggered."""

from __future__ import annotations

from typing import Any

from skyoap.alarm.hooks import HookKind, SettingsReader, Target, fill, plain
from skyoap.alarm.messages import AlarmMessage

PAGERDUTY = "https://events.pagerduty.com/v2/enqueue"
"""PagerDuty's Events API v2."""


class PagerDuty(HookKind):
    name = "pagerduty"
    template = "skyoap alarm: \n %s."
    recovery_template = "skyoap alarm recovered: \n %s."

    def escape(self, text: str) -> str:
        return plain(text)

    def targets(self, read: SettingsReader) -> tuple[tuple[Target, ...], tuple[Target, ...]]:
        sent = tuple({"url": PAGERDUTY, "integration-key": k} for k in read.strings("integration-keys"))
        return sent, sent

    def body(self, target: Target, template: str, text: str, message: AlarmMessage, now_ms: int) -> Any:
        return {
            "routing_key": target["integration-key"],
            "dedup_key": message.firing,
            "event_action": "resolve" if message.is_recovery else "trigger",
            "payload": {"summary": fill(template, text), "severity": "warning", "source": "skyoap"},
        }


KIND = PagerDuty()
