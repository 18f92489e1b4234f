"""DingTalk's robots: a text message from the template, the URL signed when
the target has a ``secret``."""

from __future__ import annotations

import base64
import hashlib
import hmac
import urllib.parse

from skyoap.alarm.hooks import ChatText, Target


class DingTalk(ChatText):
    name = "dingtalk"
    template = '{"msgtype": "text", "text": {"content": "skyoap alarm: \\n %s."}}'
    recovery_template = '{"msgtype": "text", "text": {"content": "skyoap alarm recovered: \\n %s."}}'

    def url(self, target: Target, now_ms: int) -> str:
        url, secret = str(target["url"]), target.get("secret")
        return signed(url, str(secret), now_ms) if secret else url


def signed(url: str, secret: str, now_ms: int) -> str:
    """DingTalk's signature: HMAC-SHA256 of "timestamp\\nsecret" by the secret, in the URL."""
    digest = hmac.new(secret.encode(), f"{now_ms}\n{secret}".encode(), hashlib.sha256).digest()
    sign = urllib.parse.quote_plus(base64.b64encode(digest).decode())
    return f"{url}{'&' if '?' in url else '?'}timestamp={now_ms}&sign={sign}"


KIND = DingTalk()
