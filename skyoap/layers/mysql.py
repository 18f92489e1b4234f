"""The MYSQL layer: MySQL and MariaDB servers, known from what
Prometheus's mysqld exporter serves of them (job ``mysql-monitoring``),
through the rules of ``rules/mysql_*.yaml``. A server is the service
``mysql::<host_name>``, each exporter's target an instance of it."""

from __future__ import annotations

from typing import Any

from skyoap.layers import widgets as w
from skyoap.layers.layer import Layer, MenuItem
from skyoap.layers.meters import rule_metrics
from skyoap.layers.virtual_database import DATABASE_STATEMENTS

NAME = "MYSQL"
RULES = ("mysql_instance.yaml", "mysql_service.yaml")
_COMMANDS = ("insert", "delete", "select", "update")
_THREADS = ("cached", "running", "created", "connected")


def _service() -> list[w.Widget]:
    def summed(name: str) -> str:
        return f"aggregate_labels(meter_mysql_{name},sum)"

    return [
        w.line("Current QPS", summed("qps"), labels=("QPS",)),
        w.line("Current TPS", summed("tps"), labels=("TPS",)),
        w.line(
            "Commands Trend (rows per second)",
            *(summed(f"commands_{c}_rate") for c in _COMMANDS),
            labels=tuple(f"{c.title()} Rate" for c in _COMMANDS),
        ),
        w.line(
            "Slow Queries Trend (queries per second)",
            summed("slow_queries_rate"),
            labels=("Slow Queries Rate",),
        ),
        w.line(
            "Connects",
            f"{summed('max_connections')}-{summed('status_thread_connected')}",
            summed("connects_aborted"),
            labels=("Available Connects", "Abort Connects"),
        ),
        w.line(
            "Threads",
            *(summed(f"threads_{t}") for t in _THREADS),
            labels=tuple(f"{t.title()} Threads" for t in _THREADS),
        ),
        w.line(
            "Connection Errors",
            summed("connection_errors_internal"),
            summed("connection_errors_max_connections"),
            labels=("Internal Errors", "Max Connections Errors"),
        ),
    ]


def _instance() -> list[w.Widget]:
    def m(name: str) -> str:
        return f"meter_mysql_instance_{name}"

    return [
        w.card("MySQL Uptime", f"latest({m('uptime')})/3600/24", "day"),
        w.card("Max Connections", f"latest({m('max_connections')})"),
        w.card("Innodb Buffer Pool Size", f"latest({m('innodb_buffer_pool_size')})/1024/1024", "MB"),
        w.card("Thread Cache Size", f"latest({m('thread_cache_size')})"),
        w.line("Current QPS", m("qps"), labels=("QPS",)),
        w.line("Current TPS", m("tps"), labels=("TPS",)),
        w.line(
            "Commands Trend (rows per second)",
            *(m(f"commands_{c}_rate") for c in _COMMANDS),
            labels=tuple(f"{c.title()} Rate" for c in _COMMANDS),
        ),
        w.line(
            "Slow Queries Trend (queries per second)", m("slow_queries_rate"), labels=("Slow Queries Rate",)
        ),
        w.line(
            "Connects",
            m("connects_available"),
            m("connects_aborted"),
            labels=("Available Connects", "Aborted Connects"),
        ),
        w.line(
            "Threads",
            *(m(f"threads_{t}") for t in _THREADS),
            labels=tuple(f"{t.title()} Threads" for t in _THREADS),
        ),
        w.line(
            "Connection Errors",
            m("connection_errors_internal"),
            m("connection_errors_max_connections"),
            labels=("Internal Errors", "Max Connection Errors"),
        ),
    ]


def _pages() -> tuple[dict[str, Any], ...]:
    uptime = ("Uptime", "Day", "meter_mysql_instance_uptime/3600/24")
    return (
        *w.layer_pages(
            NAME,
            "MySQL",
            w.meter_listing("ServiceList", "MySQL-Service"),
            ("Inspections", _service()),
            ("Slow Statements", [w.top("Slow Statements (ms)", f"top_n({DATABASE_STATEMENTS},10,des)")]),
            ("Instances", [w.meter_listing("InstanceList", "MySQL-Instance", uptime)]),
        ),
        w.instance_page(NAME, "MySQL", ("Overview", _instance())),
    )


LAYER = Layer(
    NAME,
    MenuItem("MySQL", "mysql", "MySQL and MariaDB servers, from what their exporter serves.", "database"),
    rule_metrics(*RULES),
    _pages,
    rules=RULES,
)
