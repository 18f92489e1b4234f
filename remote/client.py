"""Remote clients: one per target node, each a way to hand an item to a worker there."""

from __future__ import annotations

from typing import Protocol

from model.stream import StreamData
from runtime.worker import Workers


class RemoteClient(Protocol):
    @property
    def address(self) -> str:
        """``host:port`` of the node this client reaches; also its routing identity."""

    def push(self, next_worker_id: int, item: StreamData) -> None:
        """Hands ``item`` to worker ``next_worker_id`` on the target node."""

    def close(self, drain_s: float = 0.0) -> None:
        """Stops the client. With ``drain_s``, first sends what it holds, for up
        to that long (the node shuts down); without, hands it back to be routed
        elsewhere (the target left)."""


class SelfRemoteClient:
    """The client for this node itself: hands items over in-process, no network."""

    def __init__(self, address: str, workers: Workers) -> None:
        self._address = address
        self._workers = workers

    @property
    def address(self) -> str:
        return self._address

    def push(self, next_worker_id: int, item: StreamData) -> None:
        self._workers.get(next_worker_id).accept(item)

    def close(self, drain_s: float = 0.0) -> None:
        pass
