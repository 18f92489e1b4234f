"""Helpers for tests of clusters whose nodes run as separate processes."""

from __future__ import annotations

import hashlib
import urllib.request

from deploy.cluster import NodeProcess


def metrics(node: NodeProcess) -> dict[str, float]:
    """A node's /metrics, as name -> value."""
    with urllib.request.urlopen(f"http://{node.admin}/metrics", timeout=10) as r:
        text = r.read().decode()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def metric(node: NodeProcess, name: str) -> float:
    return metrics(node).get(name, 0.0)


def safe(name: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name)


def rendezvous_owner(key: str, addresses: list[str]) -> str:
    """Highest-random-weight owner of ``key``, computed here from its definition
    (blake2b-64 of "address NUL key", largest wins) rather than by the project's code."""

    def weight(address: str) -> int:
        return int.from_bytes(hashlib.blake2b(f"{address}\0{key}".encode(), digest_size=8).digest(), "big")

    return max(addresses, key=weight)
