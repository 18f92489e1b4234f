"""The alarm section of a node's configuration: the rules file and how its
notices are sent."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from skyoap.alarm.reload import load_checked
from skyoap.alarm.settings import SettingsError
from skyoap.runtime.config import option


@dataclass(frozen=True)
class AlarmConfig:
    """Alarm rules over the minute metrics, evaluated by the aggregators."""

    settings: str = option(
        "",
        "SkyWalking's alarm-settings.yml, read as is: rules (MQE expressions, or the older metrics-name, "
        "op, threshold, count) and hooks (webhook, slack, wechat, dingtalk, feishu, pagerduty, discord); "
        "a file with an error refuses the start; a file changed on disk is read again (none: no alarms)",
        name="alarm_settings",
    )
    reload_s: float = option(
        10.0, "how often the alarm settings file is looked at for changes", name="alarm_reload_s"
    )
    settle_s: float = option(
        30.0,
        "seconds after a minute ends before its alarms are evaluated: time for its metrics to be persisted",
        name="alarm_settle_s",
    )
    hook_timeout_s: float = option(5.0, "how long one send to a hook may take, all of it: connecting, "
                                        "sending and the answer", name="alarm_hook_timeout_s")  # fmt: skip
    max_queued: int = option(10_000, "alarm notices waiting to be sent to each hook URL, at most; more are "
                                     "dropped (counted)", name="alarm_max_queued")  # fmt: skip

    def check(self) -> None:
        for name, value in (
            ("--alarm-reload-s", self.reload_s),
            ("--alarm-hook-timeout-s", self.hook_timeout_s),
        ):
            if value <= 0:
                raise ValueError(f"{name} must be above 0, not {value:g}")
        if self.settle_s < 0:
            raise ValueError(f"--alarm-settle-s must be at least 0, not {self.settle_s:g}")
        if self.max_queued < 1:
            raise ValueError(f"--alarm-max-queued must be at least 1, not {self.max_queued}")
        if self.settings:
            try:
                load_checked(Path(self.settings))
            except SettingsError as e:
                raise ValueError(f"--alarm-settings {e}") from None
