"""The cluster section of a node's configuration: its role, how nodes find
each other, how L1 results are routed between them, and what secures the
route (mutual TLS, the cluster's secret)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from skyoap.edge.config import check_metadata
from skyoap.remote.cluster import Role
from skyoap.remote.selector import SelectorKind
from skyoap.runtime.config import option


class ClusterKind(enum.Enum):
    STANDALONE = "standalone"
    """One node that routes to itself."""
    REDIS = "redis"
    """Nodes register in Redis with a time-to-live their heartbeats refresh."""


@dataclass(frozen=True)
class ClusterConfig:
    role: Role = option(
        Role.MIXED, "what the node does: receiver (agent traffic, L1), aggregator (L2), or both"
    )
    kind: ClusterKind = option(ClusterKind.STANDALONE, "how nodes find each other", name="cluster")
    node_name: str = option("", "name of the node in the cluster (default: role@advertised address)")
    heartbeat_s: float = option(
        2.0, "how often the node renews its registration in the cluster", name="cluster_heartbeat_s"
    )
    expiry_s: float = option(
        6.0, "a node that has not renewed its registration for this long is gone", name="cluster_expiry_s"
    )
    inventory_selector: SelectorKind = option(
        SelectorKind.FOREVER_FIRST,
        "which aggregator gets each inventory name; forever-first keeps one writer allocating ids",
    )
    remote_buffer_size: int = option(20_000, "items each remote client holds for its target node")
    remote_refresh_interval_s: float = option(5.0, "how often the list of remote target nodes is refreshed")
    cluster_ca: str = option(
        "",
        "PEM CA certificate of the cluster: with it, nodes talk to each other over mutual TLS and take "
        "L1 results only from, and route them only to, nodes with a certificate it signed",
    )
    cluster_cert: str = option(
        "", "PEM certificate (signed by --cluster-ca) this node presents to other nodes"
    )
    cluster_key: str = option("", "PEM private key of --cluster-cert")
    cluster_secret: str = option(
        "",
        "secret the nodes of a cluster send each other as the gRPC metadata 'skyoap-cluster-secret': "
        "the internal port refuses a call without it (never the agent token); a cluster needs it or "
        "--cluster-ca; give it through SKYOAP_CLUSTER_SECRET rather than the command line",
    )

    def check(self) -> None:
        tls = (self.cluster_ca, self.cluster_cert, self.cluster_key)
        if any(tls) and not all(tls):
            raise ValueError(
                "--cluster-ca, --cluster-cert and --cluster-key go together: give all three or none"
            )
        check_metadata("--cluster-secret", self.cluster_secret)
        if self.kind is ClusterKind.STANDALONE and self.role is not Role.MIXED:
            raise ValueError(
                f"a {self.role.value} node needs other nodes: run it with --cluster redis "
                "(a standalone node must be mixed)"
            )
        if self.kind is ClusterKind.STANDALONE and self.cluster_ca:
            raise ValueError(
                "--cluster-ca is for the nodes of a cluster (--cluster redis): a standalone node has no peers"
            )
        if self.kind is ClusterKind.REDIS and not (self.cluster_secret or self.cluster_ca):
            raise ValueError(
                "a cluster node needs --cluster-ca (mutual TLS) or --cluster-secret (set "
                "SKYOAP_CLUSTER_SECRET to the same value on every node): without either, anyone who "
                "reaches the internal port could send L1 results for this cluster's L2 to merge and store"
            )
