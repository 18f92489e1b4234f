"""The query protocol's schema as clients see it: the root fields they may
call, the signatures and enum values of those they call most, and the
queries SkyWalking's UI and CLI send validating against it."""

from __future__ import annotations

import graphql
import pytest
from graphql import (
    GraphQLArgument,
    GraphQLEnumType,
    GraphQLField,
    GraphQLInputField,
    GraphQLInputObjectType,
    GraphQLInterfaceType,
    GraphQLObjectType,
)

from skyoap.query.schema import load_schema, sdl_files

# fmt: off
QUERY_FIELDS = {
    "version", "checkHealth",
    # metadata
    "listLayers", "listServices", "getService", "findService", "listInstances", "listInstancesByName",
    "getInstance", "findEndpoint", "findEndpointByName", "getEndpointInfo", "listProcesses", "getProcess",
    "estimateProcessScale", "getTimeInfo", "getRecordsTTL", "getMetricsTTL",
    "getAllServices", "searchServices", "searchService", "getAllBrowserServices", "searchBrowserServices",
    "searchBrowserService", "getServiceInstances", "searchEndpoint", "getAllDatabases",
    # topology
    "getGlobalTopology", "getServiceTopology", "getServiceTopologyByName", "getServicesTopology",
    "getServicesTopologyByNames", "getServiceInstanceTopology", "getServiceInstanceTopologyByName",
    "getEndpointTopology", "getEndpointDependencies", "getEndpointDependenciesByName", "getProcessTopology",
    "getProcessTopologyByName",
    # metrics
    "typeOfMetrics", "listMetrics", "execExpression",
    "readMetricsValue", "readNullableMetricsValue", "readMetricsValues", "sortMetrics",
    "readLabeledMetricsValues", "readHeatMap", "readSampledRecords",
    "getValues", "getLinearIntValues", "getMultipleLinearIntValues", "getSubsetOfMultipleLinearIntValues",
    "getThermodynamic",
    "getServiceTopN", "getAllServiceInstanceTopN", "getServiceInstanceTopN", "getAllEndpointTopN",
    "getEndpointTopN", "getTopNRecords", "readRecords",
    # traces
    "queryBasicTraces", "queryBasicTracesByName", "queryTrace", "queryTraceTagAutocompleteKeys",
    "queryTraceTagAutocompleteValues", "queryTraces", "hasQueryTracesV2Support",
    # logs
    "supportQueryLogsByKeywords", "queryLogs", "queryLogsByName", "test", "queryLogTagAutocompleteKeys",
    "queryLogTagAutocompleteValues", "queryBrowserErrorLogs",
    # alarms and events
    "getAlarm", "queryAlarms", "queryAlarmTagAutocompleteKeys", "queryAlarmTagAutocompleteValues",
    "queryEvents",
    # hierarchy
    "getServiceHierarchy", "getInstanceHierarchy", "listLayerLevels",
    # ui
    "getTemplate", "getAllTemplates", "getMenuItems",
    # profiling
    "getProfileTaskList", "getProfileTaskLogs", "getProfileTaskSegments", "getSegmentsProfileAnalyze",
    "queryPrepareCreateEBPFProfilingTaskData", "queryEBPFProfilingTasks", "queryEBPFProfilingSchedules",
    "analysisEBPFProfilingResult",
    "queryContinuousProfilingServiceTargets", "queryContinuousProfilingMonitoringInstances",
    "queryAsyncProfilerTaskList", "queryAsyncProfilerTaskProgress", "queryAsyncProfilerAnalyze",
    "queryPprofTaskList", "queryPprofTaskProgress", "queryPprofAnalyze",
}

