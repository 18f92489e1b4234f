"""docs/configuration.md says what the code declares."""

from __future__ import annotations

from bench import report
from skyoap.deploy.reference import PAGE, render


def test_the_configuration_page_is_current() -> None:
    stale = "run `python -m skyoap.deploy.reference` and commit docs/configuration.md"
    assert PAGE.read_text() == render(), stale


def test_the_table_of_current_benchmark_figures_is_current() -> None:
    page = report.PAGE.read_text()
    assert report.BEGIN in page and report.END in page
    assert report.render(page) == page, "run `python -m bench.report` and commit docs/benchmarks.md"
