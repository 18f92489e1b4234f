"""One way to say how big a batch grows, wherever something batches: L1
hand-ons, L2 storage rounds, bulk writes, topic appends, remote batches and
streams, drains of a buffer queue."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class BatchPolicy:
    """A batch goes once it holds ``max_items`` items, about ``max_bytes``
    bytes, or ``max_delay_s`` after it began, whichever comes first; a bound
    left None does not apply."""

    max_items: int
    max_bytes: int | None = None
    max_delay_s: float | None = None

    def __post_init__(self) -> None:
        if self.max_items < 1:
            raise ValueError(f"a batch holds at least one item, not {self.max_items}")

    def chunks(self, items: Sequence[T]) -> Iterator[Sequence[T]]:
        """``items`` in order, in slices of at most ``max_items``."""
        for start in range(0, len(items), self.max_items):
            yield items[start : start + self.max_items]
