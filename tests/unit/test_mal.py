"""MAL as SkyWalking's rules write it: families, filters, operators (with
what an absent family does), aggregations, counters, closures and the
scope functions, and rule files with what a bad rule says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from skyoap.mal import families as f
from skyoap.mal.counters import duration_ms
from skyoap.mal.evaluation import Batch, Compiled, Context, Downsampling, compile_rule
from skyoap.mal.parser import MALError, parse
from skyoap.mal.rules import RuleError, evaluate_files, read_rule_file, read_rules

HOST = "service(['host'], Layer.OS_LINUX)"


def family(name: str, *samples: tuple[dict[str, str], float], time_ms: int = 0) -> f.Family:
    return f.Family(tuple(f.Sample(name, f.labels_of(tags), value, time_ms) for tags, value in samples))


def rule(expression: str, metric: str = "m") -> Compiled:
    return compile_rule(metric, parse(expression))


def stored(
    expression: str, *families: f.Family, context: Context | None = None
) -> dict[tuple[str, ...], float] | None:
    """What ``expression`` stores of a batch of ``families``: each entity's
    names and remaining labels, with its value."""
    batch = Batch({fam.samples[0].name: fam for fam in families if fam.samples})
    found = rule(expression).evaluate(batch, context or Context())
    if found is None:
        return None
    out = {}
    for entity, samples in found.entities.items():
        for sample in samples:
            names = (entity.service, entity.instance, entity.endpoint, entity.dest_service)
            key = tuple(n for n in names if n) + tuple(f"{k}={v}" for k, v in sample.labels)
            out[key] = sample.value
    return out


A = family(
    "a", ({"host": "h1", "x": "1"}, 10.0), ({"host": "h1", "x": "2"}, 20.0), ({"host": "h2", "x": "1"}, 30.0)
)
B = family("b", ({"host": "h1", "x": "1"}, 2.0), ({"host": "h2", "x": "9"}, 5.0))


def test_families_combine_sample_by_sample_where_their_labels_are_equal() -> None:
    assert stored(f"(a / b).{HOST}", A, B) == {("h1", "x=1"): 5.0}
    assert stored(f"(a * 2 + 1).{HOST}", A) == {("h1", "x=1"): 21.0, ("h1", "x=2"): 41.0, ("h2", "x=1"): 61.0}
    assert stored(f"(100 - a).{HOST}", A) == {("h1", "x=1"): 90.0, ("h1", "x=2"): 80.0, ("h2", "x=1"): 70.0}
    assert stored(f"(40 / a).{HOST}", A) == {("h1", "x=1"): 4.0, ("h1", "x=2"): 2.0, ("h2", "x=1"): 40 / 30}
    assert stored(f"(-a + 1024 * 1024).{HOST}", A)[("h1", "x=1")] == 1_048_566.0  # type: ignore[index]


def test_an_absent_family_passes_the_other_side_of_a_sum_and_empties_a_product() -> None:
    present = {("h1", "x=1"): 10.0, ("h1", "x=2"): 20.0, ("h2", "x=1"): 30.0}
    assert stored(f"(a + missing).{HOST}", A) == present
    assert stored(f"(missing + a).{HOST}", A) == present
    assert stored(f"(a - missing).{HOST}", A) == present
    assert stored(f"(missing - a).{HOST}", A) == {k: -v for k, v in present.items()}
    assert stored(f"(a * missing).{HOST}", A) is None
    assert stored(f"(missing / a).{HOST}", A) is None
    # Divided by nothing: by zero, infinite; 0/0 is no number and its sample goes.
    zero = family("a", ({"host": "h1"}, 0.0), ({"host": "h2"}, 3.0))
    assert stored(f"(a / missing).{HOST}", zero) == {("h2",): float("inf")}
    assert stored(
        f"(a.safeDiv(b)).{HOST}", family("a", ({"host": "h"}, 4.0)), family("b", ({"host": "h"}, 0.0))
    ) == {("h",): 0.0}


def test_aggregations_keep_the_labels_they_are_by_and_group_a_missing_one_as_empty() -> None:
    assert stored(f"a.sum(['host']).{HOST}", A) == {("h1",): 30.0, ("h2",): 30.0}
    assert stored("a.sum(by=['x']).service(['x'], Layer.GENERAL)", A) == {("1",): 40.0, ("2",): 20.0}
    assert stored(f"a.avg(['host']).{HOST}", A) == {("h1",): 15.0, ("h2",): 30.0}
    assert stored(f"a.max(['host']).{HOST}", A) == {("h1",): 20.0, ("h2",): 30.0}
    assert stored(f"a.min(['host']).{HOST}", A) == {("h1",): 10.0, ("h2",): 30.0}
    assert stored(f"a.sum(['host', 'nope']).{HOST}", A) == {("h1", "nope="): 30.0, ("h2", "nope="): 30.0}
    assert stored("a.count(['host', 'x']).service(['host'], Layer.GENERAL)", A) == {
        ("h1",): 2.0,
        ("h2",): 1.0,
    }


def test_tag_and_value_filters() -> None:
    assert stored(f"a.tagEqual('x', '1').{HOST}", A) == {("h1", "x=1"): 10.0, ("h2", "x=1"): 30.0}
    assert stored(f"a.tagNotEqual('x', '1').{HOST}", A) == {("h1", "x=2"): 20.0}
    # A pattern matches the whole value: '1' does not match '12'.
    twelve = family("a", ({"host": "h", "x": "12"}, 1.0), ({"host": "h", "x": "1"}, 2.0))
    assert stored(f"a.tagMatch('x', '1').{HOST}", twelve) == {("h", "x=1"): 2.0}
    assert stored(f"a.tagMatch('x', '1|12').{HOST}", twelve) == {("h", "x=1"): 2.0, ("h", "x=12"): 1.0}
    assert stored(f"a.tagNotMatch('x', '1.*').{HOST}", twelve) is None
    assert stored(f"a.tagEqual('nope', '').{HOST}", twelve) == {("h", "x=1"): 2.0, ("h", "x=12"): 1.0}
    assert stored(f"a.valueGreaterEqual(20).{HOST}", A) == {("h1", "x=2"): 20.0, ("h2", "x=1"): 30.0}
    assert stored(f"a.valueLess(20).valueNotEqual(-1).{HOST}", A) == {("h1", "x=1"): 10.0}


def test_closures_change_and_filter_tags_as_the_shipped_rules_write_them() -> None:
    locks = family("pg_locks", ({"host": "pg", "datname": "shop", "mode": "x"}, 3.0))
    assert stored(f"pg_locks.tag({{tags -> tags.mode = tags.datname + ':' + tags.mode}}).{HOST}", locks) == {
        ("pg", "datname=shop", "mode=shop:x"): 3.0
    }
    # A missing tag is null, and text joined with null reads 'null', as in Groovy.
    assert stored(f"pg_locks.tag({{tags -> tags.host = 'db::' + tags.nope}}).{HOST}", locks) == {
        ("db::null", "datname=shop", "mode=x"): 3.0
    }
    closure = """{tags ->
        if (tags['mode'] == 'x' || tags.mode == 'y') { tags.kind = 'exclusive' }
        else { tags.kind = 'shared' };
        tags.remove('datname')
        tags.size = tags.mode in ['x', 'z'] ? 'big' : 'small'
        tags.db = tags.nope ?: 'none'
        tags.upper = tags.mode.toUpperCase()
    }"""
    assert stored(f"pg_locks.tag({closure}).{HOST}", locks) == {
        ("pg", "db=none", "kind=exclusive", "mode=x", "size=big", "upper=X"): 3.0
    }
    both = family("a", ({"host": "h", "job": "vm"}, 1.0), ({"host": "h2", "job": "db"}, 2.0))
    assert stored(f"a.filter({{tags -> tags.job == 'vm' && !(tags.host == 'h2')}}).{HOST}", both) == {
        ("h", "job=vm"): 1.0
    }


def test_a_closure_is_read_by_the_grammar_and_can_call_nothing_else() -> None:
    for closure, wrong in [
        ("{tags -> tags.getClass().forName('java.lang.Runtime')}", "calls .getClass()"),
        ("{tags -> Runtime.exec('rm')}", "names 'Runtime'"),
        ("{tags -> System.exit(1)}", "names 'System'"),
        ("{tags -> other.x = 1}", "names 'other'"),
    ]:
        with pytest.raises(MALError) as refused:
            rule(f"a.tag({closure}).{HOST}")
        assert wrong in str(refused.value)
    with pytest.raises(MALError, match="syntax error at line 1, column 29"):
        rule(f"a.tag({{tags -> while (true) {{ }} }}).{HOST}")


def counter(value: float, time_s: int, **tags: str) -> f.Family:
    return family("c", ({"host": "h", **tags}, value), time_ms=time_s * 1000)


def test_rate_increase_and_irate_are_exact_over_a_window_and_carry_over_a_reset() -> None:
    rate, increase, irate = Context(), Context(), Context()
    #        time s: 0   15  30  45  60   75  90 (a restart) 105  120
    values = [(0, 100), (15, 130), (30, 160), (45, 190), (60, 220), (75, 250), (90, 10), (105, 40), (120, 70)]
    rates, increases, irates = [], [], []
    for t, v in values:
        rates.append(stored(f"c.rate('PT1M').{HOST}", counter(v, t), context=rate))
        increases.append(stored(f"c.increase('PT30S').{HOST}", counter(v, t), context=increase))
        irates.append(stored(f"c.irate().{HOST}", counter(v, t), context=irate))
    # The first sample has no earlier one to compare with: nothing, rather than a rate of 0.
    assert rates[0] is None and increases[0] is None and irates[0] is None
    per_second = [r[("h",)] if r else None for r in rates]
    # 2/s up to the restart; the counter went 250 -> 0 -> 10 between 75 s and 90 s, which counts 10:
    # the minutes that hold it counted 100 (90 before the restart and 10 after, or 40 and 60).
    assert per_second == [None, 2.0, 2.0, 2.0, 2.0, 2.0, 100 / 60, 100 / 60, 100 / 60]
    assert [i[("h",)] if i else None for i in increases] == [
        None,
        30.0,
        60.0,
        60.0,
        60.0,
        60.0,
        40.0,
        40.0,
        60.0,
    ]
    assert [i[("h",)] if i else None for i in irates] == [None, 2.0, 2.0, 2.0, 2.0, 2.0, 10 / 15, 2.0, 2.0]


def test_counters_are_kept_per_rule_and_series_and_a_repeated_sample_gives_nothing() -> None:
    context = Context()
    for rule_name in ("one", "two"):
        first = rule(f"c.rate('PT1M').{HOST}", rule_name).evaluate(Batch({"c": counter(0, 0)}), context)
        assert first is None
    found = rule(f"c.rate('PT1M').{HOST}", "one").evaluate(Batch({"c": counter(60, 30)}), context)
    assert found is not None and [s.value for s in next(iter(found.entities.values()))] == [2.0]
    assert rule(f"c.rate('PT1M').{HOST}", "one").evaluate(Batch({"c": counter(90, 30)}), context) is None
    assert len(context.counters) == 2
    assert [duration_ms(d) for d in ("PT1M", "PT5M", "PT20.5S", "P1DT1H")] == [
        60_000,
        300_000,
        20_500,
        90_000_000,
    ]
    with pytest.raises(ValueError, match="'1m' is not an ISO-8601 duration"):
        duration_ms("1m")


def test_scope_functions_name_entities_from_labels_and_take_those_labels_off() -> None:
    pg = family("pg", ({"host_name": "db1", "service_instance_id": "10.0.0.1:9187", "datname": "shop"}, 4.0))
    suffix = (
        "service(['host_name'], Layer.POSTGRESQL)"
        ".instance(['host_name'], ['service_instance_id'], Layer.POSTGRESQL)"
    )
    found = rule(f"(pg).tag({{tags -> tags.host_name = 'postgresql::' + tags.host_name}}).{suffix}").evaluate(
        Batch({"pg": pg}), Context()
    )
    assert found is not None
    ((entity, samples),) = found.entities.items()
    assert entity == f.Entity(f.Scope.INSTANCE, "POSTGRESQL", "postgresql::db1", instance="10.0.0.1:9187")
    assert [(s.labels, s.value) for s in samples] == [((("datname", "shop"),), 4.0)]
    # Names of several labels are joined by '.', leaving out those without a value.
    assert stored(
        "a.service(['host', 'zone', 'x'], Layer.GENERAL)", family("a", ({"host": "h", "x": "1"}, 1.0))
    ) == {("h.1",): 1.0}
    relation = rule("a.serviceRelation(DetectPoint.SERVER, ['host'], ['x'], Layer.GENERAL)").evaluate(
        Batch({"a": A}), Context()
    )
    assert relation is not None and {e.dest_service for e in relation.entities} == {"1", "2"}
    assert {e.detect_point for e in relation.entities} == {"server"}


def test_what_a_rule_stores_is_known_when_it_is_read() -> None:
    single = rule(f"a.sum(['host']).{HOST}")
    assert (single.scope, single.layer, single.labeled, single.downsampling) == (
        f.Scope.SERVICE, "OS_LINUX", False, Downsampling.AVG,
    )  # fmt: skip
    labeled = rule(f"a.sum(['host', 'mode']).downsampling(LATEST).{HOST}")
    assert (labeled.labeled, labeled.downsampling, labeled.families) == (
        True,
        Downsampling.LATEST,
        frozenset("a"),
    )
    histogram = rule(f"h.sum(['le', 'host']).histogram().histogram_percentile([50, 99]).{HOST}")
    assert (histogram.histogram, histogram.percentiles) == (True, (50, 99))


@pytest.mark.parametrize(
    ("expression", "wrong"),
    [
        (
            "a.sum(['host'])",
            "the expression names no entity: it calls none of service(), instance(), endpoint()",
        ),
        (f"a.summ(['host']).{HOST}", ".summ() is no function of a sample family"),
        (f"a.sum('host').{HOST}", ".sum() takes a list of label names: ['a', 'b']"),
        (f"a.rate('1m').{HOST}", ".rate(): '1m' is not an ISO-8601 duration such as 'PT1M'"),
        (f"a.tagEqual('mode').{HOST}", ".tagEqual() takes label names and values in pairs: ('mode', 'idle')"),
        (
            f"a.tagMatch('mode', '(').{HOST}",
            ".tagMatch(): '(' is no regular expression: missing ), unterminated",
        ),
        (
            "a.service(['host'])",
            ".service() takes one list of label names and a Layer: (['host_name'], Layer.MYSQL)",
        ),
        (
            f"a.downsampling(MEDIAN).{HOST}",
            ".downsampling() takes one of AVG, SUM, LATEST, SUM_PER_MIN, MAX, MIN",
        ),
        (f"a.histogram_percentile([50]).{HOST}", "histogram_percentile() reads what histogram() made"),
        (
            f"a.sum(['host'].{HOST}",
            """syntax error at line 1, column 15: ".service(['host'], L" is not MAL here""",
        ),
        ("a.sum(['host']).", "syntax error at line 1, column 17: the expression ends where MAL expects more"),
    ],
)
def test_a_rule_that_is_not_mal_is_refused_saying_what_is_wrong(expression: str, wrong: str) -> None:
    with pytest.raises(MALError) as refused:
        rule(expression)
    assert str(refused.value).startswith(wrong)


RULES = """
# In SkyWalking's form: a filter, a prefix for every family, a suffix for every rule.
filter: "{ tags -> tags.job_name == 'vm-monitoring' }"
expPrefix: tagNotEqual('mode', 'steal')
expSuffix: service(['host'], Layer.OS_LINUX)
metricPrefix: meter_vm
metricsRules:
  - name: load
    exp: load1 * 100
  - name: cpu
    exp: >
      cpu.sum(['host', 'mode'])
