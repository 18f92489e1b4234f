"""Completing what resolvers answer by a plan made once per selection.

graphql-core completes every field of every object a resolver answers the
same generic way: a resolve info built, the default resolver called, the
field's type looked at, each list item and object taken apart through
several calls. For an answer of many small objects (SkyWalking's UI asks
hundreds of ``execExpression`` at once) that costs more than working the
answers out. Below a root field, every field of skyoap's schema is read from
its parent the way the default resolver reads it (a mapping's key, or an
attribute), so a selection with no arguments, directives or fragments
completes the same way every time: a ``Plan`` is made of it once, kept by its
text, and completes an answer by walking it.

Where an answer holds what the plan does not complete (an error, a null
where the schema forbids one, a value a scalar refuses, a callable to call,
an empty object of ``binder.py``), the plan gives up (``GiveUp``) and
graphql-core completes that value, reporting what is wrong exactly as it
always has.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from graphql import (
    GraphQLBoolean,
    GraphQLEnumType,
    GraphQLID,
    GraphQLLeafType,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLOutputType,
    GraphQLString,
    Undefined,
    is_leaf_type,
)
from graphql.execution.collect_fields import FieldDetailsList


class Guard(Protocol):
    """What the executor checks as objects are completed (its deadline, the
    size of the answer), as it checks them when it completes one itself."""

    def entering(self) -> None:
        """Before an object's fields are read."""

    def completed(self, fields: dict[str, Any]) -> None:
        """Once they are (its children first)."""


Complete = Callable[[Any, Guard], Any]
"""Completes one value of a field's type; raises GiveUp where graphql-core must."""


class GiveUp(Exception):
    """A value a plan does not complete: graphql-core's executor completes it."""


_AS_IS: dict[GraphQLLeafType, type] = {GraphQLString: str, GraphQLID: str, GraphQLBoolean: bool}
"""Scalars that send a value of this Python type unchanged."""


@dataclass(frozen=True, slots=True)
class Plan:
    """How to complete an object of a selection: each response key with the
    field it reads and how to complete the field's value."""

    fields: tuple[tuple[str, str, Complete], ...]

    def complete(self, source: Any, guard: Guard) -> dict[str, Any]:
        if isinstance(source, Exception):
            raise GiveUp
        guard.entering()
        mapping = isinstance(source, Mapping)
        done: dict[str, Any] = {}
        try:
            for key, name, complete in self.fields:
                value = source.get(name) if mapping else getattr(source, name, None)
                if callable(value):
                    raise GiveUp
                done[key] = complete(value, guard)
        except GiveUp:
            raise
        except Exception:  # a property that failed: a field error graphql-core reports
            raise GiveUp from None
        guard.completed(done)
        return done


def selection_text(fields: FieldDetailsList) -> str | None:
    """The text of ``fields``' selections, which a plan of them is kept by;
    None for selections their text cannot stand for (with directives or
    fragments, whose fields depend on variables or on the rest of the
    document)."""
    texts = []
    for details in fields:
        selection = details.node.selection_set
        loc = selection.loc if selection is not None else None
        if loc is None or details.defer_usage is not None:
            return None
        text = loc.source.body[loc.start : loc.end]
        if "@" in text or "..." in text:
            return None
        texts.append(text)
    return "\0".join(texts)


def typename(name: str) -> Complete:
    return lambda _value, _guard: name


def non_null(inner: Complete) -> Complete:
    def complete(value: Any, guard: Guard) -> Any:
        done = inner(value, guard)
        if done is None:
            raise GiveUp
        return done

    return complete


def list_of(item: Complete) -> Complete:
    def complete(value: Any, guard: Guard) -> Any:
        if value is None:
            return None
        if value.__class__ is not list and value.__class__ is not tuple:
            raise GiveUp
        return [item(v, guard) for v in value]

    return complete


def leaf(type_: GraphQLLeafType) -> Complete:
    coerce = type_.coerce_output_value
    as_is = _AS_IS.get(type_)
    names: dict[str, Any] | None = {} if isinstance(type_, GraphQLEnumType) else None
    """An enum's names by the values they were sent for (as many as it has)."""

    def complete(value: Any, _guard: Guard) -> Any:
        if value is None:
            return None
        if value.__class__ is as_is:
            return value
        if names is not None and value.__class__ is str and value in names:
            return names[value]
        try:
            done = coerce(value)
        except Exception:
            raise GiveUp from None
        if done is None or done is Undefined:
            raise GiveUp
        if names is not None and value.__class__ is str:
            names[value] = done
        return done

    return complete


def object_of(plan: Plan) -> Complete:
    def complete(value: Any, guard: Guard) -> Any:
        return None if value is None else plan.complete(value, guard)

    return complete


def completer(
    type_: GraphQLOutputType, plan_of: Callable[[GraphQLObjectType], Plan | None]
) -> Complete | None:
    """How to complete a value of ``type_``, whose objects ``plan_of`` plans;
    None for a type a plan does not complete (interfaces, unions, objects
    that check their values' types)."""
    if isinstance(type_, GraphQLNonNull):
        inner = completer(type_.of_type, plan_of)
        return None if inner is None else non_null(inner)
    if isinstance(type_, GraphQLList):
        item = completer(type_.of_type, plan_of)
        return None if item is None else list_of(item)
    if is_leaf_type(type_):
        return leaf(type_)
    if isinstance(type_, GraphQLObjectType) and type_.is_type_of is None:
        plan = plan_of(type_)
        return None if plan is None else object_of(plan)
    return None
