"""Alarm rules evaluated every minute: the CPU seconds one node spends on a
minute's round of ``--rules`` rules over ``--services`` services with
``--instances`` instances and ``--endpoints`` endpoints each (10,000
entities by default), beside the CPU of the round's metrics reads alone,
replayed against the same storage: the ceiling.

Minute metrics of every entity are written straight to the embedded
storage for the longest period of the rules and the minutes evaluated;
one entity in a hundred (``--failing``) fails or is slow at a time, so
that some alarms fire and recover. The rules are SkyWalking's kinds, as a settings file has them:
sums of minutes past a threshold, averages, percentiles, two conditions
joined, the older ``metrics-name`` form, periods of 1 to 10 minutes, some
with include-names or an exclude-names regex. A node that owns every alarm
bucket evaluates ``--minutes`` minutes in turn, each round (``run_once``:
its state loaded, evaluated, stored, its notices recorded; the rules name
no hooks) timed in CPU seconds of this process, which runs SQLite too.
The goal: a tenth of a core, 6 s a minute.

For scale, the MQE engine evaluating entity by entity (``held``, what a
round did before) is timed on a sample of rules and entities.

    .venv/bin/python -m bench.alarms [--rules 1000] [--services 2000] [--instances 2] [--endpoints 2]
        [--minutes 5] [--failing 0.01]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.query import Recorder
from bench.results import Figure, at_most, pct, record
from skyoap.alarm.delivery import Delivery
from skyoap.alarm.evaluation import entities, held, period_ending, watched
from skyoap.alarm.rounds import Alarms, AlarmStorage, Membership
from skyoap.alarm.settings import AlarmSettings, parse_settings
from skyoap.model import sketch
from skyoap.model.metrics import (
    METRICS_TYPES,
    CallMetrics,
    Downsampling,
    EndpointMetrics,
    ServiceInstanceMetrics,
    ServiceMetrics,
    minute_bucket,
)
from skyoap.model.records import RECORD_TYPES
from skyoap.mqe.stored import StoredMetrics
from skyoap.runtime.instruments import Instruments
from skyoap.storage.api import MetricsDAO, MetricsWrite
from skyoap.storage.config import StorageConfig, StorageKind
from skyoap.storage.select import OpenStorage, open_storage

LONGEST_PERIOD = 10
CHUNK = 5_000
GOAL_S = 6.0
"""A tenth of a core: 6 CPU seconds a minute."""


def calls(rng: random.Random, bucket: int, failing: bool) -> dict[str, Any]:
    """A minute's calls: 20-200, fast and successful; or (``failing``) often
    few, a quarter to a half failing and a fifth taking 1-3 s."""
    n = rng.randint(1, 10) if failing and rng.random() < 0.5 else rng.randint(20, 200)
    slow = n // 5 if failing else 0
    latencies = [rng.randint(1000, 3000) for _ in range(slow)]
    latencies += [rng.randint(3, 30)] * (n - slow)
    errors = rng.randint(n // 4, n // 2) if failing else rng.randint(0, n // 100)
    return {"time_bucket": bucket, "calls": n, "errors": errors, "latency_sum_ms": sum(latencies),
            "histogram": sketch.of_latencies(latencies)}  # fmt: skip


def rows(args: argparse.Namespace, first: int, minutes: int) -> Iterator[CallMetrics]:
    """Every entity's row of every minute; a share (``--failing``) of the
    entities failing, a different share every 4 minutes."""
    rng = random.Random(3)
    for m in range(minutes):
        bucket = minute_bucket((first + m) * 60_000)
        phase = m // 4
        for s in range(args.services):
            service = f"svc-{s}"
            for kind, n in (("service", s), *(("instance", i) for i in range(args.instances)),
                            *(("endpoint", e) for e in range(args.endpoints))):  # fmt: skip
                failing = random.Random(f"{phase} {kind} {s} {n}").random() < args.failing
                values = calls(rng, bucket, failing)
                if kind == "service":
                    yield ServiceMetrics(service=service, apdex_satisfied=values["calls"] // 2, **values)
                elif kind == "instance":
                    yield ServiceInstanceMetrics(service=service, instance=f"{service}-{n}", **values)
                else:
                    yield EndpointMetrics(service=service, endpoint=f"GET:/api/{n}", **values)


def populate(storage: OpenStorage, args: argparse.Namespace, first: int, minutes: int) -> int:
    storage.metrics.install(METRICS_TYPES)
    storage.records.install(RECORD_TYPES)  # where alarms are recorded
    pending: dict[type[CallMetrics], list[MetricsWrite[Any]]] = {}
    written = 0
    for row in rows(args, first, minutes):
        batch = pending.setdefault(type(row), [])
        batch.append(MetricsWrite(None, row, {}))
        if len(batch) >= CHUNK:
            storage.metrics.put(type(row), Downsampling.MINUTE, batch)
            written += len(batch)
            batch.clear()
    for model, batch in pending.items():
        storage.metrics.put(model, Downsampling.MINUTE, batch)
        written += len(batch)
    return written


SCOPES = {
    "service": ("service", lambda rng, a: f"svc-{rng.randrange(a.services)}"),
    "service_instance": (
        "service_instance",
        lambda rng, a: f"svc-{(s := rng.randrange(a.services))}-{rng.randrange(a.instances)} of svc-{s}",
    ),
    "endpoint": (
        "endpoint",
        lambda rng, a: f"GET:/api/{rng.randrange(a.endpoints)} in svc-{rng.randrange(a.services)}",
    ),
}


def rule(rng: random.Random, n: int, args: argparse.Namespace) -> str:
    """Rule ``n`` of the settings file, of a scope with entities."""
    counts = {"service": 1, "service_instance": args.instances, "endpoint": args.endpoints}
    scopes = [scope for scope, count in counts.items() if count]
    scope = rng.choice(scopes)
    prefix, name_of = SCOPES[scope]
    period = rng.randint(1, LONGEST_PERIOD)
    count = rng.randint(1, period)
    conditions = [
        f"sum({prefix}_sla < {rng.choice([8000, 9000, 9500])}) >= {count}",
        f"avg({prefix}_resp_time) > {rng.choice([200, 500, 1000])}",
        f"sum({prefix}_percentile{{p='{rng.choice(['90', '95', '99', '95,99'])}'}} > "
        f"{rng.choice([1000, 2000])}) >= {count}",
        f"avg({prefix}_sla) < {rng.choice([7000, 8500, 9500])}",
        f"max({prefix}_resp_time) > {rng.choice([700, 1500])}",
        f"avg({prefix}_cpm) < {rng.choice([2, 5])}",
    ]
    roll = rng.random()
    lines = [f"  {scope}_{n}_rule:", f"    period: {period}"]
    if roll < 0.15:  # the older form
        metric, threshold = rng.choice([("sla", 9000), ("resp_time", 800)])
        op = "<" if metric == "sla" else ">"
        lines += [f"    metrics-name: {prefix}_{metric}", f'    op: "{op}"', f"    threshold: {threshold}",
                  f"    count: {count}"]  # fmt: skip
    elif roll < 0.4:
        first, second = rng.sample(conditions, 2)
        lines.append(f'    expression: "{first} {rng.choice(["&&", "||"])} {second}"')
    else:
        lines.append(f'    expression: "{rng.choice(conditions)}"')
    if rng.random() < 0.2:
        names = sorted({name_of(rng, args) for _ in range(rng.randint(1, 20))})
        lines.append(f"    include-names: [{', '.join(repr(n) for n in names)}]")
    elif rng.random() < 0.1:
        lines.append(f"    exclude-names-regex: 'svc-{rng.randint(1, 9)}.*'")
    lines.append(f"    silence-period: {rng.randint(1, 10)}")
    return "\n".join(lines)


def settings(args: argparse.Namespace) -> AlarmSettings:
    rng = random.Random(5)
    return parse_settings("rules:\n" + "\n".join(rule(rng, n, args) for n in range(args.rules)))


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def engine_per_pair(storage: OpenStorage, rules: AlarmSettings, minute: int, sample: int) -> float:
    """CPU seconds of ``held`` for one rule and one entity, on ``sample`` of them."""
    rng = random.Random(9)
    pairs = []
    for r in rng.sample(rules.rules, min(sample // 20, len(rules.rules))):
        w = watched(r)
        duration = period_ending(minute, r.period)
        found = entities(storage.metrics, w, duration)
        pairs += [(w, e, duration) for e in rng.sample(found, min(20, len(found)))]
    reader = StoredMetrics(storage.metrics, {})
    start = time.process_time()
    for w, e, duration in pairs:
        held(w, e, duration, reader)
    return (time.process_time() - start) / len(pairs)


def open_alarms(storage: OpenStorage, rules: AlarmSettings, clock: Clock) -> tuple[Alarms, Recorder]:
    """A node's alarms owning every bucket, and the recorder of their metrics reads."""
    metrics = Recorder(storage.metrics)
    dao = typing.cast(MetricsDAO, metrics)
    stores, members = AlarmStorage(dao, storage.state, storage.records), Membership("n1", lambda: ["n1"])
    alarms = Alarms(lambda: rules, stores, members, Delivery(Instruments()), Instruments(), 0.0, clock)
    return alarms, metrics


