"""``skyoap consumer``: the topics, and each consumer group's members,
assignments, committed offsets and lag, as tables for people."""

from __future__ import annotations

from typing import TextIO

from skyoap.consumer.group import load_group
from skyoap.consumer.lag import group_names, lags
from skyoap.deploy.tables import table, utc_ms
from skyoap.model.topics import Topic
from skyoap.runtime import clock
from skyoap.storage.api import StateStore, TopicDAO


def _or_dash(value: object) -> object:
    return "-" if value is None else value


def print_consumers(topics: TopicDAO, state: StateStore, group: str | None, out: TextIO) -> None:
    rows = []
    for topic in Topic:
        for b in topics.bounds(topic.value):
            rows.append((topic.value, b.partition, b.start, b.end, b.size))
    print("topics", file=out)
    print(table(["topic", "partition", "start", "end", "records"], rows), file=out)

    groups = group_names(state)
    if group is not None:
        if group not in groups:
            raise ValueError(
                f"there is no consumer group {group!r}; the groups are {', '.join(groups) or 'none'}"
            )
        groups = [group]
    print(f"\nconsumer groups ({len(groups)})", file=out)
    now_ms = clock.now_ms()
    for name in groups:
        group_state = load_group(state, name)
        assert group_state is not None, "a group named by the store has a state"
        channels, members = group_state.channels, group_state.members
        print(f"\ngroup {name}: {len(members)} members", file=out)
        member_rows = []
        for m, info in sorted(members.items()):
            held = " ".join(sorted(n for n, ch in channels.items() if ch.owner == m)) or "-"
            ago_s = f"{(now_ms - info.heartbeat_ms) / 1000:.1f}"
            member_rows.append(
                (m, info.host or "-", ",".join(info.topics), utc_ms(info.heartbeat_ms), ago_s, held)
            )
        headers = ["member", "host", "topics", "last heartbeat (UTC)", "ago (s)", "partitions"]
        print(table(headers, member_rows), file=out)
        found = lags(topics, state, [name])
        partition_rows = [
            (f"{p.topic}/{p.partition}", p.channel.state.value if p.channel else "-",
             (p.channel and p.channel.owner) or "-", _or_dash(p.channel and p.channel.version),
             _or_dash(p.committed), _or_dash(p.end), _or_dash(p.lag))
            for p in found
        ]  # fmt: skip
        headers = ["partition", "state", "owner", "version", "committed", "end", "lag"]
        print(table(headers, partition_rows), file=out)
        total = sum(p.lag or 0 for p in found)
        print(f"lag in all: {total} records (a partition never committed counts from offset 0)", file=out)
