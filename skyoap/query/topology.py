"""SkyWalking's topology queries: who called whom in a Duration, among
services, between the instances of two services, and around one endpoint.

Each is built from the relation metrics of the Duration's buckets as
SkyWalking's ``TopologyQueryService`` builds it from its own: one call per
source and target, with the sides that measured it (``detectPoints``); a node
for every end of a call. The receiver has already counted a caller's exit
span to an address a callee's entry span named (a network address alias)
under the callee's service, so both sides of such a call meet on one edge,
and an address nobody named stays a node of its own: a virtual service.

Calls carry the names of the components each side measured them through,
and service nodes the type SkyWalking gives them (``_Types``); instance and
endpoint nodes have none, as in SkyWalking. A service that reports is of the
``GENERAL`` layer; a database or a cache, of its virtual layer
(``layers.KNOWN_BY_CALLERS``); any other address, of none (``UNDEFINED``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from skyoap.layers import KNOWN_BY_CALLERS
from skyoap.model.inventory import DetectPoint, ServiceInventory
from skyoap.model.metrics import (
    CallMetrics,
    EndpointRelationMetrics,
    ServiceInstanceRelationMetrics,
    ServiceRelationMetrics,
)
from skyoap.query import conditions
from skyoap.query.components import component_name, priority, server_name
from skyoap.query.conditions import UNDEFINED
from skyoap.query.context import QueryContext
from skyoap.vocabulary import ids
from skyoap.vocabulary.duration import Duration

MAX_ROWS = 10_000
"""A topology is built from fewer relation rows (one per relation and time
bucket) than this, all its reads together; at this many the query is refused
with what to ask instead. No read asks for more: it is also the most one
Elasticsearch search returns."""

FEW_SERVICES = 8
"""Up to this many services, ``getServicesTopology`` reads the relations of
each; more, it reads the whole Duration's once and keeps theirs."""

NAMES_PER_READ = 1_000
"""Service names looked up in the inventory per read."""

GENERAL = "GENERAL"
"""The layer of every service that reports (skyoap has no other)."""

USER = "User"
"""The caller the receiver names for entry spans no traced service called
(SkyWalking's name)."""

USER_TYPE = "USER"
"""SkyWalking's type of the ``User`` node."""

_ORDER = (DetectPoint.CLIENT, DetectPoint.SERVER, DetectPoint.PROXY)
"""The order SkyWalking lists a call's detect points in: the client's side
is added first."""


R = TypeVar("R", bound=CallMetrics)


class TopologyError(ValueError):
    """A topology query that cannot be answered as asked: an id that is not
    one, or a Duration with more relation rows than ``MAX_ROWS``."""


@dataclass(frozen=True)
class Service:
    """A service as an id names it."""

    name: str
    normal: bool

    @functools.cached_property
    def id(self) -> str:
        return ids.service_id(self.name, self.normal)


def parse_service_id(given: str, argument: str) -> Service:
    """The service ``given`` names; ``ids.BadId`` saying what an id is if it is not one."""
    return Service(*ids.read_service_id(given, argument))


def parse_endpoint_id(given: str, argument: str) -> tuple[Service, str]:
    """The service and the name of the endpoint ``given`` names."""
    service_part, _, _ = given.partition("_")
    service, name = ids.endpoint_names(given, argument)
    return Service(service, ids.read_service_id(service_part, argument)[1]), name


def _window(given: Mapping[str, Any]) -> Duration:
    """The Duration a topology reads, refused at once if its step is one no metric is kept at."""
    duration = Duration.of(given)
    duration.step.downsampling()
    return duration


