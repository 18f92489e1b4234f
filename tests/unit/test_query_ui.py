"""The web UI's files, served by the query endpoint: what each is, what is
not served, and the endpoint's credentials over them."""

from __future__ import annotations

import base64
import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from skyoap.edge.auth import HttpAuth
from skyoap.query.binder import Binder
from skyoap.query.execution import Execution
from skyoap.query.schema import load_schema
from skyoap.query.server import QueryServer
from skyoap.runtime.admission import Admission
from skyoap.runtime.instruments import Instruments

UI = Path(__file__).resolve().parents[2] / "skyoap" / "query" / "ui" / "static"


def server(auth: HttpAuth | None = None) -> QueryServer:
    execution = Execution(Binder(load_schema()), None, deadline_s=30.0, max_depth=15)
    started = QueryServer("127.0.0.1", 0, Admission(1, 0, 30.0), execution, Instruments(), 10_000, auth=auth)
    started.start()
    return started


@pytest.fixture
def base() -> Iterator[str]:
    s = server()
    yield f"http://127.0.0.1:{s.port}"
    s.close()


def get(url: str, authorization: str | None = None) -> tuple[int, bytes, dict[str, str]]:
    request = urllib.request.Request(url, headers={"Authorization": authorization} if authorization else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read(), dict(answer.headers)
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read(), dict(refused.headers)


def test_the_page_and_its_files_are_served_as_they_are(base: str) -> None:
    status, body, headers = get(f"{base}/")
    assert (status, body) == (200, (UI / "index.html").read_bytes())
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert headers["Content-Security-Policy"] == (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; frame-ancestors 'none'"
    )
    assert (headers["X-Frame-Options"], headers["X-Content-Type-Options"]) == ("DENY", "nosniff")
    for name, kind in (("app.js", "text/javascript"), ("style.css", "text/css")):
        status, body, headers = get(f"{base}/ui/{name}")
        assert (status, body, headers["Content-Type"]) == (
            200,
            (UI / name).read_bytes(),
            f"{kind}; charset=utf-8",
        )


@pytest.mark.parametrize(
    "path", ["/ui/nope.js", "/ui/..%2Fserver.py", "/ui/.hidden.js", "/ui/", "/index.html"]
)
def test_nothing_else_is_served(base: str, path: str) -> None:
    status, _, headers = get(base + path)
    assert (status, headers["X-Frame-Options"]) == (404, "DENY")


def test_the_ui_is_under_the_endpoints_credentials() -> None:
    s = server(HttpAuth("ui", "secret", ""))
    try:
        status, _, headers = get(f"http://127.0.0.1:{s.port}/")
        assert (status, headers["WWW-Authenticate"]) == (401, 'Basic realm="skyoap"')
        good = "Basic " + base64.b64encode(b"ui:secret").decode()
        assert get(f"http://127.0.0.1:{s.port}/ui/app.js", good)[0] == 200
    finally:
        s.close()


def test_the_page_asks_for_every_module_at_once() -> None:
    page = (UI / "index.html").read_text()
    modules = sorted(p.name for p in UI.glob("*.js") if p.name != "app.js")
    assert re.findall(r'<link rel="modulepreload" href="/ui/([a-z]+\.js)">', page) == modules


def test_the_ui_is_small() -> None:
    """Its budget: about 300 KB, uncompressed, every file together."""
    assert sum(p.stat().st_size for p in UI.iterdir()) < 300_000


def test_what_the_pages_show_of_each_layer_comes_from_the_layers_own_files(base: str) -> None:
    status, body, headers = get(f"{base}/ui/layers.json")
    assert (status, headers["Content-Type"]) == (200, "application/json; charset=utf-8")
    calls = [["Load (calls / min)", "cpm"], ["Latency (ms)", "resp_time"], ["Success (%)", "sla/100"]]
    assert json.loads(body) == {
        "called": [
            {"layer": "VIRTUAL_DATABASE", "title": "Databases", "prefix": "database_access", "figures": calls,
             "slow": [["top_n_database_statement", "statement"]]},
            {"layer": "VIRTUAL_CACHE", "title": "Caches", "prefix": "cache_access", "figures": calls,
             "slow": [["top_n_cache_read_command", "read"], ["top_n_cache_write_command", "write"]]},
            {"layer": "VIRTUAL_MQ", "title": "Message brokers", "prefix": "mq_service",
             "figures": [["Consumed (msgs / min)", "consume_cpm"], ["In transit (ms)", "consume_latency"],
                         ["Consumed ok (%)", "consume_sla/100"], ["Produced (msgs / min)", "produce_cpm"]],
             "slow": []},
        ]
    }  # fmt: skip
