"""The storage interfaces the pipeline calls. Implementations sit beside this
module (``storage/elasticsearch``, ``storage/embedded``, ``storage/redis``)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from pipeline.inventory import Inventory

I = TypeVar("I", bound=Inventory)  # noqa: E741


class StorageError(RuntimeError):
    """A storage operation failed. ``retriable`` says whether the same call may
    succeed later (server busy or unreachable) or never will."""

    retriable = False


class StorageUnavailable(StorageError):
    retriable = True


@dataclass(frozen=True)
class Stored(Generic[I]):
    """A row as read, with the version an update must still match."""

    item: I
    version: object


@dataclass
class InsertOutcome:
    inserted: list[str] = field(default_factory=list)
    """Keys now stored with the sequence they were given."""
    key_taken: list[str] = field(default_factory=list)
    """Keys another writer stored first: read and combine them instead."""


class InventoryDAO(Protocol):
    def install(self, models: Sequence[type[Inventory]]) -> None:
        """Creates the indices or tables of ``models`` where missing."""

    def get_many(self, model: type[I], keys: Sequence[str]) -> dict[str, Stored[I]]:
        """The stored rows of ``keys`` (absent keys are left out); reads what was
        written before, with no refresh delay."""

    def get_by_sequence(self, model: type[I], sequence: int) -> I | None: ...

    def update(self, model: type[I], rows: Sequence[tuple[Stored[I], I]]) -> list[str]:
        """Replaces each stored row with its new value if the row is unchanged
        since it was read; returns the keys that changed meanwhile."""

    def insert(self, model: type[I], items: Sequence[I]) -> InsertOutcome:
        """Inserts new rows, whose sequences were reserved. A key is never stored twice."""

    def reserve_sequences(self, model: type[Inventory], first: int, last: int) -> bool:
        """Records that ids ``first..last`` of ``model``'s scope are handed out,
        if ``first`` is above every id reserved before; returns False (and
        reserves nothing) otherwise, which means the allocator is behind storage,
        e.g. because Redis lost its data. This fence, kept in storage, is what
        makes an id impossible to hand out twice whatever the allocator does."""

    def max_sequence(self, model: type[Inventory]) -> int:
        """The largest id reserved for ``model`` (no stored row has a larger one), 0 if none."""

    def list(self, model: type[I], limit: int = 10_000) -> list[I]:
        """Rows ordered by sequence."""

    def deactivate_stale(self, model: type[Inventory], cutoff_ms: int) -> int:
        """Marks active rows whose heartbeat is older than ``cutoff_ms`` inactive,
        each only if unchanged since it was found; returns how many."""

    def close(self) -> None: ...


class SequenceAllocator(Protocol):
    """The global lock and the id sequences, one of each per scope."""

    def lock(self, scope: str) -> contextlib.AbstractContextManager[None]: ...

    def allocate(self, scope: str, count: int, stored_max: Callable[[], int]) -> list[int]:
        """``count`` fresh ids of ``scope``. When the allocator has lost its state
        it starts again above ``stored_max()``, the largest id storage holds."""

    def raise_floor(self, scope: str, floor: int) -> None:
        """Makes sure the next id allocated is above ``floor``."""

    def close(self) -> None: ...
