"""Prints what storage holds as tables for people."""

from __future__ import annotations

from typing import TextIO

from skyoap.deploy.tables import table, utc_ms
from skyoap.model.inventory import (
    EndpointInventory,
    NetworkAddressInventory,
    ServiceInstanceInventory,
    ServiceInventory,
)
from skyoap.storage.api import InventoryDAO


def print_inventory(dao: InventoryDAO, out: TextIO, limit: int = 10_000) -> None:
    services = dao.list(ServiceInventory, limit)
    names = {s.sequence: s.name for s in services}
    instances = dao.list(ServiceInstanceInventory, limit)
    endpoints = dao.list(EndpointInventory, limit)
    addresses = dao.list(NetworkAddressInventory, limit)
    per_service: dict[int, list[ServiceInstanceInventory]] = {}
    for inst in instances:
        per_service.setdefault(inst.service_id, []).append(inst)

    print(f"services ({len(services)})", file=out)
    print(
        table(
            ["id", "name", "instances", "active", "last heartbeat (UTC)"],
            [
                (
                    s.sequence,
                    s.name,
                    len(per_service.get(s.sequence, [])),
                    sum(i.active for i in per_service.get(s.sequence, [])),
                    utc_ms(s.heartbeat_time),
                )
                for s in services
            ],
        ),
        file=out,
    )
    print(f"\nservice instances ({len(instances)})", file=out)
    print(
        table(
            ["id", "service", "uuid", "active", "registered (UTC)", "last heartbeat (UTC)"],
            [
                (
                    i.sequence,
                    names.get(i.service_id, i.service_id),
                    i.instance_uuid,
                    "yes" if i.active else "no",
                    utc_ms(i.register_time),
                    utc_ms(i.heartbeat_time),
                )
                for i in instances
            ],
        ),
        file=out,
    )
    print(f"\nendpoints ({len(endpoints)})", file=out)
    print(
        table(
            ["id", "service", "endpoint"],
            [(e.sequence, names.get(e.service_id, e.service_id), e.name) for e in endpoints],
        ),
        file=out,
    )
    print(f"\nnetwork addresses ({len(addresses)})", file=out)
    print(table(["id", "address"], [(a.sequence, a.name) for a in addresses]), file=out)
