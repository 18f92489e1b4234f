"""Cluster membership: which nodes take L1 results (the remote targets)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol


class Role(enum.Enum):
    RECEIVER = "receiver"
    """Takes agent traffic and does L1; never a routing target."""
    AGGREGATOR = "aggregator"
    """Takes L1 results from other nodes, does L2 and persists."""
    MIXED = "mixed"
    """Both."""

    @property
    def is_target(self) -> bool:
        return self is not Role.RECEIVER


@dataclass(frozen=True, order=True)
class RemoteNode:
    address: str
    """``host:port`` where the node's RemoteService listens."""
    is_self: bool = False


class ClusterNodesQuery(Protocol):
    def remote_nodes(self) -> list[RemoteNode]:
        """The live nodes that take L1 results, this node included if it does."""


class StandaloneCluster:
    """One node that routes to itself."""

    def __init__(self, address: str) -> None:
        self._self = RemoteNode(address, is_self=True)

    def remote_nodes(self) -> list[RemoteNode]:
        return [self._self]
