"""Storage that cannot be reached: a clear message, never a crash."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from skyoap.deploy.servers import free_port

ROOT = Path(__file__).resolve().parents[2]


def test_a_node_whose_elasticsearch_is_unreachable_says_so_and_exits() -> None:
    port = free_port()  # nothing listens there
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "skyoap.deploy.cli",
            "node",
            "--port",
            "0",
            "--storage",
            "elasticsearch",
            "--es-hosts",
            f"http://127.0.0.1:{port}",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert out.returncode == 2
    assert (
        "skyoap node: Elasticsearch is unreachable while creating index skyoap_sequence_fence" in out.stderr
    )
