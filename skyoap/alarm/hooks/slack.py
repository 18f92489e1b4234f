"""Slack's incoming webhooks: a block of mrkdwn from the template."""

from __future__ import annotations

from typing import Any

from skyoap.alarm.hooks import HookKind, Target, fill_json
from skyoap.alarm.messages import AlarmMessage


class Slack(HookKind):
    name = "slack"
    template = (
        '{"type": "section", "text": {"type": "mrkdwn", "text": ":alarm_clock: *skyoap alarm* \\n **%s**."}}'
    )
    recovery_template = (
        '{"type": "section", "text": {"type": "mrkdwn", '
        '"text": ":green_heart: *skyoap alarm recovered* \\n **%s**."}}'
    )

    def escape(self, text: str) -> str:
        """Slack's mrkdwn escapes: its links and mentions (``<!channel>``) start with <."""
        return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

    def body(self, target: Target, template: str, text: str, message: AlarmMessage, now_ms: int) -> Any:
        return {"blocks": [fill_json(template, text)]}


KIND = Slack()
