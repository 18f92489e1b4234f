"""How long each kind of data is kept: what aggregators remove once it is
older, and what the query protocol tells clients (``getRecordsTTL``,
``getMetricsTTL``) and reads no further back than."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from skyoap.model.metrics import Downsampling


@dataclass(frozen=True)
class TimesToLive:
    """How many whole days (UTC) each kind of data is kept (the node's
    ``--*-ttl-days``): the data of a day goes once that day is more than its
    time to live ago."""

    records_days: int
    minute_metrics_days: int
    hour_metrics_days: int
    day_metrics_days: int
    inactive_instance_days: int
    """An inactive instance goes this long after its last heartbeat."""
    unused_endpoint_days: int
    """An endpoint goes once it was registered this long ago and measured on none of these days."""

    @property
    def metrics_days(self) -> Mapping[Downsampling, int]:
        return {
            Downsampling.MINUTE: self.minute_metrics_days,
            Downsampling.HOUR: self.hour_metrics_days,
            Downsampling.DAY: self.day_metrics_days,
        }
