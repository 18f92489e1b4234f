"""What an alarm's hooks are sent: the firing or recovery (``AlarmMessage``,
as SkyWalking's), and one HTTP request of it to one target (``Request``).
Each kind of hook writes its own (``alarm/hooks/``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


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
