"""Every resolver of the query endpoint, bound in one place.

To answer another field, write ``fn(context, **arguments)`` in the module of
its area (``identity.py``, and e.g. ``metadata.py`` for ``listServices``) and
add a line here: ``.query("listServices", metadata.list_services)``. A field
without a line answers empty (``binder.py``)."""

from __future__ import annotations

from graphql import GraphQLSchema

from skyoap.query import alarms, dashboards, identity, logs, metadata, metrics, topology, traces
from skyoap.query.binder import Binder
from skyoap.query.schema import load_schema


def resolvers(schema: GraphQLSchema | None = None) -> Binder:
    return (
        Binder(schema or load_schema())
        .query("version", identity.version)
        .mutation("version", identity.version)
        .query("getTimeInfo", identity.time_info)
        .query("checkHealth", identity.health)
        .query("listLayers", metadata.list_layers)
        .query("listServices", metadata.list_services)
        .query("getAllServices", metadata.all_services)
        .query("searchServices", metadata.search_services)
        .query("findService", metadata.find_service)
        .query("searchService", metadata.search_service)
        .query("getService", metadata.get_service)
        .query("listInstances", metadata.list_instances)
        .query("getServiceInstances", metadata.list_instances)
        .query("listInstancesByName", metadata.list_instances_by_name)
        .query("getInstance", metadata.get_instance)
        .query("findEndpoint", metadata.find_endpoint)
        .query("findEndpointByName", metadata.find_endpoint_by_name)
        .query("searchEndpoint", metadata.search_endpoint)
        .query("getEndpointInfo", metadata.endpoint_info)
        .query("getMetricsTTL", metadata.metrics_ttl)
        .query("getRecordsTTL", metadata.records_ttl)
        .query_batch("execExpression", metrics.exec_expressions)
        .query("readMetricsValues", metrics.read_metrics_values)
        .query("getMenuItems", dashboards.menu_items)
        .query("getAllTemplates", dashboards.all_templates)
        .query("getTemplate", dashboards.template)
        .mutation("addTemplate", dashboards.unchanged)
        .mutation("changeTemplate", dashboards.unchanged)
        .mutation("disableTemplate", dashboards.unchanged)
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
        .query("queryBasicTraces", traces.query_basic_traces)
        .query("queryTrace", traces.query_trace)
        .query("queryTraceTagAutocompleteKeys", traces.tag_keys)
        .query("queryTraceTagAutocompleteValues", traces.tag_values)
        .query("queryLogs", logs.query_logs)
        .query("supportQueryLogsByKeywords", logs.supports_keywords)
        .query("queryLogTagAutocompleteKeys", logs.tag_keys)
        .query("queryLogTagAutocompleteValues", logs.tag_values)
        .query("getAlarm", alarms.get_alarm)
        .query("queryAlarms", alarms.query_alarms)
        .query("queryAlarmTagAutocompleteKeys", alarms.tag_keys)
        .query("queryAlarmTagAutocompleteValues", alarms.tag_values)
    )
