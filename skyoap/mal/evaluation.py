"""A MAL expression checked once, when its rule is read, and evaluated for
every batch of samples: which families it reads, what it stores (its scope,
layer, downsampling and whether its values keep labels), and the families
it makes of a batch.

Every function and argument is checked when the rule is read, so a rule
that would fail on every batch refuses the start instead, saying what is
wrong."""

from __future__ import annotations

import enum
import functools
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from skyoap.mal import closures
from skyoap.mal import families as f
from skyoap.mal import syntax as s
from skyoap.mal.counters import Counters, duration_ms
from skyoap.mal.parser import MALError


class Downsampling(enum.Enum):
    """What a stored value is of the samples of its minute (and of the
    minutes of its hour and day)."""

    AVG = "avg"
    SUM = "sum"
    LATEST = "latest"
    SUM_PER_MIN = "sum_per_min"
    MAX = "max"
    MIN = "min"


@dataclass(frozen=True)
class Batch:
    """The samples of one arrival (a scrape, an OTLP request, an agent's
    report) by metric name, and what a histogram's bounds are in."""

    families: Mapping[str, f.Family]
    seconds: bool = True
    """Whether histogram bounds are in seconds (OTLP, Prometheus) rather
    than in ms (agents' meters)."""


@dataclass
class Context:
    """What evaluating a rule of a node keeps between batches."""

    counters: Counters = field(default_factory=Counters)
    clock: Callable[[], float] = time.time


Values = float | f.Family
Step = Callable[["_Evaluation"], Values]
Operation = Callable[[f.Family, "_Evaluation"], f.Family]
"""What a function of a family does to it, its arguments checked and read."""


@dataclass(frozen=True)
class Compiled:
    """A rule's expression with what it stores."""

    metric: str
    families: frozenset[str]
    scope: f.Scope
    layer: str
    downsampling: Downsampling
    labeled: bool
    """Whether its values keep labels besides those naming their entity
    (the rule aggregates by them): SkyWalking's labeled metrics."""
    histogram: bool
    percentiles: tuple[int, ...]
    step: Step = field(repr=False)

    def evaluate(self, batch: Batch, context: Context) -> f.Scoped | None:
        """What the rule stores of ``batch``: None when the batch holds none
        of its families, or the rule's result is empty."""
        if not any(name in batch.families for name in self.families):
            return None
        result = self.step(_Evaluation(self.metric, batch, context))
        if not isinstance(result, f.Family) or result.scoped is None or not result.scoped.entities:
            return None
        return result.scoped


def compile_rule(metric: str, expression: s.Expression) -> Compiled:
    """``expression`` checked and made ready to run; MALError saying what is
    wrong with it."""
    c = _Compiler()
    step = c.compile(expression)
    if c.scope is None:
        raise MALError("the expression names no entity: it calls none of service(), instance(), endpoint()")
    if c.percentiles and not c.histogram:
        raise MALError("histogram_percentile() reads what histogram() made: call histogram() before it")
    labeled = bool(c.aggregated - c.scope_labels)
    return Compiled(
        metric,
        frozenset(c.families),
        c.scope,
        c.layer,
        c.downsampling,
        labeled,
        c.histogram,
        c.percentiles,
        step,
    )


class _Evaluation:
    """One rule's evaluation over one batch."""

    def __init__(self, metric: str, batch: Batch, context: Context) -> None:
        self.metric, self.batch, self.context = metric, batch, context


def _combine(op: f.Arithmetic, left: Values, right: Values) -> Values:
    if isinstance(left, float) and isinstance(right, float):
        return f.apply(op, left, right)
    if isinstance(right, float):
        return f.with_scalar(op, left, right, scalar_first=False)  # type: ignore[arg-type]
    if isinstance(left, float):
        return f.with_scalar(op, right, left, scalar_first=True)
    return f.between(op, left, right)


def _family(value: Values) -> f.Family:
    return value if isinstance(value, f.Family) else f.EMPTY


