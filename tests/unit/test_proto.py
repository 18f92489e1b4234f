"""The committed ``skyoap/proto`` modules are what the locked generator makes
of the ``.proto`` files, and they run on the oldest grpcio and protobuf
pyproject.toml lets a user install."""

from __future__ import annotations

import re
import tempfile
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from skyoap.proto.generate import PROTO_DIR, generate, generated_in, generated_names
from tests.locks import DEV_LOCK, pins, project


def test_committed_generated_code_matches_the_proto_files() -> None:
    locked = pins(DEV_LOCK)[canonicalize_name("grpcio-tools")]
    installed = Version(metadata.version("grpcio-tools"))
    assert installed == locked, (
        f"grpcio-tools {installed} is installed, but the committed modules are the output of the "
        f"locked {locked}: install the lock (deploy/install.sh all) before comparing them"
    )
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp))
        stale = [
            name
            for name in generated_names()
            if (generated_in(Path(tmp)) / name).read_bytes() != (PROTO_DIR / name).read_bytes()
        ]
    assert stale == [], f"run `python -m skyoap.proto.generate`: {stale} differ from the .proto files"


def floor(package: str) -> Version:
    """The oldest version of ``package`` that skyoap's requirements allow."""
    (requirement,) = [r for r in project()[""] if r.name == package]
    (lowest,) = [Version(s.version) for s in requirement.specifier if s.operator == ">="]
    return lowest


def versions_required(suffix: str, pattern: str) -> set[Version]:
    """The versions the generated modules ending in ``suffix`` check for at import."""
    found = set()
    for name in generated_names():
        if name.endswith(suffix):
            match = re.search(pattern, (PROTO_DIR / name).read_text())
            assert match is not None, name
            found.add(Version(match[1]))
    return found


def test_the_generated_modules_import_with_the_oldest_runtime_pyproject_allows() -> None:
    """A generated module refuses to import under an older grpcio or protobuf
    than its generator's: those must be the floors users may install."""
    grpc = versions_required("_pb2_grpc.py", r"GRPC_GENERATED_VERSION = '([^']+)'")
    assert grpc == {floor("grpcio")} == {Version("1.85.1")}
    protobuf = versions_required("_pb2.py", r"# Protobuf Python Version: (\S+)")
    assert protobuf == {floor("protobuf")} == {Version("7.35.1")}
    assert Requirement("grpcio-tools==1.85.1") in project()["dev"], "the generator is grpcio's floor"
