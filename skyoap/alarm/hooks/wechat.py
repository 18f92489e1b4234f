"""WeChat Work's group robots: a text message from the template."""

from __future__ import annotations

from skyoap.alarm.hooks import ChatText


class WeChat(ChatText):
    name = "wechat"
    template = '{"msgtype": "text", "text": {"content": "skyoap alarm: \\n %s."}}'
    recovery_template = '{"msgtype": "text", "text": {"content": "skyoap alarm recovered: \\n %s."}}'


KIND = WeChat()