@dataclass
class Rows:
    """The relation rows one topology reads, ``MAX_ROWS`` at most in all."""

    context: QueryContext
    window: Duration
    what: str
    read: int = 0

    def of(self, model: type[R], where: Mapping[str, str] | None = None) -> list[R]:
        """The rows of ``model`` in the window whose columns equal ``where``'s values."""
        left = MAX_ROWS - self.read
        w, level = self.window, self.window.step.downsampling()
        rows = self.context.metrics.query(model, level, w.start_bucket, w.end_bucket, where, limit=left)
        if len(rows) >= left:
            span = f"{w.start} to {w.end} by {w.step.value}"
            raise TopologyError(
                f"the {self.what} from {span} has {MAX_ROWS} relation rows or more (one per relation and "
                f"{level.value}), and this node builds a topology from fewer; ask for a shorter Duration, "
                "or a step of HOUR or DAY"
            )
        self.read += len(rows)
        return rows


def normal_services(context: QueryContext, names: Iterable[str]) -> frozenset[str]:
    """Those of ``names`` that are services reporting themselves (in the
    inventory); any other is known only from its callers."""
    wanted = sorted(set(names))
    found: set[str] = set()
    for start in range(0, len(wanted), NAMES_PER_READ):
        found.update(context.inventory.get_many(ServiceInventory, wanted[start : start + NAMES_PER_READ]))
    return frozenset(found)


def _points(sides: Iterable[str]) -> list[str]:
    seen = {DetectPoint(side) for side in sides}
    return [p.name for p in _ORDER if p in seen]


def _call(
    source: str, target: str, call_id: str, sides: Iterable[str], components: Mapping[str, Iterable[int]] = {}
) -> dict[str, Any]:
    return {
        "id": call_id,
        "source": source,
        "sourceComponents": _names(components.get(DetectPoint.CLIENT.value, ())),
        "target": target,
        "targetComponents": _names(components.get(DetectPoint.SERVER.value, ())),
        "detectPoints": _points(sides),
    }


def _names(components: Iterable[int]) -> list[str]:
    return list(dict.fromkeys(component_name(c) for c in sorted(components)))


@dataclass
class _Calls:
    """Calls by (source id, target id), with the sides each was measured from
    and the components each side measured it through."""

    sides: dict[tuple[str, str], dict[str, set[int]]] = field(default_factory=dict)

    def add(self, source: str, target: str, side: str, components: Iterable[int] = ()) -> None:
        self.sides.setdefault((source, target), {}).setdefault(side, set()).update(components)

    def answer(self) -> list[dict[str, Any]]:
        """Each call, its id SkyWalking's relation id: ``source-target``."""
        return [_call(s, t, f"{s}-{t}", sides, sides) for (s, t), sides in sorted(self.sides.items())]


# Services ------------------------------------------------------------------


def _service_node(service: Service, virtual: Mapping[str, list[str]]) -> dict[str, Any]:
    layers = [GENERAL] if service.normal else virtual.get(service.name, [UNDEFINED])
    return {"id": service.id, "name": service.name, "type": None, "isReal": service.normal, "layers": layers}


def virtual_layers(context: QueryContext, window: Duration, names: Iterable[str]) -> dict[str, list[str]]:
    """The virtual layers (``VIRTUAL_DATABASE``, ...) of each of ``names``
    that is a database or a cache called since the window's start."""
    wanted = set(names)
    found: dict[str, list[str]] = {}
    if not wanted:
        return found
    level = window.step.downsampling()
    for layer, model in KNOWN_BY_CALLERS.items():
        for (name,) in context.metrics.distinct(model, level, window.start_bucket, ("service",)):
            if name in wanted:
                found.setdefault(name, []).append(layer)
    return found


@dataclass
class _Types:
    """The type of each service node, as SkyWalking's topology gives it: the
    component that served its calls (of the highest priority when several
    did), ``USER`` for the ``User`` caller, and for an address only known
    from its callers the server their client library reaches (``Redis``)."""

    found: dict[str, str] = field(default_factory=dict)
    served_by: dict[str, int] = field(default_factory=dict)
    """The component each node's type was taken from at the server side."""

    def called(self, dest: Service, components: Iterable[int]) -> None:
        for component in sorted(components):
            if not dest.normal and dest.id not in self.found:
                self.found[dest.id] = server_name(component)

    def served(self, source: Service, dest: Service, components: Iterable[int]) -> None:
        for component in sorted(components):
            if not source.normal:
                self.found[source.id] = server_name(component)
            held = self.served_by.get(dest.id)
            if held is None or priority(component) > priority(held):
                self.served_by[dest.id] = component
                self.found[dest.id] = component_name(component)
        if source.name == USER and not source.normal:
            self.found[source.id] = USER_TYPE


