"""Reads MAL text into a ``syntax`` tree, with lark and the grammar in
``mal.lark``."""

from __future__ import annotations

import functools
import importlib.resources
from typing import Any

from lark import Lark, Token, Transformer, UnexpectedInput, UnexpectedToken, v_args
from lark.exceptions import VisitError

from skyoap.mal import syntax as s

MAX_CHARS = 16_384
"""The longest expression read (a prefix, the rule and a suffix together);
SkyWalking's own rules are below a thousand characters."""


class MALError(ValueError):
    """A rule this node does not evaluate; the message says why."""


def parse(expression: str) -> s.Expression:
    """The tree of ``expression``; MALError if it is not MAL as this node reads it."""
    if len(expression) > MAX_CHARS:
        raise MALError(f"the expression has {len(expression)} characters, more than the {MAX_CHARS} read")
    try:
        tree = _parser().parse(expression)
    except UnexpectedInput as e:
        raise MALError(_syntax_error(expression, e)) from None
    except RecursionError:
        raise MALError("the expression nests too deeply to be read") from None
    try:
        result: s.Expression = _ToSyntax().transform(tree)
    except VisitError as e:
        if isinstance(e.orig_exc, MALError):
            raise e.orig_exc from None
        raise
    return result


@functools.cache
def _parser() -> Lark:
    grammar = importlib.resources.files(__package__).joinpath("mal.lark").read_text(encoding="utf-8")
    return Lark(grammar, parser="lalr", lexer="contextual", maybe_placeholders=True)


def _syntax_error(expression: str, e: UnexpectedInput) -> str:
    at_end = isinstance(e, UnexpectedToken) and e.token.type == "$END"
    # lark places the end where the last token starts; it is after the whole text.
    offset = len(expression) if at_end or e.pos_in_stream is None else e.pos_in_stream
    before = expression[:offset]
    line, column = before.count("\n") + 1, offset - (before.rfind("\n") + 1) + 1
    if offset < len(expression):
        found = expression[offset : offset + 20]
        return f"syntax error at line {line}, column {column}: {found!r} is not MAL here"
    return f"syntax error at line {line}, column {column}: the expression ends where MAL expects more"


def _unquoted(token: Token) -> str:
    """A Groovy string literal's text: its quotes off, ``\\'`` and the like read."""
    body = token[1:-1]
    if "\\" not in body:
        return body
    out, escaped = [], False
    for ch in body:
        if escaped:
            out.append({"n": "\n", "t": "\t"}.get(ch, ch))
            escaped = False
        elif ch == "\\":
            escaped = True
        else:
            out.append(ch)
    return "".join(out)


def _number(token: Token) -> float:
    return float(token)


_OPERATORS = {"ADD": s.Operator.ADD, "SUB": s.Operator.SUB, "MUL": s.Operator.MUL, "DIV": s.Operator.DIV}
_COMPARISONS = {c.value: c for c in s.Comparison}


