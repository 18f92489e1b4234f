"""MQE expressions as trees of frozen dataclasses, one class per construct of
the language. Parentheses leave no node: ``(1 + 2) * 3`` is a ``Binary`` whose
left operand is a ``Binary``. ``str()`` of a node writes it back as MQE, with
parentheses where the grouping needs them; error messages quote it.

Enum members are named after the grammar's terminals (``mqe.lark``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TypeAlias


class BinaryOperator(enum.Enum):
    ADD = "+"
    SUB = "-"
    MUL = "*"
    DIV = "/"
    MOD = "%"


class Comparison(enum.Enum):
    DEQ = "=="
    NEQ = "!="
    LTE = "<="
    LT = "<"
    GTE = ">="
    GT = ">"


class BoolOperator(enum.Enum):
    AND = "&&"
    OR = "||"


class Aggregation(enum.Enum):
    AVG = "avg"
    COUNT = "count"
    LATEST = "latest"
    SUM = "sum"
    MAX = "max"
    MIN = "min"


class MathFunction(enum.Enum):
    ABS = "abs"
    CEIL = "ceil"
    FLOOR = "floor"


class TrendFunction(enum.Enum):
    INCREASE = "increase"
    RATE = "rate"


class LogicalFunction(enum.Enum):
    VIEW_AS_SEQ = "view_as_seq"
    IS_PRESENT = "is_present"


class Order(enum.Enum):
    """The order of a top list: ascending or descending (SkyWalking spells it ``des``)."""

    ASC = "asc"
    DES = "des"


class LabelsAggregation(enum.Enum):
    AVG = "avg"
    SUM = "sum"
    MAX = "max"
    MIN = "min"


class BaselineType(enum.Enum):
    VALUE = "value"
    UPPER = "upper"
    LOWER = "lower"


def quoted(value: str) -> str:
    return f'"{value}"' if "'" in value else f"'{value}'"


@dataclass(frozen=True, slots=True)
class Label:
    """``name='value'``; the value may list several, separated by commas."""

    name: str
    value: str

    def __str__(self) -> str:
        return f"{self.name}={quoted(self.value)}"


@dataclass(frozen=True, slots=True)
class Metric:
    name: str
    labels: tuple[Label, ...] = ()

    def __str__(self) -> str:
        return f"{self.name}{{{','.join(map(str, self.labels))}}}" if self.labels else self.name


@dataclass(frozen=True, slots=True)
class Scalar:
    text: str
    """As written (SkyWalking has no signed or exponent literals)."""

    @property
    def value(self) -> float:
        return float(self.text)

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class Binary:
    op: BinaryOperator
    left: Expression
    right: Expression

    def __str__(self) -> str:
        return _infix(self, self.op.value)


@dataclass(frozen=True, slots=True)
class Compare:
    op: Comparison
    left: Expression
    right: Expression
    bool_modifier: bool = False
    """``a > bool b``: accepted as SkyWalking accepts it, and, as there, it
    changes nothing (a comparison always gives 1 or 0)."""

    def __str__(self) -> str:
        return _infix(self, f"{self.op.value} bool" if self.bool_modifier else self.op.value)


@dataclass(frozen=True, slots=True)
class BoolOp:
    op: BoolOperator
    left: Expression
    right: Expression

    def __str__(self) -> str:
        return _infix(self, self.op.value)


@dataclass(frozen=True, slots=True)
class Aggregate:
    func: Aggregation
    operand: Expression

    def __str__(self) -> str:
        return _call(self.func.value, self.operand)


@dataclass(frozen=True, slots=True)
class Mathematical:
    func: MathFunction
    operand: Expression

    def __str__(self) -> str:
        return _call(self.func.value, self.operand)


@dataclass(frozen=True, slots=True)
class Round:
    operand: Expression
    places: int

    def __str__(self) -> str:
        return _call("round", self.operand, self.places)


@dataclass(frozen=True, slots=True)
class Trend:
    func: TrendFunction
    metric: Metric
    range: int
    """In steps of the query's Duration."""

    def __str__(self) -> str:
        return _call(self.func.value, self.metric, self.range)


