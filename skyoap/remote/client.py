"""Remote clients: one per target node, each a way to hand an item to a worker there."""

from __future__ import annotations

from typing import Protocol

from skyoap.model.stream import StreamData
from skyoap.runtime.worker import Workers


class RemoteClient(Protocol):
    @property
    def address(self) -> str:
        """``host:port`` of the node this client reaches; also its routing identity."""

    def push(self, next_worker_id: int, item: StreamData) -> None:
        """Hands ``item`` to worker ``next_worker_id`` on the target node."""

    def start(self) -> None: ...

    def close(self, timeout_s: float) -> None:
        """This node shuts down: sends what the client holds, for up to
        ``timeout_s``, and stops."""

    def leave(self) -> None:
        """The target left: stops, and hands what the client never sent back to
        be routed elsewhere (what it sent and the target did not confirm is
        counted, not sent elsewhere: the target may have taken it)."""


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

    def start(self) -> None:
        pass

    def close(self, timeout_s: float = 0.0) -> None:
        pass

    def leave(self) -> None:
        pass
