"""What a caught error keeps alive.

An error's traceback holds every frame it passed through, and each frame its
local variables: the request a call decoded, the rows and body of a bulk
write. Libraries often keep an error in a local of a frame on its own
traceback (urllib3's retries, gRPC's record of a broken stream), a cycle
that only Python's cyclic collector frees, when it happens to run: so much
later, under a steady stream of failures, that what the frames hold piles
up far past the memory budget, which let go of it when the call or the try
ended."""

from __future__ import annotations

import traceback


def drop_locals(error: BaseException) -> None:
    """Clears the local variables of the frames ``error``, and the errors
    chained to it, passed through and that have returned; the frames still
    running are left as they are. The traceback still prints."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [error]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        traceback.clear_frames(e.__traceback__)
        todo += [e.__cause__, e.__context__]
        if isinstance(e, BaseExceptionGroup):
            todo += e.exceptions


def detach(error: BaseException) -> None:
    """Drops ``error``'s traceback, running frames and all: for an error kept
    by what the frames reach (gRPC keeps the error of a broken stream with
    its call), which would otherwise hold those frames, and what they hold,
    in a cycle."""
    error.__traceback__ = None
