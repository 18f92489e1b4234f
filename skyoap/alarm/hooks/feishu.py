"""Feishu's (Lark's) bots: a text message from the template, signed in the
body when the target has a ``secret``."""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

from skyoap.alarm.hooks import ChatText, Target
from skyoap.alarm.messages import AlarmMessage


class Feishu(ChatText):
    name = "feishu"
    template = '{"msg_type": "text", "content": {"text": "skyoap alarm: \\n %s."}}'
    recovery_template = '{"msg_type": "text", "content": {"text": "skyoap alarm recovered: \\n %s."}}'

    def body(self, target: Target, template: str, text: str, message: AlarmMessage, now_ms: int) -> Any:
        body = super().body(target, template, text, message, now_ms)
        secret = target.get("secret")
        return {**body, **signature(str(secret), now_ms // 1000)} if secret else body


def signature(secret: str, now_s: int) -> dict[str, str]:
    """Feishu's signature: HMAC-SHA256 keyed by "timestamp\\nsecret" of nothing, in the body."""
    digest = hmac.new(f"{now_s}\n{secret}".encode(), b"", hashlib.sha256).digest()
    return {"timestamp": str(now_s), "sign": base64.b64encode(digest).decode()}


KIND = Feishu()