Keep = Callable[[Service, Service], bool]
"""Whether a topology keeps the calls from one service to another."""


def services_answer(
    rows: Sequence[ServiceRelationMetrics],
    normal: frozenset[str],
    keep: Keep | None = None,
    virtual: Mapping[str, list[str]] = {},
) -> dict[str, Any]:
    """The topology of ``rows`` (only the calls ``keep(source, dest)`` keeps, if
    given): of each relation and side, whatever its buckets. The client
    side's rows are read first, as SkyWalking reads them: a type a server
    side gives takes the place of one a client side conjectured. A node
    that does not report is of its ``virtual`` layers, if it has any."""
    relations: dict[tuple[str, str, str], set[int]] = {}
    for r in sorted(rows, key=lambda r: r.detect_point != DetectPoint.CLIENT.value):
        relations.setdefault((r.source, r.dest, r.detect_point), set()).update(r.components)
    calls, types = _Calls(), _Types()
    nodes: dict[str, dict[str, Any]] = {}
    services: dict[str, Service] = {}

    def service(name: str) -> Service:
        found = services.get(name)
        if found is None:
            found = services[name] = Service(name, name in normal)
        return found

    for (source_name, dest_name, side), components in relations.items():
        source, dest = service(source_name), service(dest_name)
        if keep is not None and not keep(source, dest):
            continue
        calls.add(source.id, dest.id, side, components)
        for end in (source, dest):
            if end.id not in nodes:
                nodes[end.id] = _service_node(end, virtual)
        if side == DetectPoint.SERVER.value:
            types.served(source, dest, components)
        else:
            types.called(dest, components)
    for node_id, node_type in types.found.items():
        if node_id in nodes:
            nodes[node_id]["type"] = node_type
    return {
        "nodes": sorted(nodes.values(), key=lambda n: (n["name"], n["id"])),
        "calls": calls.answer(),
    }


def global_topology(
    context: QueryContext, duration: Mapping[str, Any], layer: str | None = None, debug: bool = False
) -> dict[str, Any]:
    """Every call of the Duration; of one layer's services (``GENERAL``: those
    that report, any other: none), if ``layer`` is given."""
    window = _window(duration)
    if layer and layer != GENERAL:
        return {"nodes": [], "calls": []}
    rows = Rows(context, window, "global topology").of(ServiceRelationMetrics)
    normal = normal_services(context, (n for r in rows for n in (r.source, r.dest)))
    keep: Keep | None = (lambda s, d: s.normal or d.normal) if layer else None
    return services_answer(rows, normal, keep, _virtual(context, window, rows, normal))


def _virtual(
    context: QueryContext, window: Duration, rows: Sequence[ServiceRelationMetrics], normal: frozenset[str]
) -> dict[str, list[str]]:
    """The virtual layers of the services ``rows`` name that do not report (but ``User``)."""
    return virtual_layers(context, window, {r.dest for r in rows} - normal - {USER})