@v_args(inline=True)
class _ToSyntax(Transformer[Token, Any]):
    """Turns lark's parse tree into ``syntax`` nodes, one method per rule or alias."""

    # The expression

    def number(self, token: Token) -> s.Number:
        return s.Number(_number(token))

    def family(self, name: Token) -> s.Family:
        return s.Family(str(name))

    def binary(self, left: s.Expression, op: Token, right: s.Expression) -> s.Binary:
        return s.Binary(_OPERATORS[op.type], left, right)

    def negate(self, _: Token, operand: s.Expression) -> s.Negate:
        return s.Negate(operand)

    def method(self, target: s.Expression, name: Token, args: tuple[s.Argument, ...] | None) -> s.Method:
        return s.Method(target, str(name), args or ())

    def function(self, name: Token, args: tuple[s.Argument, ...] | None) -> s.Function:
        return s.Function(str(name), args or ())

    def constant(self, target: s.Expression, name: Token) -> s.Constant:
        if not isinstance(target, s.Family):
            raise MALError(f"'.{name}' follows what is no type: a constant is written Layer.NAME")
        return s.Constant(target.name, str(name))

    @v_args(inline=False)
    def arguments(self, args: list[s.Argument]) -> tuple[s.Argument, ...]:
        return tuple(args)

    def string(self, token: Token) -> s.Text:
        return s.Text(_unquoted(token))

    @v_args(inline=False)
    def listing(self, items: list[Any]) -> s.Items | s.ListOf:
        found = [i for i in items if i is not None]
        if all(isinstance(i, (s.Text, s.Number)) for i in found):
            return s.Items(tuple(i.value for i in found))
        return s.ListOf(tuple(_value(i) for i in found))

    def named(self, name: Token, value: s.Argument) -> s.Named:
        return s.Named(str(name), value)

    def closure(self, params: tuple[str, ...], body: tuple[s.Statement, ...]) -> s.Closure:
        return s.Closure(params, body)

    @v_args(inline=False)
    def params(self, names: list[Token]) -> tuple[str, ...]:
        return tuple(str(n) for n in names)

    # The closures

    @v_args(inline=False)
    def statements(self, statements: list[s.Statement]) -> tuple[s.Statement, ...]:
        return tuple(statements)

    def assign(self, target: Any, value: Any) -> s.Assign:
        if not isinstance(target, (s.Field, s.Index)):
            raise MALError("only a tag is assigned in a closure: tags.name = ... or tags['name'] = ...")
        return s.Assign(target, _value(value))

    def if_(
        self, _: Token, test: Any, then: tuple[s.Statement, ...], __: Token | None, otherwise: Any
    ) -> s.If:
        if isinstance(otherwise, s.If):
            otherwise = (otherwise,)
        return s.If(_value(test), then, otherwise or ())

    def block(self, statements: tuple[s.Statement, ...]) -> tuple[s.Statement, ...]:
        return statements

    def return_(self, _: Token, value: Any) -> s.Return:
        return s.Return(None if value is None else _value(value))

    def evaluate(self, value: Any) -> s.Evaluate:
        return s.Evaluate(_value(value))

    def ternary(self, test: Any, then: Any, otherwise: Any) -> s.Ternary:
        return s.Ternary(_value(test), _value(then), _value(otherwise))

    def elvis(self, value: Any, fallback: Any) -> s.Elvis:
        return s.Elvis(_value(value), _value(fallback))

    def logic(self, left: Any, op: Token, right: Any) -> s.Logic:
        return s.Logic(op.type == "AND", _value(left), _value(right))

    def not_(self, _: Token, operand: Any) -> s.Not:
        return s.Not(_value(operand))

    def compare(self, left: Any, op: Token, right: Any) -> s.Compare:
        return s.Compare(_COMPARISONS[str(op)], _value(left), _value(right))

    def concat(self, left: Any, _: Token, right: Any) -> s.Concat:
        return s.Concat(_value(left), _value(right))

    def call(self, target: Any, name: Token, args: tuple[s.Value, ...] | None) -> s.Call:
        return s.Call(_value(target), str(name), args or ())

    def field(self, target: Any, name: Token) -> s.Field:
        return s.Field(_value(target), str(name))

    def index(self, target: Any, key: Any) -> s.Index:
        return s.Index(_value(target), _value(key))

    def text(self, token: Token) -> s.Literal:
        return s.Literal(_unquoted(token))

    def true(self, _: Token) -> s.Literal:
        return s.Literal(True)

    def false(self, _: Token) -> s.Literal:
        return s.Literal(False)

    def null(self, _: Token) -> s.Literal:
        return s.Literal(None)

    def name(self, token: Token) -> s.Name:
        return s.Name(str(token))

    @v_args(inline=False)
    def values(self, values: list[Any]) -> tuple[s.Value, ...]:
        return tuple(_value(v) for v in values)


def _value(node: Any) -> s.Value:
    """A closure's value: the expression rules shared with MAL (numbers, strings,
    lists of them) read as the closures' literals."""
    if isinstance(node, s.Number):
        return s.Literal(node.value)
    if isinstance(node, s.Text):
        return s.Literal(node.value)
    if isinstance(node, s.Items):
        return s.ListOf(tuple(s.Literal(v) for v in node.values))
    return node
