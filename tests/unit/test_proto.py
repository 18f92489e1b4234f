from __future__ import annotations

import tempfile
from pathlib import Path

from skyoap.proto.generate import PROTO_DIR, generate, generated_in, generated_names


def test_committed_generated_code_matches_the_proto_files() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp))
        stale = [
            name
            for name in generated_names()
            if (generated_in(Path(tmp)) / name).read_bytes() != (PROTO_DIR / name).read_bytes()
        ]
    assert stale == [], f"run `python -m skyoap.proto.generate`: {stale} differ from the .proto files"
