"""Generates the Python modules of the .proto files in this folder.

Run ``python -m skyoap.proto.generate`` after changing a .proto file; the generated
modules are committed, and a unit test fails when they no longer match.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc

PROTO_DIR = Path(__file__).resolve().parent
ROOT = PROTO_DIR.parent.parent
"""The folder that holds ``skyoap/``: the .proto files import each other from there."""


def proto_files() -> list[Path]:
    return sorted(PROTO_DIR.rglob("*.proto"))


def generate(out_dir: Path) -> None:
    """Writes ``*_pb2.py``, ``*_pb2.pyi`` and ``*_pb2_grpc.py`` under ``out_dir/skyoap/proto``."""
    for p in proto_files():
        (out_dir / p.parent.relative_to(ROOT)).mkdir(parents=True, exist_ok=True)
    include = Path(protoc.__file__).resolve().parent / "_proto"
    args = [
        "protoc",
        f"-I{ROOT}",
        f"-I{include}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *(str(p.relative_to(ROOT)) for p in proto_files()),
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed; see the messages above")


def generated_in(out_dir: Path) -> Path:
    """Where ``generate(out_dir)`` writes the modules of this folder."""
    return out_dir / PROTO_DIR.relative_to(ROOT)


def generated_names() -> list[str]:
    """Paths relative to this folder."""
    names = []
    for p in proto_files():
        stem = str(p.relative_to(PROTO_DIR).with_suffix(""))
        names += [f"{stem}_pb2.py", f"{stem}_pb2.pyi", f"{stem}_pb2_grpc.py"]
    return names


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp))
        for name in generated_names():
            (PROTO_DIR / name).write_bytes((generated_in(Path(tmp)) / name).read_bytes())
    print(f"generated {len(generated_names())} modules in {PROTO_DIR}", file=sys.stderr)


if __name__ == "__main__":
    main()