def services_topology(
    context: QueryContext, serviceIds: Sequence[str], duration: Mapping[str, Any], debug: bool = False
) -> dict[str, Any]:
    """The calls from and to each of ``serviceIds`` in the Duration."""
    services = {parse_service_id(given, "serviceIds") for given in serviceIds}
    window = _window(duration)
    if not services:
        return {"nodes": [], "calls": []}
    rows = Rows(context, window, "topology of " + _some(sorted(s.name for s in services)))
    if len(services) <= FEW_SERVICES:
        read: dict[str, ServiceRelationMetrics] = {}
        for s in sorted(services, key=lambda s: s.id):
            for column in ("source", "dest"):
                read.update((r.key(), r) for r in rows.of(ServiceRelationMetrics, {column: s.name}))
        found = list(read.values())
    else:
        found = rows.of(ServiceRelationMetrics)
    normal = normal_services(context, (n for r in found for n in (r.source, r.dest)))
    wanted = {s.id for s in services}
    keep = lambda s, d: s.id in wanted or d.id in wanted  # noqa: E731
    return services_answer(found, normal, keep, _virtual(context, window, found, normal))


def service_topology(
    context: QueryContext, serviceId: str, duration: Mapping[str, Any], debug: bool = False
) -> dict[str, Any]:
    """The calls from and to one service: its callers and callees."""
    return services_topology(context, [serviceId], duration)


def _some(names: Sequence[str]) -> str:
    shown = ", ".join(repr(n[:60]) for n in names[:3])
    return shown + (f" and {len(names) - 3} more" if len(names) > 3 else "")


# Instances -----------------------------------------------------------------


def instance_topology(
    context: QueryContext,
    clientServiceId: str,
    serverServiceId: str,
    duration: Mapping[str, Any],
    debug: bool = False,
) -> dict[str, Any]:
    """The calls between the instances of two services, either way."""
    client = parse_service_id(clientServiceId, "clientServiceId")
    server = parse_service_id(serverServiceId, "serverServiceId")
    window = _window(duration)
    rows = Rows(context, window, f"instance topology of {client.name[:60]!r} and {server.name[:60]!r}")
    pairs = {(client, server), (server, client)}
    found: list[ServiceInstanceRelationMetrics] = []
    for source, dest in sorted(pairs, key=lambda p: (p[0].id, p[1].id)):
        where = {"source_service": source.name, "dest_service": dest.name}
        found += rows.of(ServiceInstanceRelationMetrics, where)
    normal = normal_services(context, (n for r in found for n in (r.source_service, r.dest_service)))
    calls = _Calls()
    nodes: dict[str, dict[str, Any]] = {}
    relations = (
        (r.source_service, r.source_instance, r.dest_service, r.dest_instance, r.detect_point) for r in found
    )
    for source_service, source_instance, dest_service, dest_instance, side in dict.fromkeys(relations):
        source = Service(source_service, source_service in normal)
        dest = Service(dest_service, dest_service in normal)
        if (source, dest) not in pairs:  # the name asked for, but not as the id said (real or not)
            continue
        source_node = _instance_node(source, source_instance)
        dest_node = _instance_node(dest, dest_instance)
        nodes.setdefault(source_node["id"], source_node)
        nodes.setdefault(dest_node["id"], dest_node)
        calls.add(source_node["id"], dest_node["id"], side)
    return {
        "nodes": sorted(nodes.values(), key=lambda n: (n["serviceName"], n["name"], n["id"])),
        "calls": calls.answer(),
    }


def _instance_node(service: Service, instance: str) -> dict[str, Any]:
    return {
        "id": ids.instance_id(service.name, service.normal, instance),
        "name": instance,
        "serviceId": service.id,
        "serviceName": service.name,
        "type": None,
        "isReal": service.normal,
    }


# Endpoints -----------------------------------------------------------------