MUTATION_FIELDS = {
    "version",
    "addTemplate", "changeTemplate", "disableTemplate",
    "createProfileTask", "createEBPFProfilingFixedTimeTask", "createEBPFNetworkProfiling",
    "keepEBPFNetworkProfiling", "setContinuousProfilingPolicy", "createAsyncProfilerTask", "createPprofTask",
}
SIGNATURES = {
    "execExpression":
        "(expression: String!, entity: Entity!, duration: Duration!, debug: Boolean, dumpDBRsp: Boolean)"
        ": ExpressionResult!",
    "listServices": "(layer: String): [Service!]!",
    "getAllServices": "(duration: Duration!, group: String): [Service!]!",
    "findEndpoint": "(keyword: String, serviceId: ID!, limit: Int!, duration: Duration): [Endpoint!]!",
    "listInstances": "(duration: Duration!, serviceId: ID!): [ServiceInstance!]!",
    "getGlobalTopology": "(duration: Duration!, layer: String, debug: Boolean): Topology",
    "getServicesTopology": "(serviceIds: [ID!]!, duration: Duration!, debug: Boolean): Topology",
    "queryBasicTraces": "(condition: TraceQueryCondition, debug: Boolean): TraceBrief",
    "queryTrace": "(traceId: ID!, duration: Duration, debug: Boolean): Trace",
    "queryLogs": "(condition: LogQueryCondition, debug: Boolean): Logs",
    "getAlarm":
        "(duration: Duration!, scope: Scope, keyword: String, paging: Pagination!, tags: [AlarmTag])"
        ": Alarms",
    "queryAlarms": "(condition: AlarmQueryCondition!): Alarms",
    "getMenuItems": "(): [MenuItem!]!",
    "getAllTemplates": "(): [DashboardConfiguration!]!",
    "hasQueryTracesV2Support": "(): Boolean!",
    "version": "(): String",
    "getTimeInfo": "(): TimeInfo",
    "checkHealth": "(): HealthStatus!",
}

ENUM_VALUES = {
    "Step": ["DAY", "HOUR", "MINUTE", "SECOND"],
    "Scope": [
        "All", "Service", "ServiceInstance", "Endpoint", "Process",
        "ServiceRelation", "ServiceInstanceRelation", "EndpointRelation", "ProcessRelation",
    ],
    "DetectPoint": ["CLIENT", "SERVER", "PROXY"],
    "TraceState": ["ALL", "SUCCESS", "ERROR"],
    "QueryOrder": ["BY_START_TIME", "BY_DURATION"],
    "ExpressionResultType": ["UNKNOWN", "SINGLE_VALUE", "TIME_SERIES_VALUES", "SORTED_LIST", "RECORD_LIST"],
    "Order": ["ASC", "DES"],
    "Language": ["UNKNOWN", "JAVA", "DOTNET", "NODEJS", "PYTHON", "RUBY", "GO", "LUA", "PHP"],
    "MetricsType": ["UNKNOWN", "REGULAR_VALUE", "LABELED_VALUE", "HEATMAP", "SAMPLED_RECORD"],
    "ContentType": ["TEXT", "JSON", "YAML"],
    "EventType": ["Normal", "Error"],
    "ErrorCategory": ["ALL", "AJAX", "RESOURCE", "VUE", "PROMISE", "JS", "UNKNOWN"],
}

INPUT_FIELDS = {
    "Duration": {"start": "String!", "end": "String!", "step": "Step!", "coldStage": "Boolean"},
    "Pagination": {"pageNum": "Int", "pageSize": "Int!"},
    "Entity": {
        "scope": "Scope",
        "serviceName": "String", "normal": "Boolean", "serviceInstanceName": "String",
        "endpointName": "String", "processName": "String",
        "destServiceName": "String", "destNormal": "Boolean", "destServiceInstanceName": "String",
        "destEndpointName": "String", "destProcessName": "String",
    },
    "TraceQueryCondition": {
        "serviceId": "ID", "serviceInstanceId": "ID", "traceId": "String", "endpointId": "ID",
        "queryDuration": "Duration", "minTraceDuration": "Int", "maxTraceDuration": "Int",
        "traceState": "TraceState!", "queryOrder": "QueryOrder!", "tags": "[SpanTag!]",
        "paging": "Pagination!",
    },
    "LogQueryCondition": {
        "serviceId": "ID", "serviceInstanceId": "ID", "endpointId": "ID",
        "relatedTrace": "TraceScopeCondition", "queryDuration": "Duration", "paging": "Pagination!",
        "tags": "[LogTag!]", "keywordsOfContent": "[String!]", "excludingKeywordsOfContent": "[String!]",
        "queryOrder": "Order",
    },
    "AlarmQueryCondition": {
        "duration": "Duration!", "paging": "Pagination!", "entities": "[Entity!]", "layer": "String",
        "ruleNames": "[String!]", "keyword": "String", "tags": "[AlarmTag]",
    },
}
# fmt: on


