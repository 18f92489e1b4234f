"""Sender selectors: which node of the current client list gets an item."""

from __future__ import annotations

import enum
import hashlib
import itertools
from collections.abc import Sequence
from typing import Protocol

from skyoap.remote.client import RemoteClient


class Selector(Protocol):
    def select(self, key: str, clients: Sequence[RemoteClient]) -> RemoteClient:
        """Picks one of ``clients``, which is non-empty and sorted by address."""


class ForeverFirst:
    """Always the first node of the sorted list: one writer for sequences."""

    def select(self, key: str, clients: Sequence[RemoteClient]) -> RemoteClient:
        return clients[0]


class Rolling:
    """Round robin."""

    def __init__(self) -> None:
        self._turn = itertools.count()

    def select(self, key: str, clients: Sequence[RemoteClient]) -> RemoteClient:
        return clients[next(self._turn) % len(clients)]


def _weight(key: str, address: str) -> int:
    digest = hashlib.blake2b(f"{address}\x00{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def owner(key: str, addresses: Sequence[str]) -> str:
    """The address (of a non-empty list) ``RendezvousHash`` sends ``key`` to."""
    return max(addresses, key=lambda a: _weight(key, a))


class RendezvousHash:
    """Highest-random-weight hashing: a key goes to the node whose (node, key)
    hash is largest. One key always lands on one node while membership is
    stable, and when a node joins or leaves only the keys that it wins or owned
    move, about 1/N of them, unlike hash-modulo which moves most keys."""

    def select(self, key: str, clients: Sequence[RemoteClient]) -> RemoteClient:
        if len(clients) == 1:
            return clients[0]
        return max(clients, key=lambda c: _weight(key, c.address))


class SelectorKind(enum.Enum):
    HASH = "hash"
    ROLLING = "rolling"
    FOREVER_FIRST = "forever-first"

    def build(self) -> Selector:
        if self is SelectorKind.HASH:
            return RendezvousHash()
        if self is SelectorKind.ROLLING:
            return Rolling()
        return ForeverFirst()