class _Compiler:
    """Turns a rule's expression into steps, checking each function and its
    arguments on the way, and notes what the rule stores."""

    def __init__(self) -> None:
        self.families: set[str] = set()
        self.scope: f.Scope | None = None
        self.layer = ""
        self.scope_labels: set[str] = set()
        self.aggregated: set[str] = set()
        self.downsampling = Downsampling.AVG
        self.histogram = False
        self.percentiles: tuple[int, ...] = ()

    def compile(self, node: s.Expression) -> Step:
        match node:
            case s.Number(value):
                return lambda ev: value
            case s.Family(name):
                self.families.add(name)
                return lambda ev: ev.batch.families.get(name, f.EMPTY)
            case s.Binary(op, left, right):
                arithmetic, first, second = f.Arithmetic[op.name], self.compile(left), self.compile(right)
                return lambda ev: _combine(arithmetic, first(ev), second(ev))
            case s.Negate(operand):
                inner = self.compile(operand)
                return lambda ev: _combine(f.Arithmetic.MUL, inner(ev), -1.0)
            case s.Function("time", ()):
                return lambda ev: float(int(ev.context.clock()))
            case s.Function("count", (s.Family() | s.Method() as target, *rest)):
                return self.compile(s.Method(target, "count", tuple(rest)))
            case s.Function(name, _):
                raise MALError(
                    f"{name}() is no MAL function (time() is; the others follow a family: x.{name}())"
                )
            case s.Constant(kind, name):
                raise MALError(f"{kind}.{name} is an argument, not a value")
            case s.Method(target, name, args):
                source = self.compile(target)
                build = _METHODS.get(name)
                if build is None:
                    raise MALError(f".{name}() is no function of a sample family")
                operation = build(self, name, args)
                return lambda ev: operation(_family(source(ev)), ev)
        raise AssertionError(node)


Builder = Callable[[_Compiler, str, tuple[s.Argument, ...]], Operation]


def _texts(name: str, args: Sequence[s.Argument], what: str) -> list[str]:
    texts = [a.value for a in args if isinstance(a, s.Text)]
    if len(texts) != len(args):
        raise MALError(f".{name}() takes {what}")
    return texts


def _labels(name: str, arg: s.Argument) -> tuple[str, ...]:
    if isinstance(arg, s.Named) and arg.name == "by":
        arg = arg.value
    if not isinstance(arg, s.Items) or not all(isinstance(v, str) for v in arg.values):
        raise MALError(f".{name}() takes a list of label names: ['a', 'b']")
    return tuple(str(v) for v in arg.values)


def _tag_filter(c: _Compiler, name: str, args: tuple[s.Argument, ...]) -> Operation:
    texts = _texts(name, args, "label names and values in pairs: ('mode', 'idle')")
    if not texts or len(texts) % 2:
        raise MALError(f".{name}() takes label names and values in pairs: ('mode', 'idle')")
    test = f.TagTest(name)
    if test in (f.TagTest.MATCH, f.TagTest.NOT_MATCH):
        for pattern in texts[1::2]:
            try:
                re.compile(pattern)
            except re.error as e:
                raise MALError(f".{name}(): {pattern!r} is no regular expression: {e}") from None
    pairs = list(zip(texts[::2], texts[1::2], strict=True))
    return lambda family, ev: f.tag_filter(family, test, pairs)


_VALUE_TESTS = {t.value[0]: t for t in f.ValueTest}


def _value_filter(c: _Compiler, name: str, args: tuple[s.Argument, ...]) -> Operation:
    match args:
        case (s.Number(bound),):
            test = _VALUE_TESTS[name]
            return lambda family, ev: f.value_filter(family, test, bound)
        case (s.Negate(s.Number(bound)),):
            test = _VALUE_TESTS[name]
            return lambda family, ev: f.value_filter(family, test, -bound)
    raise MALError(f".{name}() takes one number")


def _aggregate(c: _Compiler, name: str, args: tuple[s.Argument, ...]) -> Operation:
    if len(args) > 1:
        raise MALError(f".{name}() takes one list of label names: ['a', 'b']")
    by = _labels(name, args[0]) if args else ()
    c.aggregated.update(by)
    how = f.Aggregation(name)
    return lambda family, ev: f.aggregate(family, how, by)


