"""The OS_LINUX layer: hosts, known from what Prometheus's node exporter
serves of them (job ``vm-monitoring``, scraped by a node or sent through
OpenTelemetry's Collector), through the rules of ``rules/os_linux.yaml``.
A host is a service; its name is the host the exporter runs on."""

from __future__ import annotations

from typing import Any

from skyoap.layers import widgets as w
from skyoap.layers.layer import Layer, MenuItem
from skyoap.layers.meters import rule_metrics

NAME = "OS_LINUX"
RULES = ("os_linux.yaml",)


def _pages() -> tuple[dict[str, Any], ...]:
    mb = "/1024/1024"
    host = [
        w.card("CPU Usage", "avg(meter_vm_cpu_total_percentage)", "%"),
        w.card("Memory RAM Usage", f"avg(meter_vm_memory_used){mb}", "MB"),
        w.card("Memory Swap Usage", "avg(meter_vm_memory_swap_percentage)", "%"),
        w.line("CPU Average Used (%)", "meter_vm_cpu_average_used"),
        w.line(
            "CPU Load",
            "meter_vm_cpu_load1/100",
            "meter_vm_cpu_load5/100",
            "meter_vm_cpu_load15/100",
            labels=("load1", "load5", "load15"),
        ),
        w.line(
            "Memory RAM (MB)",
            f"meter_vm_memory_used{mb}",
            f"meter_vm_memory_total{mb}",
            f"meter_vm_memory_available{mb}",
            f"meter_vm_memory_buff_cache{mb}",
            labels=("used", "total", "available", "buffer_cache"),
        ),
        w.line(
            "Memory Swap (MB)",
            f"meter_vm_memory_swap_free{mb}",
            f"meter_vm_memory_swap_total{mb}",
            labels=("free", "total"),
        ),
        w.line("File System Mountpoint Usage (%)", "meter_vm_filesystem_percentage"),
        w.line(
            "Disk R/W (KB/s)",
            "meter_vm_disk_read/1024",
            "meter_vm_disk_written/1024",
            labels=("read", "written"),
        ),
        w.line(
            "Network Bandwidth Usage (KB/s)",
            "meter_vm_network_receive/1024",
            "meter_vm_network_transmit/1024",
            labels=("receive", "transmit"),
        ),
        w.line(
            "Network Status",
            "meter_vm_tcp_curr_estab",
            "meter_vm_tcp_tw",
            "meter_vm_tcp_alloc",
            "meter_vm_sockets_used",
            "meter_vm_udp_inuse",
            labels=("tcp_curr_estab", "tcp_tw", "tcp_alloc", "sockets_used", "udp_inuse"),
        ),
        w.line("Filefd Allocated", "meter_vm_filefd_allocated", labels=("filefd_allocated",)),
    ]
    hosts = w.meter_listing(
        "ServiceList", "Linux-Service", ("CPU Usage", "%", "meter_vm_cpu_total_percentage")
    )
    return w.layer_pages(NAME, "Linux", hosts, ("Overview", host))


LAYER = Layer(
    NAME,
    MenuItem("Linux", "linux", "Hosts, from what their node exporter serves.", "infrastructure"),
    rule_metrics(*RULES),
    _pages,
    rules=RULES,
)
