"""What SkyWalking's UI reads beside GraphQL, on the same port:
``GET /status/config/ttl`` (how long data is kept, as text, or as JSON when
asked with ``Accept: application/json``) and ``GET /status/cluster/nodes``
(the nodes that take L1 results, as SkyWalking lists its OAP nodes)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from skyoap.query.context import TimesToLive


@dataclass(frozen=True)
class Page:
    content_type: str
    body: bytes


StatusPage = Callable[[bool], Page]
"""``page(as_json)``: one endpoint's answer, JSON if the client accepts it."""


def json_page(value: object) -> Page:
    return Page("application/json", json.dumps(value, separators=(",", ":")).encode())


def ttl_page(ttl: TimesToLive) -> StatusPage:
    """SkyWalking's effective TTL: metrics by downsampling, records (traces
    and logs are its super dataset); no cold stage (-1)."""
    metrics = {"minute": ttl.minute_metrics_days, "hour": ttl.hour_metrics_days, "day": ttl.day_metrics_days}
    records = {"default": ttl.records_days, "superDataset": ttl.records_days}

    def page(as_json: bool) -> Page:
        if as_json:
            cold_metrics = {"coldMinute": -1, "coldHour": -1, "coldDay": -1}
            cold_records = {"coldValue": -1, "coldSuperDataset": -1}
            return json_page({"metrics": {**metrics, **cold_metrics}, "records": {**records, **cold_records}})
        lines = [f"metrics.{k}={v}" for k, v in metrics.items()]
        lines += [f"records.{k}={v}" for k, v in records.items()]
        return Page("text/plain", ("\n".join(lines) + "\n").encode())

    return page


def cluster_page(nodes: Callable[[], Sequence[tuple[str, bool]]]) -> StatusPage:
    """``nodes()``: each node's agent address (``host:port``) and whether it is this one."""

    def page(as_json: bool) -> Page:
        listed = []
        for address, is_self in nodes():
            host, _, port = address.rpartition(":")
            listed.append({"host": host, "port": int(port), "self": is_self})
        return json_page({"nodes": listed})

    return page
