"""The tree of a MAL expression and of the closures it holds, as
``parser.py`` reads them: frozen, so a rule's tree is read once and
evaluated for every batch of samples."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Operator(enum.Enum):
    ADD = "+"
    SUB = "-"
    MUL = "*"
    DIV = "/"


@dataclass(frozen=True, slots=True)
class Number:
    value: float


@dataclass(frozen=True, slots=True)
class Family:
    """The samples of a metric, by its name."""

    name: str


@dataclass(frozen=True, slots=True)
class Binary:
    op: Operator
    left: Expression
    right: Expression


@dataclass(frozen=True, slots=True)
class Negate:
    operand: Expression


@dataclass(frozen=True, slots=True)
class Method:
    """``target.name(args)``: a function of a sample family."""

    target: Expression
    name: str
    args: tuple[Argument, ...]


@dataclass(frozen=True, slots=True)
class Function:
    """``name(args)`` standing alone (``time()``)."""

    name: str
    args: tuple[Argument, ...]


@dataclass(frozen=True, slots=True)
class Constant:
    """``Layer.MYSQL``, ``DetectPoint.SERVER``."""

    type: str
    name: str


Expression = Number | Family | Binary | Negate | Method | Function | Constant


@dataclass(frozen=True, slots=True)
class Text:
    value: str


@dataclass(frozen=True, slots=True)
class Items:
    """``['a', 'b']`` or ``[50, 99]``."""

    values: tuple[str | float, ...]


@dataclass(frozen=True, slots=True)
class Named:
    """``by=['a']``, ``le='le'``."""

    name: str
    value: Argument


@dataclass(frozen=True, slots=True)
class Closure:
    params: tuple[str, ...]
    body: tuple[Statement, ...]


Argument = Expression | Text | Items | Named | Closure


# The closures' own language: what a `{tags -> ...}` says.


@dataclass(frozen=True, slots=True)
class Literal:
    """A string, a number, true, false or null."""

    value: str | float | bool | None


@dataclass(frozen=True, slots=True)
class Name:
    """A closure's parameter (``tags``, or ``element`` in ``forEach``)."""

    name: str


@dataclass(frozen=True, slots=True)
class Field:
    """``target.name`` (``target?.name`` alike): a tag, by its key."""

    target: Value
    name: str


@dataclass(frozen=True, slots=True)
class Index:
    """``target[key]``."""

    target: Value
    key: Value


@dataclass(frozen=True, slots=True)
class Call:
    """``target.name(args)``: a string's or the tags' method."""

    target: Value
    name: str
    args: tuple[Value, ...]


@dataclass(frozen=True, slots=True)
class ListOf:
    items: tuple[Value, ...]


class Comparison(enum.Enum):
    EQ = "=="
    NE = "!="
    LE = "<="
    LT = "<"
    GE = ">="
    GT = ">"
    IN = "in"


@dataclass(frozen=True, slots=True)
class Compare:
    op: Comparison
    left: Value
    right: Value


@dataclass(frozen=True, slots=True)
class Concat:
    left: Value
    right: Value


@dataclass(frozen=True, slots=True)
class Logic:
    both: bool
    """``&&`` when True, ``||`` when False."""
    left: Value
    right: Value


@dataclass(frozen=True, slots=True)
class Not:
    operand: Value


@dataclass(frozen=True, slots=True)
class Ternary:
    test: Value
    then: Value
    otherwise: Value


@dataclass(frozen=True, slots=True)
class Elvis:
    """``value ?: fallback``: the value unless it is null or empty."""

    value: Value
    fallback: Value


Value = Literal | Name | Field | Index | Call | ListOf | Compare | Concat | Logic | Not | Ternary | Elvis


@dataclass(frozen=True, slots=True)
class Assign:
    target: Field | Index
    value: Value


@dataclass(frozen=True, slots=True)
class If:
    test: Value
    then: tuple[Statement, ...]
    otherwise: tuple[Statement, ...]


@dataclass(frozen=True, slots=True)
class Return:
    value: Value | None


@dataclass(frozen=True, slots=True)
class Evaluate:
    value: Value


Statement = Assign | If | Return | Evaluate
