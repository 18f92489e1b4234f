"""Every resolver of the query endpoint, bound in one place.

To answer another field, write ``fn(context, **arguments)`` in the module of
its area (``identity.py``, and e.g. ``metadata.py`` for ``listServices``) and
add a line here: ``.query("listServices", metadata.list_services)``. A list
of what skyoap keeps none of answers empty (``none``, with why); a field
skyoap does not serve answers an error saying why (``refuse``, or one
without a line at all): never a made-up value (``binder.py``)."""

from __future__ import annotations

from graphql import GraphQLSchema

from skyoap.query import (
    alarms,
    events,
    identity,
    legacy_metrics,
    logs,
    metadata,
    metrics,
    profiling,
    topology,
    traces,
)
from skyoap.query.binder import Binder
from skyoap.query.schema import load_schema
from skyoap.query.ui import dashboards
from skyoap.query.ui import templates as ui_templates

_ONE_LAYER = "skyoap's services are each of one layer, in no hierarchy of layers"
_NO_PROCESSES = "skyoap takes no process telemetry (SkyWalking's eBPF agent's)"
_NO_BROWSERS = "skyoap takes no browser telemetry (SkyWalking's browser agent's)"
_NO_TASKS = (
    "skyoap profiles traces by SkyWalking's agents' thread dumps, not by eBPF, async-profiler or pprof"
)
_V1 = "it is SkyWalking's first metrics query; ask execExpression (MQE) or readMetricsValues"


def resolvers(schema: GraphQLSchema | None = None) -> Binder:
    binder = Binder(schema or load_schema())
    return _refused(_none_kept(_records_served(_served(binder))))


def _served(binder: Binder) -> Binder:
    """Identity, metadata, metrics and dashboards, answered from what skyoap keeps."""
    return (
        binder.query("version", identity.version)
        .mutation("version", identity.version)
        .query("getTimeInfo", identity.time_info)
        .query("checkHealth", identity.health)
        .query("listLayers", metadata.list_layers)
        .query("listServices", metadata.list_services)
        .query("getAllDatabases", metadata.all_databases)
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
        .query("readMetricsValues", legacy_metrics.read_metrics_values)
        .query("readMetricsValue", legacy_metrics.read_metrics_value)
        .query("readNullableMetricsValue", legacy_metrics.read_nullable_metrics_value)
        .query("readLabeledMetricsValues", legacy_metrics.read_labeled_metrics_values)
        .query("sortMetrics", legacy_metrics.sort_metrics)
        .query("listMetrics", legacy_metrics.list_metrics)
        .query("typeOfMetrics", legacy_metrics.type_of_metrics)
        .query("readRecords", legacy_metrics.read_records)
        .query("readSampledRecords", legacy_metrics.read_sampled_records)
        .query("getTopNRecords", legacy_metrics.get_top_n_records)
        .query("getMenuItems", dashboards.menu_items)
        .query("getAllTemplates", ui_templates.all_templates)
        .query("getTemplate", ui_templates.template)
        .mutation("addTemplate", ui_templates.add_template)
        .mutation("changeTemplate", ui_templates.change_template)
        .mutation("disableTemplate", ui_templates.disable_template)
    )


def _records_served(binder: Binder) -> Binder:
    """The topology, traces, logs, alarms, events and profiling skyoap answers from what it keeps."""
    return (
        binder.query("getGlobalTopology", topology.global_topology)
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
        .query("queryEvents", events.query_events)
        .query("queryBasicTracesByName", traces.query_basic_traces_by_name)
        .query("queryLogsByName", logs.query_logs_by_name)
        .query("getProfileTaskList", profiling.profile_task_list)
        .query("getProfileTaskLogs", profiling.profile_task_logs)
        .query("getProfileTaskSegments", profiling.profile_task_segments)
        .query("getSegmentsProfileAnalyze", profiling.segments_profile_analyze)
        .mutation("createProfileTask", profiling.create_profile_task)
    )


def _none_kept(binder: Binder) -> Binder:
    """The lists of what skyoap keeps none of: answered empty."""
    return (
        binder.none("getServiceHierarchy", _ONE_LAYER)
        .none("getInstanceHierarchy", _ONE_LAYER)
        .none("listLayerLevels", _ONE_LAYER)
        .none("listProcesses", _NO_PROCESSES)
        .none("getProcess", _NO_PROCESSES)
        .none("getProcessTopology", _NO_PROCESSES)
        .none("getProcessTopologyByName", _NO_PROCESSES)
        .none("getAllBrowserServices", _NO_BROWSERS)
        .none("searchBrowserServices", _NO_BROWSERS)
        .none("searchBrowserService", _NO_BROWSERS)
        .none("queryBrowserErrorLogs", _NO_BROWSERS)
        .none("queryEBPFProfilingTasks", _NO_TASKS)
        .none("queryEBPFProfilingSchedules", _NO_TASKS)
        .none("queryContinuousProfilingServiceTargets", _NO_TASKS)
        .none("queryContinuousProfilingMonitoringInstances", _NO_TASKS)
        .none("queryAsyncProfilerTaskList", _NO_TASKS)
        .none("queryPprofTaskList", _NO_TASKS)
        .none("hasQueryTracesV2Support", "skyoap answers traces through queryBasicTraces and queryTrace")
    )


def _refused(binder: Binder) -> Binder:
    """The fields skyoap does not serve: answered with why."""
    return (
        binder.refuse(
            "readHeatMap", "skyoap measures no heatmap metric (SkyWalking's rules define none either)"
        )
        .refuse("getValues", _V1)
        .refuse("getLinearIntValues", _V1)
        .refuse("getMultipleLinearIntValues", _V1)
        .refuse("getSubsetOfMultipleLinearIntValues", _V1)
        .refuse("getThermodynamic", _V1)
        .refuse("getServiceTopN", _V1)
        .refuse("getAllServiceInstanceTopN", _V1)
        .refuse("getServiceInstanceTopN", _V1)
        .refuse("getAllEndpointTopN", _V1)
        .refuse("getEndpointTopN", _V1)
        .refuse("queryTraces", "ask queryBasicTraces and queryTrace (hasQueryTracesV2Support is false)")
        .refuse("test", "skyoap runs no LAL scripts")
        .refuse("estimateProcessScale", _NO_PROCESSES)
        .refuse("queryPrepareCreateEBPFProfilingTaskData", _NO_TASKS)
        .refuse("analysisEBPFProfilingResult", _NO_TASKS)
        .refuse("queryAsyncProfilerTaskProgress", _NO_TASKS)
        .refuse("queryAsyncProfilerAnalyze", _NO_TASKS)
        .refuse("queryPprofTaskProgress", _NO_TASKS)
        .refuse("queryPprofAnalyze", _NO_TASKS)
        .refuse("createEBPFProfilingFixedTimeTask", _NO_TASKS, mutation=True)
        .refuse("createEBPFNetworkProfiling", _NO_TASKS, mutation=True)
        .refuse("keepEBPFNetworkProfiling", _NO_TASKS, mutation=True)
        .refuse("setContinuousProfilingPolicy", _NO_TASKS, mutation=True)
        .refuse("createAsyncProfilerTask", _NO_TASKS, mutation=True)
        .refuse("createPprofTask", _NO_TASKS, mutation=True)
    )
