"""Reads MQE text into a ``syntax`` tree, with lark and the grammar in ``mqe.lark``."""

from __future__ import annotations

import functools
import importlib.resources
from typing import Any

from lark import Lark, Token, Transformer, UnexpectedCharacters, UnexpectedInput, UnexpectedToken, v_args
from lark.exceptions import VisitError

from skyoap.mqe import syntax as s
from skyoap.runtime.cache import TextCache

MAX_INTEGER = 2**31 - 1
"""The largest count (of a ``top_n``, of places to round to, …) SkyWalking takes."""


MAX_CHARS = 4096
"""The longest expression read. SkyWalking's UI templates write none longer
than a few hundred characters; what it bounds is the time and memory one
request's parse takes."""
MAX_METRICS = 32
"""The most metrics one expression may name: each is a read of storage."""
CACHED_CHARS = 256 * 1024
"""How much expression text the parsed trees kept stand for (a tree holds
some hundred bytes per character of its text: about 26 MB at most)."""


class MQEError(ValueError):
    """An expression this node does not evaluate; the message says why."""


class MQESyntaxError(MQEError):
    """An expression that is not MQE. The message says where (line, column,
    and offset, all counted from 1 but the offset from 0) and what was expected."""

    def __init__(self, message: str, line: int, column: int, offset: int) -> None:
        super().__init__(f"syntax error at line {line}, column {column} (offset {offset}): {message}")
        self.line, self.column, self.offset = line, column, offset


_parsed: TextCache[s.Expression] = TextCache(CACHED_CHARS)


def parse(expression: str) -> s.Expression:
    """The tree of ``expression``; MQESyntaxError if it is not MQE, MQEError
    if it is past the bounds above. Trees are immutable, so the UI's
    expressions, asked again and again, are parsed once."""
    tree = _parsed.get(expression)
    if tree is None:
        tree = _parse(expression)
        _parsed.put(expression, tree)
    return tree


def _parse(expression: str) -> s.Expression:
    if len(expression) > MAX_CHARS:
        raise MQEError(
            f"the expression has {len(expression)} characters, more than the {MAX_CHARS} this node reads"
        )
    try:
        tree = _parser().parse(expression)
    except UnexpectedInput as e:
        raise _syntax_error(expression, e) from None
    except RecursionError:
        raise MQEError("the expression nests too deeply to be read") from None
    try:
        result: s.Expression = _ToSyntax().transform(tree)
    except VisitError as e:
        if isinstance(e.orig_exc, MQEError):
            raise e.orig_exc from None
        raise
    except RecursionError:
        raise MQEError("the expression nests too deeply to be read") from None
    return result


@functools.cache
def _parser() -> Lark:
    grammar = importlib.resources.files(__package__).joinpath("mqe.lark").read_text(encoding="utf-8")
    # The basic lexer reads a word the same wherever it stands, as SkyWalking's
    # lexer does: `value` is a keyword even where only a label name could go.
    return Lark(grammar, parser="lalr", lexer="basic", maybe_placeholders=True)


_NAMES = {
    "$END": "the end of the expression",
    "NAME": "a name",
    "INTEGER": "a whole number",
    "DECIMAL": "a decimal number",
    "VALUE_STRING": "a quoted value",
}


def _describe(terminal: str) -> str:
    if terminal in _NAMES:
        return _NAMES[terminal]
    pattern = _parser().get_terminal(terminal).pattern
    return repr(pattern.value)


def _expected(terminals: set[str]) -> str:
    names = sorted(_describe(t) for t in terminals)
    return names[0] if len(names) == 1 else "one of " + ", ".join(names)


def _syntax_error(expression: str, e: UnexpectedInput) -> MQESyntaxError:
    at_end = isinstance(e, UnexpectedToken) and e.token.type == "$END"
    # lark places the end where the last token starts; it is after the whole text.
    offset = len(expression) if at_end or e.pos_in_stream is None else e.pos_in_stream
    if isinstance(e, UnexpectedCharacters):
        found = f"the character {expression[offset]!r}"
        expected = _accepted_before(expression, offset)
    elif isinstance(e, UnexpectedToken):
        found = "the end of the expression" if at_end else repr(e.token.value)
        # The parser's own list can hold what a merged LALR state takes in
        # other contexts; trying each terminal gives what really fits here.
        expected = set(e.interactive_parser.accepts())
    else:  # lark raises UnexpectedEOF only for parsers other than LALR
        found, expected = "the end of the expression", set()
    return MQESyntaxError(f"{found} where MQE expects {_expected(expected)}", *_where(expression, offset))


def _accepted_before(expression: str, offset: int) -> set[str]:
    """What the parser would take after the text before ``offset`` (the lexer
    alone, failing on a character, cannot tell)."""
    interactive = _parser().parse_interactive(expression[:offset])
    interactive.exhaust_lexer()
    return set(interactive.accepts())