def _window(c: _Compiler, name: str, args: tuple[s.Argument, ...]) -> Operation:
    if name == "irate":
        if args:
            raise MALError(".irate() takes nothing: it compares each sample with the one before")
        return lambda family, ev: ev.context.counters.irate(ev.metric, family)
    texts = _texts(name, args, "one duration: 'PT1M'")
    if len(texts) != 1:
        raise MALError(f".{name}() takes one duration: 'PT1M'")
    try:
        window = duration_ms(texts[0])
    except ValueError as e:
        raise MALError(f".{name}(): {e}") from None
    per_second = name == "rate"
    return lambda family, ev: ev.context.counters.increase(ev.metric, family, window, per_second)


def _closure(name: str, args: Sequence[s.Argument], params: int) -> s.Closure:
    closure = args[0] if len(args) == 1 else None
    if not isinstance(closure, s.Closure) or len(closure.params) != params:
        shape = "{tags -> ...}" if params == 1 else "{element, tags -> ...}"
        raise MALError(f".{name}() takes a closure of {params} parameter{'s' * (params > 1)}: {shape}")
    closures.check(closure)
    return closure


def _tag(c: _Compiler, name: str, args: tuple[s.Argument, ...]) -> Operation:
    closure = _closure(name, args, 1)

    def change(tags: dict[str, str]) -> dict[str, str]:
        returned = closures.run(closure, tags)
        return {str(k): str(v) for k, v in returned.items()} if isinstance(returned, dict) else tags

    return lambda family, ev: f.retag(family, change)


def _filter(c: _Compiler, name: str, args: tuple[s.Argument, ...]) -> Operation:
    closure = _closure(name, args, 1)
    return lambda family, ev: f.keep(family, lambda tags: bool(closures.run(closure, tags)))


def _for_each(c: _Compiler, name: str, args: tuple[s.Argument, ...]) -> Operation:
    if len(args) != 2 or not isinstance(args[0], s.Items):
        raise MALError(".forEach() takes a list and a closure: (['a', 'b'], {element, tags -> ...})")
    items, closure = args[0].values, _closure(name, args[1:], 2)

    def each(tags: dict[str, str]) -> dict[str, str]:
        for item in items:
            closures.run(closure, item, tags)
        return tags

    return lambda family, ev: f.retag(family, each)


_TIME_UNITS = {"MILLISECONDS": 1.0, "SECONDS": 1000.0}


def _histogram(c: _Compiler, name: str, args: tuple[s.Argument, ...]) -> Operation:
    le, unit = "le", None
    for arg in args:
        if isinstance(arg, s.Named) and arg.name == "le":
            arg = arg.value
        if isinstance(arg, s.Text):
            le = arg.value
        elif isinstance(arg, s.Constant) and arg.type == "TimeUnit" and arg.name in _TIME_UNITS:
            unit = _TIME_UNITS[arg.name]
        else:
            raise MALError(".histogram() takes the bucket label and a unit: ('le', TimeUnit.MILLISECONDS)")
    c.histogram = True

    def run(family: f.Family, ev: _Evaluation) -> f.Family:
        return f.histogram(family, le, unit if unit is not None else 1000.0 if ev.batch.seconds else 1.0)

    return run


def _percentiles(c: _Compiler, name: str, args: tuple[s.Argument, ...]) -> Operation:
    ranks = args[0].values if len(args) == 1 and isinstance(args[0], s.Items) else ()
    if not ranks or not all(isinstance(r, float) and r.is_integer() and 0 < r <= 100 for r in ranks):
        raise MALError(".histogram_percentile() takes a list of whole ranks in 1..100: [50, 75, 90, 95, 99]")
    c.percentiles = tuple(int(r) for r in ranks)
    return lambda family, ev: family


def _downsampling(c: _Compiler, name: str, args: tuple[s.Argument, ...]) -> Operation:
    match args:
        case (s.Family(kind) | s.Constant(_, kind),) if kind in Downsampling.__members__:
            c.downsampling = Downsampling[kind]
            return lambda family, ev: family
    raise MALError(f".downsampling() takes one of {', '.join(Downsampling.__members__)}")


_ARITHMETIC = {"plus": f.Arithmetic.ADD, "minus": f.Arithmetic.SUB, "multiply": f.Arithmetic.MUL,
               "div": f.Arithmetic.DIV}  # fmt: skip


