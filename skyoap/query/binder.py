"""Resolvers bound to the schema's root fields by name; an error for every
field that has none.

A root field asked many times in one request (aliased: SkyWalking's UI asks
a list's metrics as an ``execExpression`` per entity and column) can be
bound to a resolver of all of them at once (``query_batch``), so that what
they read is read once for all. The query's execution (``execution.py``)
calls it before the root fields are resolved, and hands its ``Answers`` to
``resolve`` as the root value; without them (graphql-core's own execution),
each field is resolved alone.

A root field is answered truthfully or not at all: one of a kind of thing
skyoap keeps none of (processes, browser services, eBPF tasks) is bound to
``none``, and answers what its type calls empty (``empty``): ``[]`` for a
list, null where null is allowed, ``false``, ``0`` or ``""`` for a non-null
scalar, the first value of a non-null enum, and for a non-null object an
object whose own fields answer empty in turn. Any other field without a
resolver answers an error saying skyoap does not serve it, and why
(``refuse``), never a made-up zero.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from graphql import (
    GraphQLEnumType,
    GraphQLField,
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

BatchResolver = Callable[[Any, list[dict[str, Any]]], list[Any]]
"""``resolver(context, asked)``: the values of a root field asked with each
of ``asked``'s arguments (as a ``Resolver`` takes them), in their order; an
exception among them fails its field alone (graphql-core raises a value that
is one), one raised fails them all."""


class Answers(dict[str | int, Any]):
    """What a request's batch resolvers answered, by the response key of
    each field: the root value ``Binder.resolve`` takes answers from."""


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


class NotServed(Exception):
    """A root field this node does not answer; the message says why."""


class Binder:
    """The resolvers of one schema's root fields, by name: ``query(name, fn)``
    and ``mutation(name, fn)`` check that the field exists, so a misspelt name
    fails when the node starts, not when a client asks. ``resolve`` is the
    field resolver queries are executed with."""

    def __init__(self, schema: GraphQLSchema) -> None:
        self.schema = schema
        self._roots: dict[str, dict[str, Resolver]] = {}
        self._batches: dict[str, dict[str, BatchResolver]] = {}
        self._reasons: dict[str, str] = {}
        for root in (schema.query_type, schema.mutation_type):
            if root is not None:
                self._roots[root.name], self._batches[root.name] = {}, {}

    def query(self, name: str, resolver: Resolver) -> Binder:
        return self._bind(self.schema.query_type, name, resolver)

    def query_batch(self, name: str, resolver: BatchResolver) -> Binder:
        """Binds the query ``name`` to a resolver of all its fields of a
        request at once (see the module's docstring)."""
        self._bind(
            self.schema.query_type, name, lambda context, **arguments: resolver(context, [arguments])[0]
        )
        assert self.schema.query_type is not None  # or _bind would have refused
        self._batches[self.schema.query_type.name][name] = resolver
        return self

    def mutation(self, name: str, resolver: Resolver) -> Binder:
        return self._bind(self.schema.mutation_type, name, resolver)

    def none(self, name: str, why: str) -> Binder:
        """Binds the query ``name`` to its empty answer: ``why`` says why
        skyoap has none of what it lists (the reference pages quote it)."""
        type_ = self._field(self.schema.query_type, name).type
        self._reasons[name] = why
        return self._bind(self.schema.query_type, name, lambda context, **arguments: empty(type_))

    def refuse(self, name: str, why: str, mutation: bool = False) -> Binder:
        """Binds ``name`` to an error: skyoap does not serve it, for ``why``."""
        message = f"skyoap does not serve {name}: {why}"

        def refused(context: Any, **arguments: Any) -> Any:
            raise NotServed(message)

        self._reasons[name] = why
        return self._bind(self.schema.mutation_type if mutation else self.schema.query_type, name, refused)

    def reasons(self) -> Mapping[str, str]:
        """Why each field bound to ``none`` or ``refuse`` is, by its name."""
        return self._reasons

    @staticmethod
    def _field(root: GraphQLObjectType | None, name: str) -> GraphQLField:
        if root is None or name not in root.fields:
            raise ValueError(f"the schema has no root field {name!r} to bind a resolver to")
        return root.fields[name]

    def _bind(self, root: GraphQLObjectType | None, name: str, resolver: Resolver) -> Binder:
        self._field(root, name)
        assert root is not None
        bound = self._roots[root.name]
        if name in bound:
            raise ValueError(f"{root.name}.{name} has a resolver already")
        bound[name] = resolver
        return self

    def batches(self, root: str) -> Mapping[str, BatchResolver]:
        """The batch resolvers of ``root``'s fields, by name."""
        return self._batches.get(root, {})

    def bound(self, root: str) -> frozenset[str]:
        """The names of ``root``'s (``Query``, ``Mutation``) fields that have a resolver."""
        return frozenset(self._roots.get(root, {}))

    def resolve(self, source: Any, info: GraphQLResolveInfo, **arguments: Any) -> Any:
        """graphql-core's ``field_resolver``: a root field's resolver (an error
        if it has none); below the root, what the parent holds (empty inside
        an empty object)."""
        roots = self._roots.get(info.parent_type.name)
        if roots is not None and info.path.prev is None:
            if isinstance(source, Answers) and info.path.key in source:
                return source[info.path.key]  # an exception fails the field, as one raised does
            resolver = roots.get(info.field_name)
            if resolver is None:
                raise NotServed(f"skyoap does not serve {info.field_name}")
            return resolver(info.context, **arguments)
        if source is EMPTY:
            return empty(info.return_type)
        return default_field_resolver(source, info, **arguments)
