"""Every resolver of the query endpoint, bound in one place.

To answer another field, write ``fn(context, **arguments)`` in the module of
its area (``identity.py``, and e.g. ``metadata.py`` for ``listServices``) and
add a line here: ``.query("listServices", metadata.list_services)``. A field
without a line answers empty (``binder.py``)."""

from __future__ import annotations

from graphql import GraphQLSchema

from skyoap.query import identity, topology
from skyoap.query.binder import Binder
from skyoap.query.schema import load_schema


def resolvers(schema: GraphQLSchema | None = None) -> Binder:
    return (
        Binder(schema or load_schema())
        .query("version", identity.version)
        .mutation("version", identity.version)
        .query("getTimeInfo", identity.time_info)
        .query("checkHealth", identity.health)
        .query("getGlobalTopology", topology.global_topology)
        .query("getServicesTopology", topology.services_topology)
        .query("getServiceTopology", topology.service_topology)
        .query("getServiceTopologyByName", topology.service_topology_by_name)
        .query("getServicesTopologyByNames", topology.services_topology_by_names)
        .query("getServiceInstanceTopology", topology.instance_topology)
        .query("getServiceInstanceTopologyByName", topology.instance_topology_by_name)
        .query("getEndpointDependencies", topology.endpoint_dependencies)
        .query("getEndpointDependenciesByName", topology.endpoint_dependencies_by_name)
        .query("getEndpointTopology", topology.endpoint_topology)
    )
