"""Helpers for tests of clusters whose nodes run as separate processes."""

from __future__ import annotations

import hashlib
import re
import urllib.error
import urllib.request

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


def health(node: NodeProcess) -> tuple[int, str]:
    """The status and text of the node's admin /healthz."""
    try:
        with urllib.request.urlopen(f"http://{node.admin}/healthz", timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def serving_workers(node: NodeProcess) -> dict[int, int]:
    """The pid of each worker process that serves, by its index (``--workers``)."""
    _, text = health(node)
    return {int(k): int(pid) for k, pid in re.findall(r"^worker (\d+): pid (\d+), serving", text, re.M)}
