"""MQE's grammar: every construct of SkyWalking 10.x's language parsed into
its tree, the operators' precedence and grouping, the lexer's keyword rules,
and syntax errors that say where and what was expected."""

from __future__ import annotations

import pytest

from skyoap.mqe.parser import CACHED_CHARS, MAX_CHARS, MQEError, MQESyntaxError, _parsed, parse
from skyoap.mqe.syntax import (
    Aggregate,
    AggregateLabels,
    Aggregation,
    AttrFilter,
    Baseline,
    BaselineType,
    Binary,
    BinaryOperator,
    BoolOp,
    BoolOperator,
    Compare,
    Comparison,
    Expression,
    Label,
    LabelsAggregation,
    Logical,
    LogicalFunction,
    Mathematical,
    MathFunction,
    Metric,
    Order,
    Relabels,
    Round,
    Scalar,
    SortLabelValues,
    SortValues,
    TopN,
    TopNOf,
    Trend,
    TrendFunction,
)

CPM = Metric("service_cpm")
ADD, SUB, MUL, DIV, MOD = BinaryOperator

CONSTRUCTS: list[tuple[str, Expression]] = [
    ("service_cpm", CPM),
    ("service_cpm{}", CPM),
    (
        "service_percentile{p='50,75', _=\"x\"}",
        Metric("service_percentile", (Label("p", "50,75"), Label("_", "x"))),
    ),
    ("12abc", Metric("12abc")),
    ("42", Scalar("42")),
    ("0.25", Scalar("0.25")),
    ("(service_cpm)", CPM),
    ("service_cpm + 1", Binary(ADD, CPM, Scalar("1"))),
    ("service_cpm - 1", Binary(SUB, CPM, Scalar("1"))),
    ("service_cpm * 1", Binary(MUL, CPM, Scalar("1"))),
    ("service_cpm / 1", Binary(DIV, CPM, Scalar("1"))),
    ("service_cpm % 1", Binary(MOD, CPM, Scalar("1"))),
    *[(f"service_cpm {c.value} 1", Compare(c, CPM, Scalar("1"))) for c in Comparison],
    ("service_cpm > bool 1", Compare(Comparison.GT, CPM, Scalar("1"), bool_modifier=True)),
    (
        "service_cpm > 1 && service_cpm < 9",
        BoolOp(
            BoolOperator.AND,
            Compare(Comparison.GT, CPM, Scalar("1")),
            Compare(Comparison.LT, CPM, Scalar("9")),
        ),
    ),
    (
        "service_cpm > 1 || service_cpm < 9",
        BoolOp(
            BoolOperator.OR,
            Compare(Comparison.GT, CPM, Scalar("1")),
            Compare(Comparison.LT, CPM, Scalar("9")),
        ),
    ),
    *[(f"{a.value}(service_cpm)", Aggregate(a, CPM)) for a in Aggregation],
    *[(f"{f.value}(service_cpm)", Mathematical(f, CPM)) for f in MathFunction],
    ("round(service_cpm / 60, 2)", Round(Binary(DIV, CPM, Scalar("60")), 2)),
    ("increase(service_cpm, 2)", Trend(TrendFunction.INCREASE, CPM, 2)),
    ("rate(service_cpm{p='1'}, 5)", Trend(TrendFunction.RATE, Metric("service_cpm", (Label("p", "1"),)), 5)),
    ("view_as_seq(a, service_cpm)", Logical(LogicalFunction.VIEW_AS_SEQ, (Metric("a"), CPM))),
    ("is_present(a)", Logical(LogicalFunction.IS_PRESENT, (Metric("a"),))),
    ("top_n(service_cpm, 10, des)", TopN(CPM, 10, Order.DES)),
    (
        "top_n(service_cpm, 3, asc, attr0='GENERAL', attr5 != \"k8s\")",
        TopN(CPM, 3, Order.ASC, (AttrFilter(0, "GENERAL", True), AttrFilter(5, "k8s", False))),
    ),
    (
        "top_n_of(top_n(service_cpm, 10, des), top_n(k8s_service_cpm, 10, des), 10, des)",
        TopNOf((TopN(CPM, 10, Order.DES), TopN(Metric("k8s_service_cpm"), 10, Order.DES)), 10, Order.DES),
    ),
    (
        "relabels(service_percentile, p='50,75', percentile='P50,P75')",
        Relabels(Metric("service_percentile"), Label("p", "50,75"), Label("percentile", "P50,P75")),
    ),
    ("aggregate_labels(m, sum)", AggregateLabels(Metric("m"), LabelsAggregation.SUM)),
    ("aggregate_labels(m, avg(cmd, _))", AggregateLabels(Metric("m"), LabelsAggregation.AVG, ("cmd", "_"))),
    ("sort_values(m, 2, des, max)", SortValues(Metric("m"), 2, Order.DES, Aggregation.MAX)),
    ("sort_values(m, 2, asc, )", SortValues(Metric("m"), 2, Order.ASC, None)),
    ("sort_label_values(m, des, a, b)", SortLabelValues(Metric("m"), Order.DES, ("a", "b"))),
    ("baseline(service_resp_time, upper)", Baseline(Metric("service_resp_time"), BaselineType.UPPER)),
]


