"""Errors a caller causes, shared by every gRPC service of a node; the gRPC edge
(``edge/binding.py``) turns them into statuses."""

from __future__ import annotations


class InvalidRequest(ValueError):
    """A request the caller must change; the message says what was wrong."""


class UnknownReference(LookupError):
    """A request that names an id this backend never gave out."""
