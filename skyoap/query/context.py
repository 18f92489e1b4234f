"""What resolvers read: handed to every resolver as its first argument."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from skyoap.storage.api import InventoryDAO, MetricsDAO, RecordDAO, StateStore
from skyoap.vocabulary.ttl import TimesToLive


@dataclass(frozen=True)
class QueryContext:
    """The node's storage as queries read it. Each query runs under its
    deadline (``runtime/deadline.py``): ``inventory`` reads with one try of at
    most what is left of it, and so should any read added here."""

    inventory: InventoryDAO
    metrics: MetricsDAO
    records: RecordDAO
    ttl: TimesToLive
    state: StateStore | None = None
    """The storage's shared state: the dashboards users changed (``ui/templates.py``)."""
    shared: dict[Any, Any] = field(default_factory=dict, compare=False)
    """What the resolvers of one request share, by the key of whoever keeps
    it there (``mqe/stored.py``'s windows of rows); empty in each request's context."""

    def for_request(self) -> QueryContext:
        """The context of one request: the same storage, nothing shared yet."""
        return replace(self, shared={})
