from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from skyoap.deploy.cli import build_parser
from skyoap.deploy.options import config_from
from skyoap.model.metrics import Downsampling
from skyoap.remote.cluster import Role
from skyoap.runtime.buffer import BufferStrategy
from skyoap.runtime.config import option_name
from skyoap.storage.config import StorageConfig, StorageKind
from skyoap.wiring.config import NodeConfig


def test_options_default_to_the_config_and_take_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYOAP_STORAGE", "elasticsearch")
    monkeypatch.setenv("SKYOAP_L1_BUFFER_SIZE", "77")
    args = build_parser().parse_args(["node", "--port", "12000", "--l2-strategy", "if_possible"])
    config = config_from(args, NodeConfig)
    assert config.storage.kind is StorageKind.ELASTICSEARCH
    assert config.workers.l1_buffer_size == 77
    assert config.server.port == 12000
    assert config.workers.l2_strategy is BufferStrategy.IF_POSSIBLE
    assert config.cluster.role is Role.MIXED


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


def test_every_option_is_documented_under_its_section(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["node", "--help"])
    text = capsys.readouterr().out
    sections = [f for f in dataclasses.fields(NodeConfig)]
    assert [f.metadata["section"] for f in sections] == [
        "server",
        "query endpoint",
        "storage",
        "cluster",
        "buffers and workers",
        "limits of agent calls and telemetry",
        "topics",
        "time to live",
        "analysis",
        "alarms",
    ]
    for i, holder in enumerate(sections):
        # Each section's options stand between its heading and the next one's.
        start = text.index(f"\n{holder.metadata['section']} options:\n")
        end = (
            text.index(f"\n{sections[i + 1].metadata['section']} options:\n")
            if i + 1 < len(sections)
            else None
        )
        part = text[start:end]
        for f in dataclasses.fields(getattr(NodeConfig(), holder.name)):
            name = option_name(f)
            assert "--" + name.replace("_", "-") + " " in part
            assert "$SKYOAP_" + name.upper() in part


def test_storage_commands_take_only_the_storage_options() -> None:
    args = build_parser().parse_args(
        ["query", "services", "--storage", "elasticsearch", "--es-hosts", "http://e:9200"]
    )
    assert config_from(args, StorageConfig) == StorageConfig(
        kind=StorageKind.ELASTICSEARCH, es_hosts="http://e:9200"
    )
    with pytest.raises(SystemExit):
        build_parser().parse_args(["query", "services", "--port", "1"])


def test_options_change_whatever_section_holds_them() -> None:
    config = NodeConfig().with_options(port=0, topic_partitions=8, storage=StorageKind.ELASTICSEARCH)
    assert (config.server.port, config.topics.partitions, config.storage.kind) == (
        0,
        8,
        StorageKind.ELASTICSEARCH,
    )
    assert config.cluster == NodeConfig().cluster
    with pytest.raises(TypeError, match="no such option: prot"):
        NodeConfig().with_options(prot=1)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"records_ttl_days": 0}, "--records-ttl-days must be at least 1, not 0"),
        ({"minute_metrics_ttl_days": -1}, "--minute-metrics-ttl-days must be at least 1, not -1"),
        (
            {"unused_endpoint_ttl_days": 100},
            "--unused-endpoint-ttl-days (100) must be at most --day-metrics-ttl-days (90): "
            "endpoints are found unused by their day metrics",
        ),
        ({"ttl_interval_s": 0}, "--ttl-interval-s must be above 0, not 0"),
    ],
)
def test_times_to_live_that_cannot_hold_are_refused_naming_the_option(
    options: dict[str, float], message: str
) -> None:
    with pytest.raises(ValueError) as refused:
        NodeConfig().with_options(**options).check()
    assert str(refused.value) == message


def test_the_default_times_to_live_are_skywalkings_and_the_issues() -> None:
    ttl = NodeConfig().ttl.ttl()
    assert (ttl.records_days, dict(ttl.metrics_days)) == (
        3,
        {Downsampling.MINUTE: 1, Downsampling.HOUR: 7, Downsampling.DAY: 90},
    )
    assert (ttl.inactive_instance_days, ttl.unused_endpoint_days) == (7, 7)


def test_apdex_thresholds_come_from_a_file_and_a_bad_one_is_refused_naming_it(tmp_path: Path) -> None:
    good = tmp_path / "service-apdex-threshold.yml"
    good.write_text("default: 300\nbilling: 1000\n")
    apdex = NodeConfig().with_options(apdex_thresholds=str(good)).analysis.apdex()
    assert (apdex.of("billing"), apdex.of("shop"), NodeConfig().analysis.apdex().of("shop")) == (
        1000,
        300,
        500,
    )
    bad = tmp_path / "bad.yml"
    bad.write_text("default: 300\nbilling 1000\n")
    with pytest.raises(ValueError) as refused:
        NodeConfig().with_options(apdex_thresholds=str(bad)).analysis.apdex()  # read once, at start
    assert str(refused.value) == (
        f"--apdex-thresholds {bad}, line 2: 'billing 1000' is not 'SERVICE: MS' with a whole number "
        "of ms above 0"
    )
    with pytest.raises(ValueError) as missing:
        NodeConfig().with_options(apdex_thresholds=str(tmp_path / "none.yml")).analysis.apdex()
    assert (
        str(missing.value)
        == f"--apdex-thresholds: cannot read {tmp_path / 'none.yml'}: No such file or directory"
    )


def test_an_alarm_settings_file_with_an_error_refuses_the_start(tmp_path: Path) -> None:
    bad = tmp_path / "alarm-settings.yml"
    bad.write_text("rules:\n  sla_rule:\n    expression: sum(service_slaa < 8000) >= 2\n    period: 10\n")
    with pytest.raises(ValueError) as refused:
        NodeConfig().with_options(alarm_settings=str(bad)).check()
    assert (
        str(refused.value) == f"--alarm-settings {bad} line 3: rule sla_rule: there is no metric service_slaa"
    )
    bad.write_text("rules:\n  sla_rule:\n    expression: sum(service_sla < 8000) >= 2\n")
    with pytest.raises(
        ValueError, match=f"^--alarm-settings {bad} line 3: rule sla_rule: a rule needs a period"
    ):
        NodeConfig().with_options(alarm_settings=str(bad)).check()


@pytest.mark.parametrize(
    ("options", "refusal"),
    [
        ({}, r"--workers 2: the embedded storage \(SQLite\) takes one writer.*--workers 1"),
        (
            {"storage": StorageKind.ELASTICSEARCH},
            r"--workers 2: each worker is a member of a cluster.*--cluster redis",
        ),
    ],
)
def test_workers_are_refused_where_a_node_cannot_be_several_processes(
    options: dict[str, object], refusal: str
) -> None:
    with pytest.raises(ValueError, match=refusal):
        NodeConfig().with_options(workers=2, **options).check()