def not_at_rest(storage: OpenStorage) -> int:
    """The alarms firing, silenced or observed for recovery, in every bucket's state."""
    docs = (storage.state.load(name)[0] for name in storage.state.names())
    return sum(len(doc["courses"]) for doc in docs if doc)


def run(storage: OpenStorage, args: argparse.Namespace) -> list[Figure]:
    first = int(time.time()) // 60 - LONGEST_PERIOD - args.minutes - 10
    start = time.perf_counter()
    written = populate(storage, args, first, LONGEST_PERIOD + args.minutes)
    count = args.services * (1 + args.instances + args.endpoints)
    print(f"{written:,} minute rows of {count:,} entities written in {time.perf_counter() - start:.0f} s")
    rules = settings(args)
    clock = Clock()
    alarms, metrics = open_alarms(storage, rules, clock)
    rounds, reads = [], []
    for m in range(LONGEST_PERIOD, LONGEST_PERIOD + args.minutes):
        clock.now = (first + m + 1) * 60 + 1.0  # just after minute m ended: m is evaluated
        metrics.calls.clear()
        metrics.on = True
        began = time.process_time()
        alarms.run_once()
        rounds.append(time.process_time() - began)
        metrics.on = False
        began = time.process_time()
        metrics.replay()
        reads.append(time.process_time() - began)
        print(f"  minute {m - LONGEST_PERIOD + 1}: {rounds[-1]:.2f} s CPU, its {len(metrics.calls)} reads "
              f"alone {reads[-1]:.2f} s; {not_at_rest(storage):,} alarms not at rest")  # fmt: skip
    per_pair = engine_per_pair(storage, rules, first + LONGEST_PERIOD, 2_000)
    of_scope = {"service": args.services, "service_instance": args.services * args.instances,
                "endpoint": args.services * args.endpoints}  # fmt: skip
    pairs = sum(of_scope[r.name.rsplit("_", 2)[0]] for r in rules.rules)
    name = f"a minute of {args.rules:,} rules over {count:,} entities"
    print(f"{name}: p50 {pct(rounds, 50):.2f} s CPU, the slowest {max(rounds):.2f} s; its reads alone p50 "
          f"{pct(reads, 50):.2f} s; goal: under {GOAL_S:.0f} s (a tenth of a core)")  # fmt: skip
    print(f"the MQE engine entity by entity: {per_pair * 1e6:,.0f} us per rule and entity, "
          f"{pairs:,} of them: some {per_pair * pairs:,.0f} s a minute")  # fmt: skip
    return [
        Figure(f"{name}, CPU p50", pct(rounds, 50), "s", pct(reads, 50), "its metrics reads alone",
               at_most(GOAL_S)),
        Figure("the same, the slowest minute", max(rounds), "s", goal=at_most(GOAL_S)),
        Figure("the MQE engine entity by entity, per rule and entity", per_pair * 1e6, "µs"),
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rules", type=int, default=1_000)
    parser.add_argument("--services", type=int, default=2_000)
    parser.add_argument("--instances", type=int, default=2, help="per service")
    parser.add_argument("--endpoints", type=int, default=2, help="per service")
    parser.add_argument("--minutes", type=int, default=5, help="minutes evaluated in turn")
    parser.add_argument("--failing", type=float, default=0.01, help="the share of entities failing at a time")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        storage = open_storage(
            StorageConfig(kind=StorageKind.EMBEDDED, embedded_path=str(Path(tmp) / "a.db"))
        )
        try:
            figures = run(storage, args)
        finally:
            storage.close()
    record("alarms", figures)


if __name__ == "__main__":
    main()