def signature(field: GraphQLField) -> str:
    args = ", ".join(f"{name}: {arg.type}" for name, arg in field.args.items())
    return f"({args}): {field.type}"


def has_default(value: GraphQLArgument | GraphQLInputField) -> bool:
    # graphql-core 3.3 keeps a default written in SDL in `default`; 3.2 in `default_value`.
    return value.default_value is not graphql.Undefined or getattr(value, "default", None) is not None


def test_the_schema_builds_valid_once_per_process() -> None:
    schema = load_schema()
    assert graphql.validate_schema(schema) == []
    assert load_schema() is schema
    assert schema.query_type is not None and schema.query_type.name == "Query"
    assert schema.mutation_type is not None and schema.mutation_type.name == "Mutation"
    assert schema.subscription_type is None


def test_the_sdl_files_are_joined_root_file_first_then_by_name() -> None:
    assert [f.name for f in sdl_files()] == [
        "common.graphql", "alarms.graphql", "hierarchy.graphql", "logs.graphql", "metadata.graphql",
        "metrics.graphql", "profiling.graphql", "topology.graphql", "traces.graphql", "ui.graphql",
    ]  # fmt: skip


def test_query_has_exactly_the_protocols_root_fields() -> None:
    query = load_schema().query_type
    assert query is not None
    assert len(QUERY_FIELDS) == 102
    assert set(query.fields) == QUERY_FIELDS


def test_mutation_has_exactly_the_protocols_root_fields() -> None:
    mutation = load_schema().mutation_type
    assert mutation is not None
    assert set(mutation.fields) == MUTATION_FIELDS


@pytest.mark.parametrize("name", SIGNATURES)
def test_the_fields_clients_call_most_have_the_protocols_signatures(name: str) -> None:
    query = load_schema().query_type
    assert query is not None
    assert signature(query.fields[name]) == SIGNATURES[name]


@pytest.mark.parametrize("name", ENUM_VALUES)
def test_enums_have_exactly_the_protocols_values(name: str) -> None:
    enum = load_schema().type_map[name]
    assert isinstance(enum, GraphQLEnumType)
    assert list(enum.values) == ENUM_VALUES[name]
    # A value is sent and answered as its name.
    assert all(value.value == key for key, value in enum.values.items())


@pytest.mark.parametrize("name", INPUT_FIELDS)
def test_inputs_clients_send_have_exactly_the_protocols_fields(name: str) -> None:
    input_type = load_schema().type_map[name]
    assert isinstance(input_type, GraphQLInputObjectType)
    assert {key: str(field.type) for key, field in input_type.fields.items()} == INPUT_FIELDS[name]


def test_get_alarm_is_deprecated_for_query_alarms_as_in_skywalking_11() -> None:
    query = load_schema().query_type
    assert query is not None
    deprecated = sorted(name for name, f in query.fields.items() if f.deprecation_reason is not None)
    assert deprecated == ["getAlarm"]
    assert query.fields["getAlarm"].deprecation_reason == (
        "Use queryAlarms, which also filters by entity, layer and rule."
    )


def test_no_argument_or_input_field_has_a_default() -> None:
    # The protocol declares none: an argument a client leaves out reaches the resolver absent.
    with_default = []
    for type_ in load_schema().type_map.values():
        if graphql.is_introspection_type(type_):
            continue
        if isinstance(type_, GraphQLInputObjectType):
            with_default += [f"{type_.name}.{name}" for name, f in type_.fields.items() if has_default(f)]
        if isinstance(type_, GraphQLObjectType | GraphQLInterfaceType):
            with_default += [
                f"{type_.name}.{name}({arg_name})"
                for name, f in type_.fields.items()
                for arg_name, arg in f.args.items()
                if has_default(arg)
            ]
    assert with_default == []


def test_a_long_is_answered_as_a_json_number_beyond_32_bits() -> None:
    result = graphql.graphql_sync(
        load_schema(),
        "{ getTimeInfo { timezone currentTimestamp } }",
        root_value={"getTimeInfo": {"timezone": "+0000", "currentTimestamp": 1_767_225_600_000}},
    )
    assert result.errors is None
    assert result.data == {"getTimeInfo": {"timezone": "+0000", "currentTimestamp": 1_767_225_600_000}}


