"""What SkyWalking's UI reads beside GraphQL, on the same port:
``GET /status/config/ttl`` (how long data is kept, as text, or as JSON when
asked with ``Accept: application/json``), ``GET /status/cluster/nodes``
(the nodes that take L1 results, as SkyWalking lists its OAP nodes) and
``GET /debugging/config/dump`` (the node's options, credentials masked)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from skyoap.vocabulary.ttl import TimesToLive


@dataclass(frozen=True)
class Page:
    content_type: str
    body: bytes


StatusPage = Callable[[bool], Page]
"""``page(as_json)``: one endpoint's answer, JSON if the client accepts it."""


def json_page(value: object) -> Page:
    return Page("application/json", json.dumps(value, separators=(",", ":")).encode())


def ttl_page(ttl: TimesToLive) -> StatusPage:
    """SkyWalking 10's effective TTL: metrics by downsampling, records by
    kind (skyoap keeps every record as long); no cold stage (-1)."""
    metrics = {"minute": ttl.minute_metrics_days, "hour": ttl.hour_metrics_days, "day": ttl.day_metrics_days}
    records = ("normal", "trace", "zipkinTrace", "log", "browserErrorLog")
    kept = {"metrics": metrics, "records": dict.fromkeys(records, ttl.records_days)}

    def page(as_json: bool) -> Page:
        if as_json:
            cold = {kind: {f"cold{k[0].upper()}{k[1:]}": -1 for k in days} for kind, days in kept.items()}
            return json_page({kind: {**days, **cold[kind]} for kind, days in kept.items()})
        lines = [f"{kind}.{k}={v}" for kind, days in kept.items() for k, v in days.items()]
        lines += [f"{kind}.{k}.cold=-1" for kind, days in kept.items() for k in days]
        return Page("text/plain", ("\n".join(lines) + "\n").encode())

    return page


def config_page(options: Mapping[str, str]) -> StatusPage:
    """The node's options (``runtime.config.effective``), one ``name=value``
    a line, or a JSON object, as SkyWalking dumps its configuration."""

    def page(as_json: bool) -> Page:
        if as_json:
            return json_page(dict(options))
        return Page("text/plain", "".join(f"{k}={v}\n" for k, v in options.items()).encode())

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
