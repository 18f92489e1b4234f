"""SkyWalking's webhook: a JSON list of alarm messages, data for a program,
so the names go as they are, in JSON. Firings go to ``urls``, recoveries to
``recovery-urls`` (none: no recovery is sent)."""

from __future__ import annotations

from typing import Any

from skyoap.alarm.hooks import HookKind, Target
from skyoap.alarm.messages import AlarmMessage


class Webhook(HookKind):
    name = "webhook"
    targets_key = "urls"
    recovery_targets_key = "recovery-urls"

    def body(self, target: Target, template: str, text: str, message: AlarmMessage, now_ms: int) -> Any:
        return [message.webhook()]


KIND = Webhook()
