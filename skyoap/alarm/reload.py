"""The alarm settings file a node runs with: read and checked at start, where
an error refuses the start; read again when it changes on disk, where an
error keeps the rules in force and says so (in the log, and in
``skyoap_alarm_settings_errors_total``)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from skyoap.alarm.evaluation import RuleError, watched
from skyoap.alarm.settings import AlarmSettings, SettingsError, load
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.periodic import Periodic

log = logging.getLogger(__name__)


def load_checked(path: Path) -> AlarmSettings:
    """The settings at ``path``, every rule's metrics known and of one scope;
    SettingsError naming the line and the reason otherwise."""
    settings = load(path)
    for rule in settings.rules:
        try:
            watched(rule)
        except RuleError as e:
            raise SettingsError(f"{path} line {rule.line}: rule {rule.name}: {e}") from None
    return settings


class SettingsFile:
    def __init__(self, path: Path, instruments: Instruments, interval_s: float) -> None:
        self.path = path
        self._settings = load_checked(path)
        self._stamp = self._stat()
        self._errors = instruments.counter(
            "skyoap_alarm_settings_errors_total", "alarm settings files refused when read again"
        )
        instruments.gauge("skyoap_alarm_rules", "alarm rules in force").set_function(
            lambda: len(self._settings.rules)
        )
        self._task = Periodic("alarm-settings", interval_s, self.refresh, f"reading {path} again")

    def __call__(self) -> AlarmSettings:
        """The settings in force."""
        return self._settings

    def _stat(self) -> tuple[int, int] | None:
        try:
            s = os.stat(self.path)
        except OSError:
            return None
        return s.st_mtime_ns, s.st_size

    def refresh(self) -> bool:
        """Reads the file again if it changed; whether the settings changed."""
        stamp = self._stat()
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        try:
            settings = load_checked(self.path)
        except SettingsError as e:
            self._errors.inc()
            log.error("%s; the %d rules read before stay in force", e, len(self._settings.rules))
            return False
        self._settings = settings
        log.info("%s read again: %d rules, %d hooks", self.path, len(settings.rules), len(settings.hooks))
        return True

    def start(self) -> None:
        self._task.start()

    def close(self, timeout_s: float = 5.0) -> None:
        self._task.close(timeout_s)
