"""The remote worker: sends each L1 result to the worker that owns it on the
node its selector picks."""

from __future__ import annotations

from typing import TypeVar

from pipeline.stream import StreamData
from pipeline.worker import Worker
from remote.manager import RemoteClientManager
from remote.selector import Selector

T = TypeVar("T", bound=StreamData)


class NoRemoteTarget(RuntimeError):
    pass


class RemoteWorker(Worker[T]):
    def __init__(
        self,
        worker_id: int,
        name: str,
        next_worker_id: int,
        clients: RemoteClientManager,
        selector: Selector,
    ) -> None:
        super().__init__(worker_id, name)
        self.next_worker_id = next_worker_id
        self._clients = clients
        self._selector = selector

    def accept(self, item: T) -> None:
        clients = self._clients.clients  # one read: the list in use right now
        if not clients:
            raise NoRemoteTarget(f"{self.name}: no node takes L1 results right now")
        self._selector.select(item.key(), clients).push(self.next_worker_id, item)
