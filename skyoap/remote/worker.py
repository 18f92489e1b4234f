"""The remote worker: sends each L1 result to the worker that owns it on the
node its selector picks."""

from __future__ import annotations

from typing import TypeVar

from skyoap.model.stream import StreamData
from skyoap.remote.selector import Selector
from skyoap.remote.sender import RemoteSender
from skyoap.runtime.worker import Worker

T = TypeVar("T", bound=StreamData)


class RemoteWorker(Worker[T]):
    def __init__(
        self,
        worker_id: int,
        name: str,
        next_worker_id: int,
        sender: RemoteSender,
        selector: Selector,
    ) -> None:
        super().__init__(worker_id, name)
        self.next_worker_id = next_worker_id
        self._sender = sender
        sender.route_with(next_worker_id, selector)

    def accept(self, item: T) -> None:
        self._sender.send(self.next_worker_id, item)
