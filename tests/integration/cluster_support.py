"""Helpers for tests of clusters whose nodes run as separate processes."""

from __future__ import annotations

import hashlib

from skyoap.deploy.cluster import NodeProcess
from skyoap.runtime.scrape import read_metrics


def metric(node: NodeProcess, name: str, **labels: str) -> float:
    """One sample of a node's /metrics, 0 if it has none of that name yet."""
    return read_metrics(node.admin).value(name, **labels)


def rendezvous_owner(key: str, addresses: list[str]) -> str:
    """Highest-random-weight owner of ``key``, computed here from its definition
    (blake2b-64 of "address NUL key", largest wins) rather than by the project's code."""

    def weight(address: str) -> int:
        return int.from_bytes(hashlib.blake2b(f"{address}\0{key}".encode(), digest_size=8).digest(), "big")

    return max(addresses, key=weight)
