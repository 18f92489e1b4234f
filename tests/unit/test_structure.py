"""What keeps each part in a room of its own: a class that needs more than
300 lines holds two jobs (CONTRIBUTING.md)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "skyoap"
MOST_CLASS_LINES = 300


def test_no_class_is_longer_than_300_lines() -> None:
    longer = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name.endswith(("_pb2.py", "_pb2_grpc.py")):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                lines = node.end_lineno - node.lineno + 1
                if lines > MOST_CLASS_LINES:
                    longer.append(f"{path.relative_to(PACKAGE.parent)}: {node.name}, {lines} lines")
    assert longer == []
