"""The remote client manager: the set of clients senders choose from, rebuilt
beside the one in use and swapped in one step when nodes come and go."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from skyoap.remote.client import RemoteClient
from skyoap.remote.cluster import ClusterNodesQuery, RemoteNode
from skyoap.runtime.periodic import Periodic

log = logging.getLogger(__name__)


class RemoteClientManager:
    """Holds the client list in use as an immutable tuple sorted by address.

    ``refresh`` builds the next tuple beside it (reusing the clients of nodes
    that stayed, creating clients for new nodes) and replaces the reference in
    one assignment; senders read the reference once per item, so they see the
    old list or the new one, never half of each (SkyWalking's clientsA/clientsB
    with a volatile pointer). Clients of departed nodes are closed after the swap.

    ``make_client`` may answer None for a node it will not route to yet (one
    that did not answer, or not as the member it claims to be): it is asked
    again at the next refresh.
    """

    def __init__(
        self,
        nodes: ClusterNodesQuery,
        make_client: Callable[[RemoteNode], RemoteClient | None],
        refresh_interval_s: float = 5.0,
    ) -> None:
        self._nodes = nodes
        self._make_client = make_client
        self._clients: tuple[RemoteClient, ...] = ()
        self._targets: tuple[RemoteNode, ...] = ()
        """The node of each client."""
        self._refresh_lock = threading.Lock()
        self._task = Periodic(
            "remote-client-refresh", refresh_interval_s, self.refresh, "refreshing the remote client list"
        )
        self.on_change: Callable[[], None] = lambda: None
        """Called after every swap, from the thread that refreshed."""

    @property
    def clients(self) -> tuple[RemoteClient, ...]:
        return self._clients

    def refresh(self) -> None:
        with self._refresh_lock:
            # One node per address (this node's own entry wins), sorted by address.
            by_address = {n.address: n for n in sorted(self._nodes.remote_nodes(), key=lambda n: n.is_self)}
            nodes = sorted(by_address.values())
            if tuple(nodes) == self._targets:
                return
            # A node that came back at another internal address or identity, or
            # restarted (another incarnation: it forgot which batches it took),
            # gets a new client.
            current = dict(zip(self._targets, self._clients, strict=True))
            chosen = [(n, current.get(n) or self._started(n)) for n in nodes]
            targets = tuple(n for n, c in chosen if c is not None)
            if targets == self._targets:
                return
            self._clients = tuple(c for _, c in chosen if c is not None)
            self._targets = targets
            log.info("remote targets now: %s", ", ".join(n.address for n in targets) or "none")
            for node, client in current.items():
                if node not in targets:
                    client.leave()
        self.on_change()

    def _started(self, node: RemoteNode) -> RemoteClient | None:
        client = self._make_client(node)
        if client is not None:
            client.start()
        return client

    def start(self) -> None:
        self.refresh()
        self._task.start()

    def close(self, timeout_s: float = 5.0) -> None:
        """Stops refreshing and closes every client, each first sending what it
        holds for up to ``timeout_s``."""
        self._task.close(timeout_s)
        with self._refresh_lock:
            clients = self._clients
        for c in clients:
            c.close(timeout_s)
        self._clients, self._targets = (), ()