def _where(expression: str, offset: int) -> tuple[int, int, int]:
    before = expression[:offset]
    line = before.count("\n") + 1
    return line, offset - (before.rfind("\n") + 1) + 1, offset


def _integer(token: Token) -> int:
    if len(token) > 10 or int(token) > MAX_INTEGER:
        raise MQESyntaxError(
            f"the number {token[:20]} is too large: at most {MAX_INTEGER}",
            token.line or 1,
            token.column or 1,
            token.start_pos or 0,
        )
    return int(token)


def _unquoted(token: Token) -> str:
    return token[1:-1]


@v_args(inline=True)
class _ToSyntax(Transformer[Token, s.Expression]):
    """Turns lark's parse tree into ``syntax`` nodes, one method per rule or alias."""

    def __init__(self) -> None:
        super().__init__()
        self._metrics = 0

    # Rules with several children take them all (inline=False).
    @v_args(inline=False)
    def metric(self, children: list[Any]) -> s.Metric:
        name, *labels = children
        self._metrics += 1
        if self._metrics > MAX_METRICS:
            raise MQEError(f"the expression names more than {MAX_METRICS} metrics, more than this node reads")
        return s.Metric(str(name), tuple(label for label in labels if label is not None))

    def label(self, name: str, value: Token) -> s.Label:
        return s.Label(name, _unquoted(value))

    def label_name(self, name: Token) -> str:
        return str(name)

    @v_args(inline=False)
    def label_names(self, names: list[str]) -> tuple[str, ...]:
        return tuple(names)

    def aggregation(self, token: Token) -> s.Aggregation:
        return s.Aggregation[token.type]

    def order(self, token: Token) -> s.Order:
        return s.Order[token.type]

    def scalar(self, token: Token) -> s.Scalar:
        return s.Scalar(str(token))

    def binary_op(self, left: s.Expression, op: Token, right: s.Expression) -> s.Binary:
        return s.Binary(s.BinaryOperator[op.type], left, right)

    def compare_op(
        self, left: s.Expression, op: Token, modifier: Token | None, right: s.Expression
    ) -> s.Compare:
        return s.Compare(s.Comparison[op.type], left, right, modifier is not None)

    def bool_op(self, left: s.Expression, op: Token, right: s.Expression) -> s.BoolOp:
        return s.BoolOp(s.BoolOperator[op.type], left, right)

    def aggregate(self, func: s.Aggregation, operand: s.Expression) -> s.Aggregate:
        return s.Aggregate(func, operand)

    def mathematical(self, func: Token, operand: s.Expression) -> s.Mathematical:
        return s.Mathematical(s.MathFunction[func.type], operand)

    def round(self, _: Token, operand: s.Expression, places: Token) -> s.Round:
        return s.Round(operand, _integer(places))

    def trend(self, func: Token, metric: s.Metric, steps: Token) -> s.Trend:
        return s.Trend(s.TrendFunction[func.type], metric, _integer(steps))

    def logical(self, func: Token, *operands: s.Expression) -> s.Logical:
        return s.Logical(s.LogicalFunction[func.type], operands)

    def attribute(self, attr: Token, op: Token, value: Token) -> s.AttrFilter:
        return s.AttrFilter(int(attr.type[-1]), _unquoted(value), op.type == "EQ")

    def top_n(self, _: Token, metric: s.Metric, limit: Token, order: s.Order, *attrs: s.AttrFilter) -> s.TopN:
        return s.TopN(metric, _integer(limit), order, attrs)

    def top_n_of(self, _: Token, *args: Any) -> s.TopNOf:
        *queries, limit, order = args
        return s.TopNOf(tuple(queries), _integer(limit), order)

    def relabels(self, _: Token, operand: s.Expression, target: s.Label, replacement: s.Label) -> s.Relabels:
        return s.Relabels(operand, target, replacement)

    def aggregate_labels(
        self, _: Token, operand: s.Expression, func: Token, by: tuple[str, ...] | None
    ) -> s.AggregateLabels:
        return s.AggregateLabels(operand, s.LabelsAggregation[func.type], by or ())

    def sort_values(
        self, _: Token, operand: s.Expression, limit: Token, order: s.Order, aggregation: s.Aggregation | None
    ) -> s.SortValues:
        return s.SortValues(operand, _integer(limit), order, aggregation)

    def sort_label_values(
        self, _: Token, operand: s.Expression, order: s.Order, labels: tuple[str, ...]
    ) -> s.SortLabelValues:
        return s.SortLabelValues(operand, order, labels)

    def baseline(self, _: Token, metric: s.Metric, kind: Token) -> s.Baseline:
        return s.Baseline(metric, s.BaselineType[kind.type])