@dataclass(frozen=True, slots=True)
class Logical:
    func: LogicalFunction
    operands: tuple[Expression, ...]

    def __str__(self) -> str:
        return _call(self.func.value, *self.operands)


@dataclass(frozen=True, slots=True)
class AttrFilter:
    """``attrN='value'`` or ``attrN!='value'`` in ``top_n``."""

    index: int
    value: str
    equal: bool

    def __str__(self) -> str:
        return f"attr{self.index}{'=' if self.equal else '!='}{quoted(self.value)}"


@dataclass(frozen=True, slots=True)
class TopN:
    metric: Metric
    limit: int
    order: Order
    attributes: tuple[AttrFilter, ...] = ()

    def __str__(self) -> str:
        return _call("top_n", self.metric, self.limit, self.order.value, *self.attributes)


@dataclass(frozen=True, slots=True)
class TopNOf:
    queries: tuple[TopN, ...]
    limit: int
    order: Order

    def __str__(self) -> str:
        return _call("top_n_of", *self.queries, self.limit, self.order.value)


@dataclass(frozen=True, slots=True)
class Relabels:
    operand: Expression
    target: Label
    replacement: Label

    def __str__(self) -> str:
        return _call("relabels", self.operand, self.target, self.replacement)


@dataclass(frozen=True, slots=True)
class AggregateLabels:
    operand: Expression
    func: LabelsAggregation
    by: tuple[str, ...] = ()
    """The labels whose values group the series; none: all series in one."""

    def __str__(self) -> str:
        func = f"{self.func.value}({','.join(self.by)})" if self.by else self.func.value
        return _call("aggregate_labels", self.operand, func)


@dataclass(frozen=True, slots=True)
class SortValues:
    operand: Expression
    limit: int
    order: Order
    aggregation: Aggregation | None
    """None where the expression leaves it out (``sort_values(x, 5, des, )``,
    which SkyWalking's grammar allows): ``avg``."""

    def __str__(self) -> str:
        aggregation = self.aggregation.value if self.aggregation else ""
        return _call("sort_values", self.operand, self.limit, self.order.value, aggregation)


@dataclass(frozen=True, slots=True)
class SortLabelValues:
    operand: Expression
    order: Order
    labels: tuple[str, ...]

    def __str__(self) -> str:
        return _call("sort_label_values", self.operand, self.order.value, *self.labels)


@dataclass(frozen=True, slots=True)
class Baseline:
    metric: Metric
    type: BaselineType

    def __str__(self) -> str:
        return _call("baseline", self.metric, self.type.value)


Expression: TypeAlias = (
    Metric | Scalar | Binary | Compare | BoolOp | Aggregate | Mathematical | Round | Trend | Logical | TopN
    | TopNOf | Relabels | AggregateLabels | SortValues | SortLabelValues | Baseline
)  # fmt: skip

_MULTIPLICATIVE = frozenset({BinaryOperator.MUL, BinaryOperator.DIV, BinaryOperator.MOD})


def _level(node: Expression) -> int:
    """How tightly ``node`` binds as an operand: 1 for && ||, 2 for a
    comparison, 3 for + -, 4 for * / %, 5 for anything else."""
    if isinstance(node, BoolOp):
        return 1
    if isinstance(node, Compare):
        return 2
    if isinstance(node, Binary):
        return 4 if node.op in _MULTIPLICATIVE else 3
    return 5


def _infix(node: Binary | Compare | BoolOp, op: str) -> str:
    level = _level(node)
    left = f"({node.left})" if _level(node.left) < level else str(node.left)
    # Operators group from the left: a right operand of the same level needs parentheses.
    right = f"({node.right})" if _level(node.right) <= level else str(node.right)
    return f"{left} {op} {right}"


def _call(name: str, *args: object) -> str:
    return f"{name}({', '.join(map(str, args))})"