@pytest.mark.parametrize(("text", "tree"), CONSTRUCTS, ids=[t for t, _ in CONSTRUCTS])
def test_every_construct_parses_to_its_tree_and_writes_back(text: str, tree: Expression) -> None:
    assert parse(text) == tree
    assert parse(str(tree)) == tree


@pytest.mark.parametrize(
    ("text", "tree"),
    [
        ("1 + 2 * 3", Binary(ADD, Scalar("1"), Binary(MUL, Scalar("2"), Scalar("3")))),
        ("(1 + 2) * 3", Binary(MUL, Binary(ADD, Scalar("1"), Scalar("2")), Scalar("3"))),
        ("8 / 4 / 2", Binary(DIV, Binary(DIV, Scalar("8"), Scalar("4")), Scalar("2"))),
        ("8 - 4 + 2", Binary(ADD, Binary(SUB, Scalar("8"), Scalar("4")), Scalar("2"))),
        ("8 % 3 * 2", Binary(MUL, Binary(MOD, Scalar("8"), Scalar("3")), Scalar("2"))),
        ("a > b + 1", Compare(Comparison.GT, Metric("a"), Binary(ADD, Metric("b"), Scalar("1")))),
        (
            "a < b == 1",
            Compare(Comparison.DEQ, Compare(Comparison.LT, Metric("a"), Metric("b")), Scalar("1")),
        ),
        # && and || bind alike (one level in SkyWalking's grammar), from the left.
        (
            "a > 1 || b > 1 && c > 1",
            BoolOp(
                BoolOperator.AND,
                BoolOp(
                    BoolOperator.OR,
                    Compare(Comparison.GT, Metric("a"), Scalar("1")),
                    Compare(Comparison.GT, Metric("b"), Scalar("1")),
                ),
                Compare(Comparison.GT, Metric("c"), Scalar("1")),
            ),
        ),
    ],
)
def test_precedence_and_grouping(text: str, tree: Expression) -> None:
    assert parse(text) == tree
    assert parse(str(tree)) == tree


def test_the_root_dashboards_legend_expression() -> None:
    tree = parse("(avg(service_sla) < 9500) * (avg(service_cpm) > 1) == 1")
    assert str(tree) == "(avg(service_sla) < 9500) * (avg(service_cpm) > 1) == 1"
    assert isinstance(tree, Compare) and isinstance(tree.left, Binary) and tree.left.op is MUL


def test_bool_asc_and_des_may_be_written_in_any_case_other_keywords_not() -> None:
    assert parse("a > BOOL 1") == Compare(Comparison.GT, Metric("a"), Scalar("1"), bool_modifier=True)
    assert parse("top_n(a, 1, Asc)") == parse("top_n(a, 1, ASC)") == TopN(Metric("a"), 1, Order.ASC)
    assert parse("AVG") == Metric("AVG")  # a metric's name, not the keyword
    with pytest.raises(MQESyntaxError):
        parse("AVG(a)")