"""


def test_a_rule_file_in_skywalkings_form_filters_prefixes_and_suffixes_every_rule(tmp_path: Path) -> None:
    path = tmp_path / "vm.yaml"
    path.write_text(RULES)
    (rules,) = read_rules([tmp_path])
    assert [(r.metric, r.scope, r.labeled) for r in rules.rules] == [
        ("meter_vm_load", f.Scope.SERVICE, False), ("meter_vm_cpu", f.Scope.SERVICE, True),
    ]  # fmt: skip
    vm = {"job_name": "vm-monitoring", "host": "h"}
    batch = Batch({
        "load1": family("load1", (vm, 0.5), ({"job_name": "other", "host": "h2"}, 9.0)),
        "cpu": family("cpu", ({**vm, "mode": "user"}, 3.0), ({**vm, "mode": "steal"}, 1.0)),
    })  # fmt: skip
    failures: list[Any] = []
    found = {
        r.metric: {
            e.service: [(s.labels, s.value) for s in samples] for e, samples in scoped.entities.items()
        }
        for r, scoped in evaluate_files([rules], batch, Context(), lambda *a: failures.append(a))
    }
    assert found == {
        "meter_vm_load": {"h": [((("job_name", "vm-monitoring"),), 50.0)]},
        "meter_vm_cpu": {"h": [((("mode", "user"),), 3.0)]},
    }
    assert failures == []


@pytest.mark.parametrize(
    ("text", "wrong"),
    [
        ("metricsRules: []", "metricPrefix is missing: every rule's metric is named metricPrefix_<name>"),
        ("- a\n- b", "a rule file is a mapping with metricPrefix and metricsRules"),
        ("metricPrefix: m\nmetricsRules:\n  - name: x", "rule 1 of metricsRules has no name and exp"),
        (
            "metricPrefix: m\nexpSuffix: service(['h'], Layer.GENERAL)\n"
            "metricsRules:\n  - name: x\n    exp: a.rate()",
            "rule x (m_x): .rate() takes one duration: 'PT1M'",
        ),
        ("metricPrefix: m\nfilter: '{ tags -> tags.a = 1 + }'\n", "filter: syntax error at line 1, column"),
        ("metricPrefix: [m]", "metricPrefix is list, not text"),
        ("metricPrefix: m\n  bad: [", "not a YAML rule file"),
    ],
)
def test_a_bad_rule_file_names_the_file_the_rule_and_what_is_wrong(
    tmp_path: Path, text: str, wrong: str
) -> None:
    path = tmp_path / "bad.yaml"
    with pytest.raises(RuleError) as refused:
        read_rule_file(path, text)
    assert str(refused.value).startswith(f"{path}: {wrong}")


def test_two_files_storing_one_metric_are_refused(tmp_path: Path) -> None:
    for name in ("a.yaml", "b.yml"):
        (tmp_path / name).write_text(RULES)
    with pytest.raises(RuleError, match=r"b\.yml: meter_vm_load is stored by a rule of .*a\.yaml too"):
        read_rules([tmp_path])
    with pytest.raises(RuleError, match="nowhere: no such file or directory of rules"):
        read_rules([tmp_path / "nowhere"])
