"""The alarm settings file read again when it changes on disk: a good one
replaces the rules, a bad one keeps them in force and is counted."""

from __future__ import annotations

import os
from pathlib import Path

from skyoap.alarm.reload import SettingsFile
from skyoap.runtime.instruments import Instruments

RULE = "rules:\n  {name}:\n    expression: sum(service_sla < 8000) >= 2\n    period: {period}\n"


def write(path: Path, text: str, stamp: int) -> None:
    path.write_text(text)
    os.utime(path, ns=(stamp, stamp))  # a change the next look sees, however fast the test runs


def test_a_changed_file_is_read_again_and_a_bad_one_keeps_the_rules(tmp_path: Path) -> None:
    path = tmp_path / "alarm-settings.yml"
    write(path, RULE.format(name="a_rule", period=10), 1_000_000_000)
    instruments = Instruments()
    settings = SettingsFile(path, instruments, 10.0)
    assert [r.name for r in settings().rules] == ["a_rule"]
    assert settings.refresh() is False  # unchanged
    write(path, RULE.format(name="b_rule", period=5), 2_000_000_000)
    assert settings.refresh() is True
    assert [(r.name, r.period) for r in settings().rules] == [("b_rule", 5)]
    write(path, RULE.format(name="c_rule", period="ten"), 3_000_000_000)
    assert settings.refresh() is False
    assert [r.name for r in settings().rules] == ["b_rule"]
    assert instruments.value("skyoap_alarm_settings_errors_total") == 1
    assert instruments.value("skyoap_alarm_rules") == 1
