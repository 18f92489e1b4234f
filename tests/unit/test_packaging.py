"""What installing skyoap puts into site-packages: the ``skyoap`` package
alone with its data files, and no Spark unless asked for (the ``spark`` extra)."""

from __future__ import annotations

import email
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from skyoap.deploy.cli import SPARK_EXTRA, main
from skyoap.query.schema import sdl_files

ROOT = Path(__file__).resolve().parents[2]


def built_wheel(out: Path) -> zipfile.ZipFile:
    """The wheel of what ``pip install .`` installs, built from a copy of the
    sources (a build leaves its work in the folder it builds)."""
    src = out / "src"
    shutil.copytree(ROOT / "skyoap", src / "skyoap", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    pip = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out)]
    subprocess.run([*pip, str(src)], check=True, cwd=out)
    (wheel,) = out.glob("skyoap-*.whl")
    return zipfile.ZipFile(wheel)


def test_the_wheel_holds_the_skyoap_package_alone_and_spark_only_as_an_extra(tmp_path: Path) -> None:
    wheel = built_wheel(tmp_path)
    tops = {name.split("/")[0] for name in wheel.namelist()}
    (info,) = tops - {"skyoap"}
    assert tops == {"skyoap", info} and info.endswith(".dist-info")
    data_files = {
        "skyoap/proto/skywalking/tracing.proto",
        "skyoap/proto/register_pb2.pyi",
        "skyoap/mqe/mqe.lark",
        # The web UI the query port serves.
        "skyoap/query/ui/static/index.html",
        "skyoap/query/ui/static/app.js",
        # The query protocol's schema is read from these at run time.
        *(f"skyoap/query/sdl/{f.name}" for f in sdl_files()),
    }
    assert data_files <= set(wheel.namelist())

    metadata = email.message_from_bytes(wheel.read(f"{info}/METADATA"))
    requires = metadata.get_all("Requires-Dist") or []
    core = sorted(r.split("<")[0].split(">")[0] for r in requires if "extra ==" not in r)
    assert core == [
        "aiohttp", "cryptography", "elasticsearch[orjson]", "google-re2", "graphql-core", "grpcio",
        "grpcio-health-checking", "grpcio-reflection", "lark", "numpy", "prometheus-client", "promql-parser",
        "protobuf", "pyyaml", "redis",
    ]  # fmt: skip
    spark = sorted(r.split(";")[0].split("<")[0].split(">")[0] for r in requires if 'extra == "spark"' in r)
    assert spark == ["pandas", "pyarrow", "pyspark[sql]"]


def test_skyoap_spark_without_the_extra_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "pyspark.errors", None)  # import fails, as without pyspark
    assert main(["spark", "dependencies"]) == 2
    assert capsys.readouterr().err == SPARK_EXTRA + "\n"