def _arithmetic(c: _Compiler, name: str, args: tuple[s.Argument, ...]) -> Operation:
    if len(args) != 1 or not isinstance(args[0], s.Number | s.Family | s.Binary | s.Method | s.Negate):
        raise MALError(f".{name}() takes one family or number")
    other = c.compile(args[0])
    if name == "safeDiv":
        return lambda family, ev: _safe_divide(family, other(ev))
    op = _ARITHMETIC[name]
    return lambda family, ev: _family(_combine(op, family, other(ev)))


def _safe_divide(family: f.Family, other: Values) -> f.Family:
    """Each value over its match (or the number), or 0 where that is 0."""
    if isinstance(other, float):
        return family.values(lambda v: 0.0 if other == 0 else v / other)
    return f.safe_divide(family, other)


_SCOPES = {scope.value: scope for scope in f.Scope}
_SCOPE_LISTS = {f.Scope.SERVICE: 1, f.Scope.INSTANCE: 2, f.Scope.ENDPOINT: 2, f.Scope.SERVICE_RELATION: 2}


def _scope(c: _Compiler, name: str, args: tuple[s.Argument, ...]) -> Operation:
    """``service(['host'], Layer.X)``, ``instance([...], [...], Layer.X)``,
    ``endpoint(...)``, ``serviceRelation(DetectPoint.SERVER, [...], [...], Layer.X)``:
    an entity's names are the values of its labels joined by '.' (or the
    delimiter given), those without a value left out."""
    scope = _SCOPES[name]
    rest = list(args)
    detect_point = ""
    if scope is f.Scope.SERVICE_RELATION:
        match rest.pop(0) if rest else None:
            case s.Constant("DetectPoint", "CLIENT" | "SERVER" as point):
                detect_point = point.lower()
            case _:
                raise MALError(".serviceRelation() takes DetectPoint.CLIENT or DetectPoint.SERVER first")
    keys: list[tuple[str, ...]] = []
    delimiter, layer = ".", None
    for arg in rest:
        if isinstance(arg, s.Items):
            keys.append(_labels(name, arg))
        elif isinstance(arg, s.Text) and keys and layer is None:
            delimiter = arg.value or "."
        elif isinstance(arg, s.Constant) and arg.type == "Layer":
            layer = arg.name
        elif not isinstance(arg, s.Closure):  # an instance's properties: skyoap keeps none
            raise MALError(f".{name}() takes lists of label names and a Layer: (['host_name'], Layer.MYSQL)")
    wanted = _SCOPE_LISTS[scope]
    if layer is None or len(keys) != wanted or not all(keys):
        lists = "one list" if wanted == 1 else f"{wanted} lists"
        raise MALError(f".{name}() takes {lists} of label names and a Layer: (['host_name'], Layer.MYSQL)")
    c.scope, c.layer = scope, layer
    named = {k for group in keys for k in group}
    c.scope_labels |= named
    entity = functools.partial(f.Entity, scope, layer, detect_point=detect_point)
    second = {f.Scope.INSTANCE: "instance", f.Scope.ENDPOINT: "endpoint"}.get(scope, "dest_service")

    def run(family: f.Family, ev: _Evaluation) -> f.Family:
        entities: dict[f.Entity, list[f.Sample]] = {}
        for sample in family.samples:
            names = [delimiter.join(v for k in group if (v := sample.tag(k))) for group in keys]
            found = entity(names[0], **({second: names[1]} if len(names) > 1 else {}))
            rest = tuple((k, v) for k, v in sample.labels if k not in named)
            entities.setdefault(found, []).append(f.Sample(sample.name, rest, sample.value, sample.time_ms))
        return f.Family(family.samples, f.Scoped(entities))

    return run


_METHODS: Mapping[str, Builder] = {
    **{t.value: _tag_filter for t in f.TagTest},
    **{name: _value_filter for name in _VALUE_TESTS},
    **{a.value: _aggregate for a in f.Aggregation},
    "rate": _window, "irate": _window, "increase": _window,
    "tag": _tag, "filter": _filter, "forEach": _for_each,
    "histogram": _histogram, "histogram_percentile": _percentiles,
    "downsampling": _downsampling,
    **{name: _arithmetic for name in (*_ARITHMETIC, "safeDiv")},
    **{name: _scope for name in _SCOPES},
}  # fmt: skip
"""Every function of a sample family, by its name."""
