"""Resolvers bound to the schema's root fields by name, and an empty answer
for every field that has none.

A client built for SkyWalking selects many fields at start-up and on every
page; a field this node does not answer yet must not fail the whole query (a
non-null field that resolves to null does, up to its nearest nullable
parent). So a root field without a resolver answers what its type calls
empty (``empty``): ``[]`` for a list, null where null is allowed, ``false``,
``0`` or ``""`` for a non-null scalar, the first value of a non-null enum,
and for a non-null object an object whose own fields answer empty in turn.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from graphql import (
    GraphQLEnumType,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLOutputType,
    GraphQLResolveInfo,
    GraphQLScalarType,
    GraphQLSchema,
    default_field_resolver,
)

Resolver = Callable[..., Any]
"""``resolver(context, **arguments)``: the node's ``QueryContext`` (what
resolvers read) and the field's arguments by their names in the schema, an
argument the client left out absent; returns the field's value as graphql-core
takes it (dicts or objects for object types, an enum value's name)."""

_EMPTY_SCALARS: dict[str, object] = {
    "Boolean": False,
    "Int": 0,
    "Long": 0,
    "Float": 0.0,
    "String": "",
    "ID": "",
}


class _Empty:
    """A non-null object with nothing in it: each of its fields answers empty."""

    def __repr__(self) -> str:
        return "EMPTY"


EMPTY = _Empty()


def empty(type_: GraphQLOutputType) -> object:
    """What ``type_`` calls empty (see the module's docstring)."""
    if not isinstance(type_, GraphQLNonNull):
        return None
    inner = type_.of_type
    if isinstance(inner, GraphQLList):
        return []
    if isinstance(inner, GraphQLScalarType):
        return _EMPTY_SCALARS.get(inner.name, "")
    if isinstance(inner, GraphQLEnumType):
        return next(iter(inner.values.values())).value
    if isinstance(inner, GraphQLObjectType):
        return EMPTY
    raise TypeError(f"no empty answer for {type_}: the schema declares no interfaces or unions")


class Binder:
    """The resolvers of one schema's root fields, by name: ``query(name, fn)``
    and ``mutation(name, fn)`` check that the field exists, so a misspelt name
    fails when the node starts, not when a client asks. ``resolve`` is the
    field resolver queries are executed with."""

    def __init__(self, schema: GraphQLSchema) -> None:
        self.schema = schema
        self._roots: dict[str, dict[str, Resolver]] = {}
        for root in (schema.query_type, schema.mutation_type):
            if root is not None:
                self._roots[root.name] = {}

    def query(self, name: str, resolver: Resolver) -> Binder:
        return self._bind(self.schema.query_type, name, resolver)

    def mutation(self, name: str, resolver: Resolver) -> Binder:
        return self._bind(self.schema.mutation_type, name, resolver)

    def _bind(self, root: GraphQLObjectType | None, name: str, resolver: Resolver) -> Binder:
        if root is None or name not in root.fields:
            raise ValueError(f"the schema has no root field {name!r} to bind a resolver to")
        bound = self._roots[root.name]
        if name in bound:
            raise ValueError(f"{root.name}.{name} has a resolver already")
        bound[name] = resolver
        return self

    def bound(self, root: str) -> frozenset[str]:
        """The names of ``root``'s (``Query``, ``Mutation``) fields that have a resolver."""
        return frozenset(self._roots.get(root, {}))

    def resolve(self, source: Any, info: GraphQLResolveInfo, **arguments: Any) -> Any:
        """graphql-core's ``field_resolver``: a root field's resolver or its
        empty answer; below the root, what the parent holds (empty inside an
        empty object)."""
        roots = self._roots.get(info.parent_type.name)
        if roots is not None and info.path.prev is None:
            resolver = roots.get(info.field_name)
            if resolver is None:
                return empty(info.return_type)
            return resolver(info.context, **arguments)
        if source is EMPTY:
            return empty(info.return_type)
        return default_field_resolver(source, info, **arguments)
