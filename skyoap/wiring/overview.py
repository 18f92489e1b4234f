"""The cluster as the web UI's cluster page shows it, ``GET
/status/cluster/overview`` on the query port (JSON): every node with its
role, its addresses and the figures of its self-metrics (queues, drops,
memory held, persist latency), and every consumer group with its members
and, per partition, its owner, commit, end and lag.

A node's figures are read from its own registry, another's from its admin
``/metrics``; a node that serves none (``--admin-port`` off) or does not
answer in ``PEER_READ_S`` is listed without figures, saying why."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from skyoap.consumer.group import load_group
from skyoap.consumer.lag import group_names, lags
from skyoap.query.status import Page, StatusPage, json_page
from skyoap.remote.cluster import Member
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.scrape import Scrape, read_metrics
from skyoap.storage.api import StateStore, TopicDAO

PEER_READ_S = 2.0
PERSIST = "skyoap_worker_persist_seconds"


def figures(scrape: Scrape) -> dict[str, float | None]:
    """What the cluster page shows of one node's self-metrics."""
    persisted = scrape.total(f"{PERSIST}_count")
    p99 = scrape.quantile(PERSIST, 0.99)
    return {
        "queued": scrape.total("skyoap_buffer_depth"),
        "capacity": scrape.total("skyoap_buffer_capacity"),
        "dropped": scrape.total("skyoap_buffer_dropped_total") + scrape.total("skyoap_worker_dropped_total"),
        "shed": scrape.total("skyoap_memory_shed_total"),
        "memoryHeld": scrape.total("skyoap_memory_held_bytes"),
        "memoryLimit": scrape.total("skyoap_memory_limit_bytes"),
        "received": scrape.total("skyoap_worker_received_total"),
        "stored": scrape.total("skyoap_worker_stored_total"),
        "persistMeanMs": 1000 * scrape.total(f"{PERSIST}_sum") / persisted if persisted else None,
        "persistP99Ms": 1000 * p99 if p99 is not None and p99 != float("inf") else None,
    }


def overview_page(
    members: Callable[[], list[Member]],
    me: str,
    instruments: Instruments,
    topics: TopicDAO,
    state: StateStore,
) -> StatusPage:
    """The page of the node named ``me``, whose self-metrics are ``instruments``,
    in the cluster whose live nodes are ``members()``."""

    def node(member: Member) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "name": member.name,
            "role": member.role,
            "address": member.address,
            "admin": member.admin,
            "internal": member.internal,
            "startedMs": int(member.started_at * 1000),
            "self": member.name == me,
            "figures": None,
            "unread": None,
        }
        try:
            if member.name == me:
                scrape = Scrape(instruments.exposition().decode())
            elif member.admin:
                scrape = read_metrics(member.admin, PEER_READ_S)
            else:
                entry["unread"] = "it serves no /metrics (its --admin-port is off)"
                return entry
        except Exception as e:  # a peer that answers no Prometheus text is shown, not raised
            entry["unread"] = f"its /metrics at {member.admin} could not be read: {e}"
            return entry
        entry["figures"] = figures(scrape)
        return entry

    def page(as_json: bool) -> Page:
        live = members()
        with ThreadPoolExecutor(max_workers=min(8, max(1, len(live)))) as pool:
            nodes = list(pool.map(node, live))
        return json_page({"nodes": nodes, "groups": groups(topics, state)})

    return page


def groups(topics: TopicDAO, state: StateStore) -> list[dict[str, Any]]:
    """Every consumer group: its members, and per partition its owner, commit, end and lag."""
    out = []
    names = group_names(state)
    partitions: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    for p in lags(topics, state, names):
        partitions[p.group].append(
            {
                "topic": p.topic,
                "partition": p.partition,
                "owner": p.channel.owner if p.channel else None,
                "state": p.channel.state.value if p.channel else None,
                "committed": p.committed,
                "end": p.end,
                "lag": p.lag,
            }
        )
    for name in names:
        found = load_group(state, name)
        members = found.members if found else {}
        out.append(
            {
                "name": name,
                "members": [
                    {"name": m, "host": v.host, "topics": v.topics, "heartbeatMs": v.heartbeat_ms}
                    for m, v in sorted(members.items())
                ],
                "partitions": partitions[name],
                "lag": sum(p["lag"] or 0 for p in partitions[name]),
            }
        )
    return out
