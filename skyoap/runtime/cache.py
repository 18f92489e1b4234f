"""A cache keyed by text and bounded by how much text it holds, for what is
parsed from what clients send (queries, MQE expressions): what a parse
holds grows with its text, so a bound on entries alone would let a few long
texts hold a lot of memory."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

T = TypeVar("T")


class TextCache(Generic[T]):
    """What was made of the texts asked for lately, by their text: at most
    ``chars`` characters of text in all, the least recently asked going
    first. A text longer than ``chars // 2`` is not kept (one such would
    push out everything else)."""

    def __init__(self, chars: int) -> None:
        self._chars = chars
        self._held = 0
        self._entries: OrderedDict[str, T] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, text: str) -> T | None:
        with self._lock:
            found = self._entries.get(text)
            if found is not None:
                self._entries.move_to_end(text)
            return found

    def put(self, text: str, value: T) -> None:
        if len(text) > self._chars // 2:
            return
        with self._lock:
            if text in self._entries:
                return
            self._entries[text] = value
            self._held += len(text)
            while self._held > self._chars:
                gone, _ = self._entries.popitem(last=False)
                self._held -= len(gone)

    @property
    def held_chars(self) -> int:
        with self._lock:
            return self._held