def _endpoint_calls(
    context: QueryContext, endpointId: str, duration: Mapping[str, Any], what: str
) -> tuple[list[dict[str, Any]], dict[str, tuple[Service, str]]]:
    """The calls into and out of one endpoint (as the callees measured them:
    endpoints have no client side), and the endpoints at their ends by id."""
    service, name = parse_endpoint_id(endpointId, "endpointId")
    rows = Rows(context, _window(duration), f"{what} of endpoint {name[:60]!r} of {service.name[:60]!r}")
    found: dict[str, EndpointRelationMetrics] = {}
    for side in ("dest", "source"):
        where = {f"{side}_service": service.name, f"{side}_endpoint": name}
        found.update((r.key(), r) for r in rows.of(EndpointRelationMetrics, where))
    normal = normal_services(context, (n for r in found.values() for n in (r.source_service, r.dest_service)))
    ends: dict[str, tuple[Service, str]] = {}
    calls: dict[str, dict[str, Any]] = {}
    relations = (
        (r.source_service, r.source_endpoint, r.dest_service, r.dest_endpoint) for r in found.values()
    )
    for source_service, source_endpoint, dest_service, dest_endpoint in dict.fromkeys(relations):
        source = (Service(source_service, source_service in normal), source_endpoint)
        dest = (Service(dest_service, dest_service in normal), dest_endpoint)
        source_id, dest_id = _endpoint_id(*source), _endpoint_id(*dest)
        if endpointId not in (source_id, dest_id):
            continue
        ends[source_id], ends[dest_id] = source, dest
        # SkyWalking's endpoint relation id: each end's service id and name, not its endpoint id.
        call_id = "-".join((source[0].id, ids.encode(source[1]), dest[0].id, ids.encode(dest[1])))
        calls[call_id] = _call(source_id, dest_id, call_id, [DetectPoint.SERVER.value])
    return [calls[k] for k in sorted(calls)], ends


def _endpoint_id(service: Service, name: str) -> str:
    return ids.endpoint_id(service.name, service.normal, name)


def endpoint_dependencies(
    context: QueryContext, endpointId: str, duration: Mapping[str, Any], debug: bool = False
) -> dict[str, Any]:
    """The endpoints that called one endpoint and those it called."""
    calls, ends = _endpoint_calls(context, endpointId, duration, "dependencies")
    nodes = [
        {
            "id": endpoint_id,
            "name": name,
            "serviceId": service.id,
            "serviceName": service.name,
            "type": USER_TYPE if service.name == USER and not service.normal else None,
            "isReal": service.normal,
        }
        for endpoint_id, (service, name) in ends.items()
    ]
    return {"nodes": sorted(nodes, key=lambda n: (n["serviceName"], n["name"])), "calls": calls}


def endpoint_topology(context: QueryContext, endpointId: str, duration: Mapping[str, Any]) -> dict[str, Any]:
    """``getEndpointDependencies`` in its first form, as SkyWalking still
    answers it: plain nodes, each real, of an empty type and no layers."""
    calls, ends = _endpoint_calls(context, endpointId, duration, "topology")
    nodes = [
        {"id": endpoint_id, "name": name, "type": "", "isReal": True, "layers": []}
        for endpoint_id, (_, name) in ends.items()
    ]
    return {"nodes": sorted(nodes, key=lambda n: (n["name"], n["id"])), "calls": calls}


# By names ------------------------------------------------------------------


def service_topology_by_name(
    context: QueryContext, service: Mapping[str, Any], duration: Mapping[str, Any], debug: bool = False
) -> dict[str, Any]:
    return services_topology(context, [conditions.service_id(service)], duration)


def services_topology_by_names(
    context: QueryContext,
    services: Sequence[Mapping[str, Any]],
    duration: Mapping[str, Any],
    debug: bool = False,
) -> dict[str, Any]:
    return services_topology(context, [conditions.service_id(s) for s in services], duration)


def instance_topology_by_name(
    context: QueryContext,
    clientService: Mapping[str, Any],
    serverService: Mapping[str, Any],
    duration: Mapping[str, Any],
    debug: bool = False,
) -> dict[str, Any]:
    return instance_topology(
        context, conditions.service_id(clientService), conditions.service_id(serverService), duration
    )


def endpoint_dependencies_by_name(
    context: QueryContext, endpoint: Mapping[str, Any], duration: Mapping[str, Any], debug: bool = False
) -> dict[str, Any]:
    return endpoint_dependencies(context, conditions.endpoint_id(endpoint), duration)
