"""What a benchmark run measured, written where docs/benchmarks.md's table of
current figures is generated from (``python -m bench.report``).

Each benchmark writes ``bench/results/<name>.json`` at the end of its run: the
commit, date, machine and command, and each figure beside the ceiling
measured in the same run and its goal. Commit that file with the figures."""

from __future__ import annotations

import datetime
import json
import os
import statistics
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True)
class Goal:
    """``at_least`` or ``at_most`` ``value``, of the figure itself, or of its
    share of the ceiling (``of_ceiling``). With ``or_within``, an ``at_most``
    goal of the ceiling is also met by a figure at most ``or_within`` above a
    ceiling below ``or_within`` (in the figure's unit): what a fixed cost,
    such as a request's round trip, makes of a share of a small ceiling."""

    kind: str
    value: float
    of_ceiling: bool = False
    or_within: float | None = None

    def met(self, figure: Figure) -> bool | None:
        value = figure.value
        if self.of_ceiling:
            if not figure.ceiling:
                return None
            if self.or_within is not None and figure.ceiling < self.or_within:
                return figure.value - figure.ceiling <= self.or_within or value / figure.ceiling <= self.value
            value = figure.value / figure.ceiling
        return value >= self.value if self.kind == "at_least" else value <= self.value

    def describe(self, unit: str) -> str:
        sign = "≥" if self.kind == "at_least" else "≤"
        if self.of_ceiling:
            within = self.or_within
            also = f", or within {within:,g} {unit} of it when it is < {within:,g} {unit}" if within else ""
            return f"{sign} {self.value:.0%} of the ceiling{also}"
        return f"{sign} {self.value:,g} {unit}"


def at_least(value: float, of_ceiling: bool = False) -> Goal:
    return Goal("at_least", value, of_ceiling)


def at_most(value: float, of_ceiling: bool = False, or_within: float | None = None) -> Goal:
    return Goal("at_most", value, of_ceiling, or_within)


@dataclass(frozen=True)
class Figure:
    name: str
    value: float
    unit: str
    ceiling: float | None = None
    """The ceiling measured in the same run, in the same unit."""
    ceiling_is: str = ""
    """What the ceiling is (``raw Elasticsearch read``)."""
    goal: Goal | None = None


def pct(values: list[float], p: float) -> float:
    """The ``p``-th percentile of ``values`` (inclusive quantiles)."""
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(p) - 1]


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True,
            cwd=RESULTS.parent,
        )  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()


def record(benchmark: str, figures: list[Figure]) -> Path:
    """Writes this run's figures of ``benchmark``; returns the file."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{benchmark}.json"
    command = " ".join([".venv/bin/python", "-m", f"bench.{benchmark}", *sys.argv[1:]])
    run = {
        "benchmark": benchmark,
        "commit": _commit(),
        "date": datetime.date.today().isoformat(),
        "cores": os.cpu_count(),
        "command": command,
        "figures": [asdict(f) for f in figures],
    }
    path.write_text(json.dumps(run, indent=2, ensure_ascii=False) + "\n")
    print(f"figures written to {path.relative_to(RESULTS.parent.parent)}", file=sys.stderr)
    return path


def load(path: Path) -> tuple[dict[str, object], list[Figure]]:
    run = json.loads(path.read_text())
    figures = []
    for f in run["figures"]:
        goal = Goal(**f.pop("goal")) if f.get("goal") else None
        f.pop("goal", None)
        figures.append(Figure(**f, goal=goal))
    return run, figures
