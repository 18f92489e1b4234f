"""The aggregator's sections of a node's configuration: the topics what L2
stores is published on, and how long what it stores is kept."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from skyoap.runtime.config import option, option_name
from skyoap.vocabulary.ttl import TimesToLive


@dataclass(frozen=True)
class TopicsConfig:
    partitions: int = option(
        4, "partitions of each topic, fixed when storage first creates the topic", name="topic_partitions"
    )
    retention_s: float = option(
        3 * 86_400.0,
        "the inventory and metrics topics keep versions younger than this (whole days of the rows' "
        "history are dropped; rows stay stored, below the start); segments, logs and alarms are "
        "their own topics, kept --records-ttl-days",
        name="topic_retention_s",
    )
    retention_records: int = option(
        10_000_000,
        "most offsets a partition of the inventory or metrics topic keeps readable "
        "(segments and logs: by day only)",
        name="topic_retention_records",
    )
    publish: bool = option(True, "publish what L2 stores on the topics", name="publish_topics")
    commit_interval_s: float = option(
        0.5,
        "how often what was written (records and row versions) is made readable on the topics",
        name="topic_commit_interval_s",
    )

    def check(self) -> None:
        if self.commit_interval_s <= 0:
            raise ValueError(f"--topic-commit-interval-s must be above 0, not {self.commit_interval_s:g}")


@dataclass(frozen=True)
class TtlConfig:
    """How long data is kept, in whole days (UTC): a day's data goes once the
    day is that many days ago. Aggregators remove it, one at a time."""

    records_days: int = option(
        3, "segments, logs and alarms (and their topics) are kept this many days", name="records_ttl_days"
    )
    minute_metrics_days: int = option(
        1, "minute metrics are kept this many days", name="minute_metrics_ttl_days"
    )
    hour_metrics_days: int = option(7, "hour metrics are kept this many days", name="hour_metrics_ttl_days")
    day_metrics_days: int = option(90, "day metrics are kept this many days", name="day_metrics_ttl_days")
    inactive_instance_days: int = option(
        7,
        "an inactive instance is removed this many days after its last heartbeat",
        name="inactive_instance_ttl_days",
    )
    unused_endpoint_days: int = option(
        7,
        "an endpoint is removed once it was registered this many days ago and no day metric of "
        "these days measured it (at most --day-metrics-ttl-days)",
        name="unused_endpoint_ttl_days",
    )
    interval_s: float = option(
        600.0, "how often aggregators look for data past its time to live", name="ttl_interval_s"
    )

    def check(self) -> None:
        if self.interval_s <= 0:
            raise ValueError(f"--ttl-interval-s must be above 0, not {self.interval_s:g}")
        for field in dataclasses.fields(self):
            days = getattr(self, field.name)
            if field.name.endswith("_days") and days < 1:
                flag = "--" + option_name(field).replace("_", "-")
                raise ValueError(f"{flag} must be at least 1, not {days}")
        if self.unused_endpoint_days > self.day_metrics_days:
            raise ValueError(
                f"--unused-endpoint-ttl-days ({self.unused_endpoint_days}) must be at most "
                f"--day-metrics-ttl-days ({self.day_metrics_days}): endpoints are found unused "
                "by their day metrics"
            )

    def ttl(self) -> TimesToLive:
        """The times to live (of a checked section)."""
        return TimesToLive(
            self.records_days,
            self.minute_metrics_days,
            self.hour_metrics_days,
            self.day_metrics_days,
            self.inactive_instance_days,
            self.unused_endpoint_days,
        )
