"""The web UI in Debian's Chromium (headless, through Playwright), over half
an hour of ``--services`` services (each calling the next, as
``bench.query`` writes them) on the embedded storage:

- first paint: from navigation to the first contentful paint of the UI's
  page, beside the same for an empty page in the same browser (the ceiling:
  what no page paints faster than);
- the services page drawn: from navigation until every service's row and
  chart is on the page (the page times it: ``page.dataset.drawnMs``);
- the services page of ``--many`` services (on an embedded storage of their
  own): from navigation until the list is on the page, before its figures
  (``page.dataset.firstShownMs``), and until it is drawn whole;
- the topology's layout: the time the page itself measures for laying out
  every service (``page.dataset.layoutMs``), beside the whole topology page
  drawn (its queries, the layout and the drawing).

Each is measured ``--rounds`` times, in a new page each time, after each
page was drawn once untimed (the node parses and keeps each query the first
time it is sent).

    .venv/bin/python -m bench.ui [--services 100] [--many 1000] [--rounds 10]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from playwright.sync_api import Browser, Page, ViewportSize, sync_playwright

from bench.cpu import Usage, measuring
from bench.query import populate
from bench.results import Figure, at_most, pct, record
from skyoap.deploy.servers import chromium_path
from skyoap.query.context import QueryContext
from skyoap.query.execution import Execution
from skyoap.query.resolvers import resolvers
from skyoap.query.server import QueryServer
from skyoap.runtime.admission import Admission
from skyoap.runtime.instruments import Instruments
from skyoap.storage.config import StorageConfig, StorageKind
from skyoap.storage.select import open_storage
from skyoap.vocabulary.ttl import TimesToLive

MINUTES = 30
VIEWPORT: ViewportSize = {"width": 1366, "height": 800}  # a laptop's screen, as the UI's tests
FIRST_PAINT = "performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? null"


def first_paint(page: Page, url: str) -> float:
    page.goto(url)
    for _ in range(100):
        painted = page.evaluate(FIRST_PAINT)
        if painted is not None:
            return float(painted)
        page.wait_for_timeout(20)
    raise RuntimeError(f"{url} never painted")


def drawn(page: Page, url: str, name: str) -> float:
    """Milliseconds from navigation until the page ``name`` was drawn, as the
    page itself times it."""
    page.goto(url)
    page.wait_for_selector(f"main[data-shown='{name}']:not([aria-busy])", timeout=60_000)
    return float(page.locator("main").get_attribute("data-drawn-ms") or "nan")


def warm_up(browser: Browser, base: str, pages: tuple[str, ...]) -> None:
    """Draws each page once, untimed: the node parses and keeps each query
    the first time it is sent, as the browser compiles the UI's code."""
    for name in pages:
        page = browser.new_page(viewport=VIEWPORT)
        drawn(page, f"{base}#/{name}", name)
        page.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--services", type=int, default=100)
    parser.add_argument("--many", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    with serving(args.services) as base:
        figures = measure(base, args)
    with serving(args.many) as base:
        figures += measure_many(base, args)
    record("ui", figures)


@contextlib.contextmanager
def serving(services: int) -> Iterator[str]:
    """A query endpoint over half an hour of ``services`` services; yields the UI's URL."""
    with tempfile.TemporaryDirectory() as tmp:
        storage = open_storage(
            StorageConfig(kind=StorageKind.EMBEDDED, embedded_path=str(Path(tmp) / "u.db"))
        )
        now_minute = int(time.time()) // 60
        populate(storage, services, 5, now_minute - MINUTES + 1, 200, minutes=MINUTES)
        context = QueryContext(
            storage.inventory, storage.metrics, storage.records, TimesToLive(3, 1, 7, 90, 7, 7)
        )  # fmt: skip
        execution = Execution(resolvers(), context, deadline_s=60.0, max_depth=15)
        server = QueryServer("127.0.0.1", 0, Admission(8, 32, 60.0), execution, Instruments(), 1 << 20)
        server.start()
        try:
            yield server.url.removesuffix("graphql")
        finally:
            server.close()
            storage.close()


def spread(values: list[float]) -> str:
    return f"p50 {pct(values, 50):.0f} ms, p99 {pct(values, 99):.0f} ms"


def measure(base: str, args: argparse.Namespace) -> list[Figure]:
    empty: list[float] = []
    painted: list[float] = []
    services: list[float] = []
    layout: list[float] = []
    topology: list[float] = []
    drawing = Usage()  # the services pages', summed
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
        try:
            warm_up(browser, base, ("services", "topology"))
            for _ in range(args.rounds):
                for url, into in (("data:text/html,<p>skyoap</p>", empty), (f"{base}#/services", painted)):
                    page = browser.new_page(viewport=VIEWPORT)
                    into.append(first_paint(page, url))
                    if url.startswith(base):  # its queries are not left running into the next page's
                        page.wait_for_selector("main[data-shown]:not([aria-busy])", timeout=60_000)
                    page.close()
                page = browser.new_page(viewport=VIEWPORT)
                usage = Usage()
                with measuring(usage, node_pid=os.getpid()):  # this process and the browser under it
                    services.append(drawn(page, f"{base}#/services", "services"))
                drawing.wall_s, drawing.node_s = drawing.wall_s + usage.wall_s, drawing.node_s + usage.node_s
                drawing.load_s += usage.load_s
                rows = page.locator("table.services tbody tr").count()
                assert rows == args.services, f"the services page drew {rows} rows of {args.services}"
                page.close()
                page = browser.new_page(viewport=VIEWPORT)
                topology.append(drawn(page, f"{base}#/topology", "topology"))
                nodes = page.locator("svg.topology g.node").count()
                assert nodes == args.services, f"the topology drew {nodes} nodes of {args.services}"
                layout.append(float(page.locator("main").get_attribute("data-layout-ms") or "nan"))
                page.close()
        finally:
            browser.close()
    n = args.services
    print(f"first paint: {spread(painted)} (an empty page: {spread(empty)})")
    print(f"the services page of {n} services drawn: {spread(services)}")
    r = args.rounds
    print(
        f"  CPU per services page: the query server {drawing.load_s / r * 1000:.0f} ms, Chromium "
        f"{(drawing.node_s - drawing.load_s) / r * 1000:.0f} ms, over {drawing.wall_s / r * 1000:.0f} ms"
    )
    print(f"a topology of {n} services laid out: {spread(layout)} (the page drawn: {spread(topology)})")
    return [
        Figure("first paint p99", pct(painted, 99), "ms", pct(empty, 99), "an empty page's", at_most(1000)),
        Figure(f"services page of {n} services drawn p99", pct(services, 99), "ms", goal=at_most(500)),
        Figure(f"topology of {n} services laid out p99", pct(layout, 99), "ms", pct(topology, 99),
               "the whole topology page drawn", at_most(1000)),
    ]  # fmt: skip


def measure_many(base: str, args: argparse.Namespace) -> list[Figure]:
    listed: list[float] = []
    services: list[float] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
        try:
            warm_up(browser, base, ("services",))
            for _ in range(args.rounds):
                page = browser.new_page(viewport=VIEWPORT)
                services.append(drawn(page, f"{base}#/services", "services"))
                listed.append(float(page.locator("main").get_attribute("data-first-shown-ms") or "nan"))
                rows = page.locator("table.services tbody tr").count()
                assert rows == args.many, f"the services page drew {rows} rows of {args.many}"
                page.close()
        finally:
            browser.close()
    n = f"{args.many:,}"
    print(f"the services page of {n} services: the list shown {spread(listed)}, drawn {spread(services)}")
    return [
        Figure(
            f"services page of {n} services, the list shown p99", pct(listed, 99), "ms", goal=at_most(2000)
        ),
        Figure(f"services page of {n} services drawn p99", pct(services, 99), "ms"),
    ]


if __name__ == "__main__":
    main()