CLIENT_QUERIES = {
    "ui start-up": """
        query { menu: getMenuItems { title icon layer activate description documentLink i18nKey
                  subItems { title icon layer activate description documentLink i18nKey } }
                time: getTimeInfo { timezone currentTimestamp }
                version
                metricsTTL: getMetricsTTL { metadata minute hour day coldMinute coldHour coldDay }
                recordsTTL: getRecordsTTL { normal trace zipkinTrace log browserErrorLog
                  coldNormal coldTrace coldZipkinTrace coldLog coldBrowserErrorLog }
                hasQueryTracesV2Support
                templates: getAllTemplates { id, configuration, }
                layers: listLayers }
    """,
    "ui service selector": """
        query ($layer: String!, $serviceId: ID!, $duration: Duration!, $keyword: String!, $limit: Int!) {
            services: listServices(layer: $layer) { id value: name label: name group layers normal shortName }
            pods: listInstances(duration: $duration, serviceId: $serviceId) {
                id value: name language instanceUUID attributes { name value } }
            endpoints: findEndpoint(
                serviceId: $serviceId, keyword: $keyword, limit: $limit, duration: $duration
            ) { id value: name } }
    """,
    "ui topology": """
        query ($duration: Duration!, $serviceIds: [ID!]!) {
            topology: getServicesTopology(duration: $duration, serviceIds: $serviceIds) {
                nodes { id name type isReal layers } calls { id source detectPoints target } } }
    """,
    "ui dashboard widget": """
        query ($duration: Duration!, $entity: Entity!, $expression00: String!) {
            expression00: execExpression(expression: $expression00, entity: $entity, duration: $duration) {
                type error
                results { metric { labels { key value } }
                    values { name: id value refId: traceID
                        owner { scope serviceID serviceName normal serviceInstanceID serviceInstanceName
                                endpointID endpointName } } } } }
    """,
    "ui trace": """
        query ($condition: TraceQueryCondition, $traceId: ID!) {
            data: queryBasicTraces(condition: $condition) {
                traces { key: segmentId endpointNames duration start isError traceIds } }
            trace: queryTrace(traceId: $traceId) { spans { traceId segmentId spanId parentSpanId
                refs { traceId parentSegmentId parentSpanId type } serviceCode serviceInstanceName startTime
                endTime endpointName type peer component isError layer tags { key value }
                logs { time data { key value } }
                attachedEvents { startTime { seconds nanos } event endTime { seconds nanos }
                    tags { key value } summary { key value } } } } }
    """,
    "ui logs": """
        query ($condition: LogQueryCondition) {
            support: supportQueryLogsByKeywords
            queryLogs(condition: $condition) { logs { serviceName serviceId serviceInstanceName
                serviceInstanceId endpointName endpointId traceId timestamp contentType content
                tags { key value } } } }
    """,
    "ui alarms": """
        query (
            $keyword: String, $scope: Scope, $duration: Duration!, $tags: [AlarmTag], $paging: Pagination!
        ) {
            getAlarm(keyword: $keyword, scope: $scope, duration: $duration, paging: $paging, tags: $tags) {
                items: msgs { key: id message startTime recoveryTime scope name tags { key value }
                    events { uuid source { service serviceInstance endpoint } name type message
                        parameters { key value } startTime endTime }
                    snapshot { expression metrics { name results { metric { labels { key value } }
                        values { id value traceID owner { scope serviceName } } } } } } } }
    """,
    "horizon ui alarms": """
        query ($condition: AlarmQueryCondition!) {
            queryAlarms(condition: $condition) {
                msgs { id startTime recoveryTime scope name message tags { key value }
                    snapshot { expression metrics { name results { metric { labels { key value } }
                        values { id value traceID } } } } } } }
    """,
    "cli health and global topology": """
        query ($duration: Duration!, $layer: String) {
            checkHealth { score details }
            result: getGlobalTopology(duration: $duration, layer: $layer) {
                nodes { id name type isReal layers }
                calls { id source detectPoints target sourceComponents targetComponents } } }
    """,
}


@pytest.mark.parametrize("name", CLIENT_QUERIES)
def test_the_queries_clients_send_validate(name: str) -> None:
    assert graphql.validate(load_schema(), graphql.parse(CLIENT_QUERIES[name])) == []
