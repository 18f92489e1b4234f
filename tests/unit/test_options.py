from __future__ import annotations

import pytest

from deploy.cli import build_parser
from deploy.options import config_from
from remote.cluster import Role
from runtime.buffer import BufferStrategy
from wiring.config import NodeConfig, StorageKind


def test_options_default_to_the_config_and_take_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYOAP_STORAGE", "elasticsearch")
    monkeypatch.setenv("SKYOAP_L1_BUFFER_SIZE", "77")
    args = build_parser().parse_args(["node", "--port", "12000", "--l2-strategy", "if_possible"])
    config = config_from(args, NodeConfig)
    assert config.storage is StorageKind.ELASTICSEARCH
    assert config.l1_buffer_size == 77
    assert config.port == 12000
    assert config.l2_strategy is BufferStrategy.IF_POSSIBLE
    assert config.role is Role.MIXED


def test_a_bad_value_names_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["node", "--storage", "mysql"])
    assert "'mysql' is not one of: embedded, elasticsearch" in capsys.readouterr().err


def test_a_bad_environment_value_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SKYOAP_PORT", "eleven")
    with pytest.raises(SystemExit):
        build_parser()
    assert "$SKYOAP_PORT: invalid literal for int() with base 10: 'eleven'" in capsys.readouterr().err


def test_every_option_is_documented(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["node", "--help"])
    text = capsys.readouterr().out
    for name in NodeConfig.__dataclass_fields__:
        assert "--" + name.replace("_", "-") in text
        assert "$SKYOAP_" + name.upper() in text
