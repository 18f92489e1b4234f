"""What a closure of a rule does to a sample's tags: ``tag({tags -> ...})``
changes them, ``filter({tags -> ...})`` and a rule file's ``filter`` keep
the samples whose tags make it true.

The closures are Groovy in SkyWalking; here they are the small language
``mal.lark`` reads, evaluated as Groovy would for the rules SkyWalking
ships: a missing tag is null, ``+`` joins text (``'a' + null`` is
``'anull'``), and Groovy's truth holds (null, '', 0 and [] are false). No
loop can be written, so a closure's work is bounded by its length."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

from skyoap.mal import syntax as s
from skyoap.mal.parser import MALError

_STRING_METHODS: Mapping[str, Callable[..., Any]] = {
    "startsWith": lambda t, p: t.startswith(p),
    "endsWith": lambda t, p: t.endswith(p),
    "contains": lambda t, p: p in t,
    "equals": lambda t, o: t == o,
    "matches": lambda t, p: re.fullmatch(p, t) is not None,
    "split": lambda t, p: re.split(p, t),
    "substring": lambda t, a, b=None: t[int(a) : None if b is None else int(b)],
    "replace": lambda t, a, b: t.replace(a, b),
    "replaceAll": lambda t, p, r: re.sub(p, r, t),
    "toLowerCase": lambda t: t.lower(),
    "toUpperCase": lambda t: t.upper(),
    "trim": lambda t: t.strip(),
    "length": len,
    "size": len,
    "isEmpty": lambda t: not t,
    "indexOf": lambda t, p: t.find(p),
    "toString": str,
}
"""What a closure may ask of a string (Java's names)."""

_TAG_METHODS = frozenset({"remove", "get", "containsKey", "put", "isEmpty", "size"})
"""What a closure may ask of the tags (a Java map's names)."""


class _Returned(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


def check(closure: s.Closure) -> None:
    """MALError if ``closure`` names what it cannot have: a parameter it does
    not take, a method no string or map of tags has."""
    names = set(closure.params)

    def value(v: s.Value) -> None:
        match v:
            case s.Name(name) if name not in names:
                raise MALError(f"the closure names {name!r}, which is none of its parameters {sorted(names)}")
            case s.Call(target, name, args):
                value(target)
                if name not in _STRING_METHODS and name not in _TAG_METHODS:
                    raise MALError(f"the closure calls .{name}(), which no string or map of tags has here")
                for a in args:
                    value(a)
            case s.Field(target) | s.Not(target):
                value(target)
            case s.Index(a, b) | s.Compare(_, a, b) | s.Concat(a, b) | s.Logic(_, a, b) | s.Elvis(a, b):
                value(a)
                value(b)
            case s.Ternary(a, b, c):
                for x in (a, b, c):
                    value(x)
            case s.ListOf(items):
                for x in items:
                    value(x)

    def statements(body: tuple[s.Statement, ...]) -> None:
        for statement in body:
            match statement:
                case s.Assign(target, v):
                    value(target)
                    value(v)
                case s.If(test, then, otherwise):
                    value(test)
                    statements(then)
                    statements(otherwise)
                case s.Return(v) if v is not None:
                    value(v)
                case s.Evaluate(v):
                    value(v)

    statements(closure.body)


def run(closure: s.Closure, *args: Any) -> Any:
    """What ``closure`` gives for ``args`` (its parameters in order): the
    value it returns, or that of its last statement, as Groovy's closures."""
    scope = dict(zip(closure.params, args, strict=False))
    try:
        return _statements(closure.body, scope)
    except _Returned as done:
        return done.value


def _statements(body: tuple[s.Statement, ...], scope: Mapping[str, Any]) -> Any:
    last = None
    for statement in body:
        match statement:
            case s.Assign(target, value):
                _assign(target, _value(value, scope), scope)
                last = None
            case s.If(test, then, otherwise):
                last = _statements(then if _truth(_value(test, scope)) else otherwise, scope)
            case s.Return(value):
                raise _Returned(None if value is None else _value(value, scope))
            case s.Evaluate(value):
                last = _value(value, scope)
    return last


def _assign(target: s.Field | s.Index, value: Any, scope: Mapping[str, Any]) -> None:
    tags = _value(target.target, scope)
    key = target.name if isinstance(target, s.Field) else _text(_value(target.key, scope))
    if not isinstance(tags, MutableMapping):
        raise MALError(f"the closure sets {key!r} of what is not the tags")
    if value is None:
        tags.pop(key, None)
    else:
        tags[key] = _text(value)


def _value(v: s.Value, scope: Mapping[str, Any]) -> Any:
    match v:
        case s.Literal(value):
            return value
        case s.Name(name):
            return scope[name]
        case s.Field(target, name):
            return _get(_value(target, scope), name)
        case s.Index(target, key):
            return _get(_value(target, scope), _value(key, scope))
        case s.Call(target, name, args):
            return _call(_value(target, scope), name, [_value(a, scope) for a in args])
        case s.ListOf(items):
            return [_value(i, scope) for i in items]
        case s.Compare(op, left, right):
            return _compare(op, _value(left, scope), _value(right, scope))
        case s.Concat(left, right):
            return _plus(_value(left, scope), _value(right, scope))
        case s.Logic(both, left, right):
            first = _truth(_value(left, scope))
            if first != both:  # false && …, true || …
                return first
            return _truth(_value(right, scope))
        case s.Not(operand):
            return not _truth(_value(operand, scope))
        case s.Ternary(test, then, otherwise):
            return _value(then if _truth(_value(test, scope)) else otherwise, scope)
        case s.Elvis(value, fallback):
            found = _value(value, scope)
            return found if _truth(found) else _value(fallback, scope)
    raise AssertionError(v)


def _get(target: Any, key: Any) -> Any:
    if isinstance(target, Mapping):
        return target.get(_text(key))
    if isinstance(target, (list, str)) and isinstance(key, float | int):
        i = int(key)
        return target[i] if -len(target) <= i < len(target) else None
    return None  # null.x is null, as with Groovy's ?.


def _call(target: Any, name: str, args: list[Any]) -> Any:
    if isinstance(target, MutableMapping):
        match name, args:
            case "remove", [key]:
                return target.pop(_text(key), None)
            case "get", [key]:
                return target.get(_text(key))
            case "containsKey", [key]:
                return _text(key) in target
            case "put", [key, value]:
                _assign(s.Index(s.Name("t"), s.Literal(_text(key))), value, {"t": target})
                return None
            case "isEmpty", []:
                return not target
            case "size", []:
                return len(target)
    elif isinstance(target, str) and name in _STRING_METHODS:
        try:
            return _STRING_METHODS[name](target, *args)
        except (TypeError, ValueError, re.error) as e:
            raise MALError(f"{target!r}.{name}({', '.join(map(repr, args))}): {e}") from None
    elif target is None:
        return None
    raise MALError(f".{name}({', '.join(map(repr, args))}) of {target!r}: no such method")


def _compare(op: s.Comparison, left: Any, right: Any) -> bool:
    if op is s.Comparison.IN:
        return isinstance(right, list | str | Mapping) and left in right
    if op is s.Comparison.EQ:
        return bool(left == right)
    if op is s.Comparison.NE:
        return bool(left != right)
    if left is None or right is None:
        return False
    try:
        return bool(
            {
                s.Comparison.LT: left < right,
                s.Comparison.LE: left <= right,
                s.Comparison.GT: left > right,
                s.Comparison.GE: left >= right,
            }[op]
        )
    except TypeError:
        raise MALError(f"{left!r} {op.value} {right!r}: the two do not compare") from None


def _plus(left: Any, right: Any) -> Any:
    if isinstance(left, int | float) and isinstance(right, int | float) and not isinstance(left, bool):
        return left + right
    if isinstance(left, list):
        return [*left, *(right if isinstance(right, list) else [right])]
    return _text(left) + _text(right)


def _text(value: Any) -> str:
    """Groovy's text of a value: 'null' for null, '2' for the number 2.0."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _truth(value: Any) -> bool:
    return bool(value)
