"""What resolvers read: handed to every resolver as its first argument."""

from __future__ import annotations

from dataclasses import dataclass

from skyoap.storage.api import InventoryDAO, MetricsDAO, RecordDAO


@dataclass(frozen=True)
class QueryContext:
    """The node's storage as queries read it. Each query runs under its
    deadline (``runtime/deadline.py``): ``inventory`` reads with one try of at
    most what is left of it, and so should any read added here."""

    inventory: InventoryDAO
    metrics: MetricsDAO
    records: RecordDAO
