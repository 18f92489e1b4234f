"""The POSTGRESQL layer: PostgreSQL servers, known from what Prometheus's
postgres exporter serves of them (job ``postgresql-monitoring``), through
the rules of ``rules/postgresql_*.yaml``. A server is the service
``postgresql::<host_name>`` (the label its scrape target carries), each
exporter's target an instance of it."""

from __future__ import annotations

from typing import Any

from skyoap.layers import widgets as w
from skyoap.layers.layer import Layer, MenuItem
from skyoap.layers.meters import rule_metrics
from skyoap.layers.virtual_database import DATABASE_STATEMENTS

NAME = "POSTGRESQL"
RULES = ("postgresql_instance.yaml", "postgresql_service.yaml")

_TRENDS = (
    ("Fetched Rows Trend (rows per second)", "fetched_rows_rate"),
    ("Inserted Rows Trend (rows per second)", "inserted_rows_rate"),
    ("Updated Rows Trend (rows per second)", "updated_rows_rate"),
    ("Deleted Rows Trend (rows per second)", "deleted_rows_rate"),
    ("Returned Rows Trend (rows per second)", "returned_rows_rate"),
    ("Rolled Back Transactions Trend (per second)", "rolled_back_transactions_rate"),
    ("Committed Transactions Trend (per second)", "committed_transactions_rate"),
    ("Conflicts Trend (per second)", "conflicts_rate"),
    ("Active Sessions", "active_sessions"),
    ("Idle Sessions", "idle_sessions"),
    ("Deadlocks Trend (per second)", "deadlocks_rate"),
    ("Temporary Files Trend (per second)", "temporary_files_rate"),
    ("Locks", "locks_count"),
)
_BUFFERS = (
    "buffers_checkpoint",
    "buffers_clean",
    "buffers_backend_fsync",
    "buffers_alloc",
    "buffers_backend",
)
_BUFFER_LABELS = ("Checkpoint Buffers", "Clean Buffers", "Fsync Buffers", "Alloc Buffers", "Backend Buffers")
_CHECKPOINTS = ("checkpoint_sync_time_rate", "checkpoints_timed_rate", "checkpoint_req_rate",
                "checkpoint_write_time_rate")  # fmt: skip
_CHECKPOINT_LABELS = ("Sync Time Checkpoint", "Timed Checkpoint", "Req Checkpoint", "Write Time Checkpoint")


def _service() -> list[w.Widget]:
    def summed(name: str, how: str = "sum") -> str:
        return f"aggregate_labels(meter_pg_{name},{how})"

    return [
        *(w.line(title, summed(name)) for title, name in _TRENDS),
        w.line("Cache Hit Rate (%)", summed("cache_hit_rate", "avg")),
        w.line("Buffers Trend (per second)", *map(summed, _BUFFERS), labels=_BUFFER_LABELS),
        w.line("Checkpoint Stat Trend (per second)", *map(summed, _CHECKPOINTS), labels=_CHECKPOINT_LABELS),
    ]


def _instance() -> tuple[tuple[str, list[w.Widget]], ...]:
    """An instance's tabs: its settings, then what it does."""
    mb, gb = "/1024/1024", "/1024/1024/1024"
    settings = (
        ("Shared Buffers", "shared_buffers", mb, "MB"), ("Effective Cache", "effective_cache", gb, "GB"),
        ("Seq Page Cost", "seq_page_cost", "", ""), ("Random Page Cost", "random_page_cost", "", ""),
        ("Max Worker Processes", "max_worker_processes", "", ""), ("Max WAL Size", "max_wal_size", gb, "GB"),
        ("Maintenance Work Mem", "maintenance_work_mem", mb, "MB"),
        ("Max Parallel Workers", "max_parallel_workers", "", ""), ("Work Mem", "work_mem", mb, "MB"),
    )  # fmt: skip
    trends = [
        *(w.line(title, f"meter_pg_instance_{name}") for title, name in _TRENDS),
        w.line("Cache Hit Rate (%)", "meter_pg_instance_cache_hit_rate"),
        w.line(
            "Buffers Trend (per second)", *(f"meter_pg_instance_{b}" for b in _BUFFERS), labels=_BUFFER_LABELS
        ),
        w.line(
            "Checkpoint Stat Trend (per second)",
            *(f"meter_pg_instance_{c}" for c in _CHECKPOINTS),
            labels=_CHECKPOINT_LABELS,
        ),
    ]
    cards = [
        w.card(title, f"latest(meter_pg_instance_{name}){scale}", unit)
        for title, name, scale, unit in settings
    ]
    return ("Settings", cards), ("Inspections", trends)


def _pages() -> tuple[dict[str, Any], ...]:
    return (
        *w.layer_pages(
            NAME,
            "PostgreSQL",
            w.meter_listing("ServiceList", "PostgreSQL-Service"),
            ("Inspections", _service()),
            ("Slow Statements", [w.top("Slow Statements (ms)", f"top_n({DATABASE_STATEMENTS},10,des)")]),
            ("Instances", [w.meter_listing("InstanceList", "PostgreSQL-Instance")]),
        ),
        w.instance_page(NAME, "PostgreSQL", *_instance()),
    )


LAYER = Layer(
    NAME,
    MenuItem("PostgreSQL", "postgresql", "PostgreSQL servers, from what their exporter serves.", "database"),
    rule_metrics(*RULES),
    _pages,
    rules=RULES,
)
