"""A benchmark's figures, as its run writes them and the table shows them."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import report, results
from bench.results import Figure, at_least, at_most


def test_a_run_is_written_and_shown_against_its_ceiling_and_goal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    monkeypatch.setattr(report, "RESULTS", tmp_path)
    results.record("topics", [
        Figure("one consumer", 45_000, "records/s", 50_000, "raw read", at_least(0.9, of_ceiling=True)),
        Figure("delivery p99", 1200.0, "ms", goal=at_most(1000)),
        Figure("a read", 3.9, "ms", 1.0, "the read alone", at_most(2.0, of_ceiling=True, or_within=3)),
        Figure("a longer read", 9.0, "ms", 4.0, "the read alone", at_most(2.0, of_ceiling=True, or_within=3)),
    ])  # fmt: skip
    run, figures = results.load(tmp_path / "topics.json")
    assert run["benchmark"] == "topics" and str(run["command"]).startswith(".venv/bin/python -m bench.topics")
    assert [f.goal.met(f) for f in figures if f.goal] == [True, False, True, False]
    rows = report.table().split("\n")[2:]
    assert [r.split(" | ")[1:] for r in rows] == [
        [
            "one consumer: 45,000 records/s",
            "90.0% of 50,000 records/s (raw read)",
            "≥ 90% of the ceiling",
            "yes |",
        ],
        ["delivery p99: 1,200 ms", "", "≤ 1,000 ms", "**no** |"],
        [
            "a read: 3.90 ms",
            "390.0% of 1.00 ms (the read alone)",
            "≤ 200% of the ceiling, or within 3 ms of it when it is < 3 ms",
            "yes |",
        ],
        [
            "a longer read: 9.00 ms",
            "225.0% of 4.00 ms (the read alone)",
            "≤ 200% of the ceiling, or within 3 ms of it when it is < 3 ms",
            "**no** |",
        ],
    ]
