"""The REDIS layer: Redis servers, known from what Prometheus's redis
exporter serves of them (job ``redis-monitoring``), through the rules of
``rules/redis_*.yaml``. A server is the service ``redis::<host_name>``,
each exporter's target an instance of it."""

from __future__ import annotations

from typing import Any

from skyoap.layers import widgets as w
from skyoap.layers.layer import Layer, MenuItem
from skyoap.layers.meters import rule_metrics
from skyoap.layers.virtual_database import DATABASE_STATEMENTS

NAME = "REDIS"
RULES = ("redis_instance.yaml", "redis_service.yaml")
_KEYS = ("DB Keys", "Evicted Keys", "Expired Keys")
_BYTES = ("Input Bytes", "Output Bytes")


def _service() -> list[w.Widget]:
    def summed(name: str, how: str = "sum") -> str:
        return f"aggregate_labels(meter_redis_{name},{how})"

    return [
        w.card("Uptime (day)", f"latest({summed('uptime', 'max')})/3600/24"),
        w.card("Connected Clients", f"latest({summed('connected_clients')})"),
        w.card("Blocked Clients", f"latest({summed('blocked_clients')})"),
        w.card(
            "Memory Usage (%)", f"latest({summed('memory_used_bytes')}/{summed('memory_max_bytes')})*100", "%"
        ),
        w.line("Hits Rate (%)", summed("hit_rate", "avg"), labels=("Hit Rate",)),
        w.line(
            "Average Time Spent by Command / sec",
            f"{summed('commands_duration', 'sum(cmd)')}/{summed('commands_total', 'sum(cmd)')}",
        ),
        w.line("Total Commands Trend", summed("total_commands_rate", "sum(cmd)")),
        w.line(
            "DB Keys",
            summed("db_keys"),
            summed("evicted_keys_total"),
            summed("expired_keys_total"),
            labels=_KEYS,
        ),
        w.line(
            "Net Input / Output Bytes (KB)",
            f"{summed('net_input_bytes_total')}/1024",
            f"{summed('net_output_bytes_total')}/1024",
            labels=_BYTES,
        ),
        w.line(
            "Total Time Spent by Command Trend (sec)",
            summed("commands_duration_seconds_total_rate", "sum(cmd)"),
        ),
    ]


def _instance() -> list[w.Widget]:
    def m(name: str) -> str:
        return f"meter_redis_instance_{name}"

    return [
        w.card("Uptime (day)", f"latest({m('uptime')})/3600/24"),
        w.card("Connected Clients", f"latest({m('connected_clients')})"),
        w.card("Blocked Clients", f"latest({m('redis_blocked_clients')})"),
        w.card("Memory Max Bytes (MB)", f"latest({m('memory_max_bytes')})/1000/1000", "MB"),
        w.line("Memory Usage (%)", m("memory_usage"), labels=("Memory Usage",)),
        w.line("Average Time Spent by Command / sec", m("average_time_spent_by_command")),
        w.line("Total Commands Trend", m("total_commands_rate")),
        w.line("DB Keys", m("db_keys"), m("evicted_keys_total"), m("expired_keys_total"), labels=_KEYS),
        w.line("Hits Rate (%)", m("hit_rate"), labels=("Hit Rate",)),
        w.line(
            "Net Input / Output Bytes (KB)",
            f"{m('net_input_bytes_total')}/1024",
            f"{m('net_output_bytes_total')}/1024",
            labels=_BYTES,
        ),
        w.line("Total Time Spent by Command Trend (sec)", m("commands_duration_seconds_total_rate")),
    ]


def _pages() -> tuple[dict[str, Any], ...]:
    return (
        *w.layer_pages(
            NAME,
            "Redis",
            w.meter_listing("ServiceList", "Redis-Service"),
            ("Inspections", _service()),
            ("Instances", [w.meter_listing("InstanceList", "Redis-Instance")]),
            ("Slow Commands", [w.top("Slow Commands (ms)", f"top_n({DATABASE_STATEMENTS},10,des)")]),
        ),
        w.instance_page(NAME, "Redis", ("Overview", _instance())),
    )


LAYER = Layer(
    NAME,
    MenuItem("Redis", "redis", "Redis servers, from what their exporter serves.", "database"),
    rule_metrics(*RULES),
    _pages,
    rules=RULES,
)
