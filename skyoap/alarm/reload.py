"""The alarm settings file a node runs with: read and checked at start, where
an error refuses the start; read again when it changes on disk, where an
error keeps the rules in force and says so (in the log, and in
``skyoap_alarm_settings_errors_total``)."""

from __future__ import annotations

from pathlib import Path

from skyoap.alarm.evaluation import RuleError, watched
from skyoap.alarm.settings import AlarmSettings, SettingsError, load
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.watched import WatchedFile


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


class SettingsFile(WatchedFile[AlarmSettings]):
    def __init__(self, path: Path, instruments: Instruments, interval_s: float) -> None:
        errors = ("skyoap_alarm_settings_errors_total", "alarm settings files refused when read again")
        super().__init__(path, load_checked, instruments, interval_s, errors, _described)
        instruments.gauge("skyoap_alarm_rules", "alarm rules in force").set_function(
            lambda: len(self().rules)
        )


def _described(settings: AlarmSettings) -> str:
    return f"{len(settings.rules)} rules, {len(settings.hooks)} hooks"
