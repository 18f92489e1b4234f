"""The kinds of alarm hook: one module each, found here by name. A module of
this package that defines ``KIND``, a ``HookKind``, adds that kind: the
settings file may name it, and its alarms are sent in its format.

``requests`` turns an alarm's message into what each target of a hook is
sent. An alarm's message holds names that agents chose (a service may
register as ``<!channel> <https://evil.example|Open the runbook>``), so each
kind escapes it in its service's own way (``HookKind.escape``): a chat hook
gets text that reads as the text it is, mentions no one and links nowhere."""

from __future__ import annotations

import importlib
import json
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from skyoap.alarm.messages import AlarmMessage, Request

Target = Mapping[str, Any]
"""Where a hook sends: ``{"url": …}`` and what its kind needs beside it
(``secret``, ``username``, ``headers``, a PagerDuty ``integration-key``)."""


@dataclass(frozen=True)
class Hook:
    """A hook of the settings file: its kind, name and targets."""

    kind: str
    name: str
    is_default: bool
    targets: tuple[Target, ...]
    recovery_targets: tuple[Target, ...]
    text_template: str = ""
    recovery_text_template: str = ""

    @property
    def id(self) -> str:
        return f"{self.kind}.{self.name}"


@dataclass(frozen=True)
class SettingsReader:
    """What a kind reads its targets with from its entry in the settings
    file; each raises the settings' error, naming the key."""

    targets: Callable[[str], tuple[Target, ...]]
    """The list under a key, each a URL or a mapping with a ``url``."""
    strings: Callable[[str], tuple[str, ...]]
    """The list of strings under a key (none if absent)."""


class HookKind:
    """One kind of hook: where its settings name its targets, how an alarm's
    message is escaped for it, and the JSON each target is sent."""

    name: ClassVar[str]
    template: ClassVar[str] = ""
    """The text of a firing when the hook has no ``text-template``; ``%s`` is the message."""
    recovery_template: ClassVar[str] = ""
    targets_key: ClassVar[str] = "webhooks"
    recovery_targets_key: ClassVar[str | None] = None
    """Where recoveries go; None: to the same targets as firings."""

    def escape(self, text: str) -> str:
        """The message as it may go into this kind's text."""
        return text

    def targets(self, read: SettingsReader) -> tuple[tuple[Target, ...], tuple[Target, ...]]:
        """Where firings go, and where recoveries go."""
        sent = read.targets(self.targets_key)
        return sent, read.targets(self.recovery_targets_key) if self.recovery_targets_key else sent

    def url(self, target: Target, now_ms: int) -> str:
        return str(target["url"])

    def body(self, target: Target, template: str, text: str, message: AlarmMessage, now_ms: int) -> Any:
        """The JSON ``target`` is sent: ``text`` is the escaped message,
        ``template`` the hook's or else the kind's."""
        raise NotImplementedError


def fill(template: str, text: str) -> str:
    return template.replace("%s", text)


def fill_json(template: str, text: str) -> Any:
    """A template that is JSON with ``text`` in its place, escaped as JSON
    (a message may hold quotes)."""
    return json.loads(template.replace("%s", json.dumps(text)[1:-1]))


_FULL_WIDTH = str.maketrans({"@": "\uff20", "<": "\uff1c", ">": "\uff1e"})


def plain(text: str) -> str:
    """For text that mentions by ``@`` (WeChat, DingTalk) or by a tag
    (Feishu's ``<at user_id="all">``): @, < and > as their full-width forms
    (U+FF20, U+FF1C, U+FF1E), which read the same and mention no one."""
    return text.translate(_FULL_WIDTH)


class ChatText(HookKind):
    """A chat's text message, from the template (WeChat, DingTalk, Feishu)."""

    def escape(self, text: str) -> str:
        return plain(text)

    def body(self, target: Target, template: str, text: str, message: AlarmMessage, now_ms: int) -> Any:
        return fill_json(template, text)


def _kinds() -> dict[str, HookKind]:
    kinds: dict[str, HookKind] = {}
    for module in pkgutil.iter_modules(__path__):
        kind = getattr(importlib.import_module(f"{__name__}.{module.name}"), "KIND", None)
        if isinstance(kind, HookKind):
            kinds[kind.name] = kind
    return kinds


KINDS: Mapping[str, HookKind] = _kinds()
"""Every kind of hook, by the name the settings file gives it."""
UNSENT_KINDS = {"gRPC": "SkyWalking's gRPC alarm hook", "welink": "WeLink"}
"""SkyWalking's kinds skyoap does not send to: a file naming one is refused, saying so."""


def requests(hook: Hook, message: AlarmMessage, now_ms: int) -> list[Request]:
    """What ``hook`` is sent for ``message``: one request per target (none
    for a recovery to a hook that names no target for recoveries)."""
    kind = KINDS[hook.kind]
    recovery = message.is_recovery
    targets = hook.recovery_targets if recovery else hook.targets
    template = (hook.recovery_text_template if recovery else hook.text_template) or (
        kind.recovery_template if recovery else kind.template
    )
    text = kind.escape(message.message)
    return [
        Request(
            kind.url(target, now_ms),
            json.dumps(kind.body(target, template, text, message, now_ms), separators=(",", ":")).encode(),
            {str(k): str(v) for k, v in (target.get("headers") or {}).items()},
            str(target["url"]),
        )
        for target in targets
    ]