def test_keywords_name_no_metric_or_label_but_longer_words_do() -> None:
    assert parse("avg_latency + bool_x + values") == Binary(
        ADD, Binary(ADD, Metric("avg_latency"), Metric("bool_x")), Metric("values")
    )
    for text in ("value", "m{value='1'}", "max"):
        with pytest.raises(MQESyntaxError):
            parse(text)


STARTS = (
    "one of '(', 'abs', 'aggregate_labels', 'avg', 'baseline', 'ceil', 'count', 'floor', 'increase', "
    "'is_present', 'latest', 'max', 'min', 'rate', 'relabels', 'round', 'sort_label_values', 'sort_values', "
    "'sum', 'top_n', 'top_n_of', 'view_as_seq', a decimal number, a name, a whole number"
)
"""What an expression can start with."""
_OPERATORS = "'!=', '%', '&&', '*', '+', '-', '/', '<', '<=', '==', '>', '>='"
AFTER_VALUE = f"{_OPERATORS}, '||', the end of the expression"
"""What can follow a complete expression."""
AFTER_NAME = f"{_OPERATORS}, '{{', '||', the end of the expression"
"""What can follow a metric's name."""


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", f"line 1, column 1 (offset 0): the end of the expression where MQE expects {STARTS}"),
        ("avg", "line 1, column 4 (offset 3): the end of the expression where MQE expects '('"),
        ("top_n(service_cpm, 10, desc)",
         "line 1, column 24 (offset 23): 'desc' where MQE expects one of 'asc', 'des'"),
        ("round(service_cpm, 1.5)", "line 1, column 20 (offset 19): '1.5' where MQE expects a whole number"),
        ("relabels(m, p='1')", "line 1, column 18 (offset 17): ')' where MQE expects ','"),
        ("m{value='1'}", "line 1, column 3 (offset 2): 'value' where MQE expects one of '_', '}', a name"),
        ("top_n(m, 1, asc, attr6='x')",
         "line 1, column 18 (offset 17): 'attr6' where MQE expects one of 'attr0', 'attr1', 'attr2', "
         "'attr3', 'attr4', 'attr5'"),
        ("service_cpm +\n  $", f"line 2, column 3 (offset 16): the character '$' where MQE expects {STARTS}"),
        ("1.", f"line 1, column 2 (offset 1): the character '.' where MQE expects one of {AFTER_VALUE}"),
        ("service_cpm service_sla",
         f"line 1, column 13 (offset 12): 'service_sla' where MQE expects one of {AFTER_NAME}"),
        ("top_n(m, 2147483648, des)",
         "line 1, column 10 (offset 9): the number 2147483648 is too large: at most 2147483647"),
    ],
)  # fmt: skip
def test_a_syntax_error_says_where_and_what_was_expected(text: str, error: str) -> None:
    with pytest.raises(MQESyntaxError) as e:
        parse(text)
    assert str(e.value) == f"syntax error at {error}"


def test_a_syntax_error_keeps_its_position() -> None:
    with pytest.raises(MQESyntaxError) as e:
        parse("a +\n  $")
    assert (e.value.line, e.value.column, e.value.offset) == (2, 3, 6)


def test_an_expression_past_its_bounds_is_refused_before_it_is_read() -> None:
    with pytest.raises(MQEError) as long:
        parse("service_cpm +" * 400 + " 1")
    assert str(long.value) == "the expression has 5202 characters, more than the 4096 this node reads"
    with pytest.raises(MQEError) as many:
        parse(" + ".join(["service_cpm"] * 33))
    assert str(many.value) == "the expression names more than 32 metrics, more than this node reads"
    assert parse(" + ".join(["service_cpm"] * 32)) is not None


def test_the_parsed_trees_kept_are_bounded_by_their_text() -> None:
    for i in range(200):  # 200 distinct expressions of some 4 KB each: 800 K characters
        parse(f"service_cpm + {i:04d}" + " " * (MAX_CHARS - 19))
    assert CACHED_CHARS - MAX_CHARS <= _parsed.held_chars <= CACHED_CHARS
