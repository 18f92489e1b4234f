"""Every resolver of the query endpoint, bound in one place.

To answer another field, write ``fn(context, **arguments)`` in the module of
its area (``identity.py``, and e.g. ``metadata.py`` for ``listServices``) and
add a line here: ``.query("listServices", metadata.list_services)``. A field
without a line answers empty (``binder.py``)."""

from __future__ import annotations

from graphql import GraphQLSchema

from skyoap.query import identity, logs, traces
from skyoap.query.binder import Binder
from skyoap.query.schema import load_schema


def resolvers(schema: GraphQLSchema | None = None) -> Binder:
    return (
        Binder(schema or load_schema())
        .query("version", identity.version)
        .mutation("version", identity.version)
        .query("getTimeInfo", identity.time_info)
        .query("checkHealth", identity.health)
        .query("queryBasicTraces", traces.query_basic_traces)
        .query("queryTrace", traces.query_trace)
        .query("queryTraceTagAutocompleteKeys", traces.tag_keys)
        .query("queryTraceTagAutocompleteValues", traces.tag_values)
        .query("queryLogs", logs.query_logs)
        .query("supportQueryLogsByKeywords", logs.supports_keywords)
    )
