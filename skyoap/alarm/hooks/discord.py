"""Discord's webhooks: the template's text as the message's content."""

from __future__ import annotations

import re
from typing import Any

from skyoap.alarm.hooks import HookKind, Target, fill
from skyoap.alarm.messages import AlarmMessage

_MARKDOWN = re.compile(r"([\\*_~`|<>\[\]#])")


class Discord(HookKind):
    name = "discord"
    template = "skyoap alarm: \n %s."
    recovery_template = "skyoap alarm recovered: \n %s."

    def escape(self, text: str) -> str:
        """Discord's markdown (masked links ``[text](url)``, spoilers, headings)
        backslash-escaped; its mentions are off in the payload (``allowed_mentions``)."""
        return _MARKDOWN.sub(r"\\\1", text)

    def body(self, target: Target, template: str, text: str, message: AlarmMessage, now_ms: int) -> Any:
        return {
            "username": target.get("username", "skyoap"),
            "content": fill(template, text),
            "allowed_mentions": {"parse": []},  # no @everyone, @here, user or role mention pings
        }


KIND = Discord()
