"""SkyWalking's UI's dashboards: skyoap's laid out as SkyWalking lays out its
own, and what users add, change and disable kept in the shared state, as
the UI asks for it (its own mutation texts), until reset."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import graphql
import pytest

from skyoap.layers.widgets import EVENTS_HEIGHT, TAB_HEIGHT
from skyoap.query.context import QueryContext
from skyoap.query.resolvers import resolvers
from skyoap.query.ui import templates as ui_templates
from skyoap.query.ui.dashboards import dashboards
from skyoap.storage.embedded.db import Database
from skyoap.storage.embedded.topics import EmbeddedStateStore
from skyoap.vocabulary.ttl import TimesToLive
from tests.unit.fakes import MemoryInventoryDAO, MemoryMetricsDAO

# SkyWalking's UI's texts (src/graphql/query/dashboard.ts).
ADD = """mutation template($setting: NewDashboardSetting!) {
  addTemplate(setting: $setting) {
        id
        status
        message
    }}"""
UPDATE = """mutation template($setting: DashboardSetting!) {
  changeTemplate(setting: $setting) {
        id
        status
        message
    }}"""
REMOVE = """mutation template($id: String!) {
  disableTemplate(id: $id) {
        id
        status
        message
    }}"""
TEMPLATES = """query templates {
    getAllTemplates {
      id,
      configuration,
    }
  }"""

WHOLE = {"ServiceList", "InstanceList", "EndpointList", "Topology", "Trace", "Log"}


EVENTS = {
    "x": 0,
    "y": 0,
    "w": 24,
    "h": EVENTS_HEIGHT,
    "i": "events",
    "type": "Event",
    "eventAssociate": True,
    "eventDefaultCollapse": False,
}


def widgets_of_tabs() -> Iterator[tuple[str, str, list[dict[str, Any]]]]:
    """Every tab's widgets; each page is its tabs, below the entity's events
    on the pages of a service, an instance and an endpoint."""
    for d in dashboards():
        *above, tab = d["configuration"]["children"]
        with_events = d["id"] in {"General-Service", "General-Instance", "General-Endpoint"}
        assert above == ([EVENTS] if with_events else []), d["id"]
        assert (tab["type"], tab["y"], tab["w"], tab["h"]) == (
            "Tab",
            len(above) * EVENTS_HEIGHT,
            24,
            TAB_HEIGHT,
        )
        for t in tab["children"]:
            yield d["id"], t["name"], t["children"]


@pytest.mark.parametrize(("dashboard", "tab", "widgets"), list(widgets_of_tabs()))
def test_a_tab_is_laid_out_as_skywalkings_own(
    dashboard: str, tab: str, widgets: list[dict[str, Any]]
) -> None:
    cells: set[tuple[int, int]] = set()
    for w in widgets:
        kind = w["graph"].get("type") if w["type"] == "Widget" else w["type"]
        size = (24, 48) if kind in WHOLE else {"Card": (8, 5), "Line": (6, 11), "TopList": (8, 14)}[kind]
        assert (w["w"], w["h"]) == size, (kind, w["widget"])
        assert w["x"] >= 0 and w["x"] + w["w"] <= 24 and w["y"] + w["h"] <= TAB_HEIGHT
        mine = {(x, y) for x in range(w["x"], w["x"] + w["w"]) for y in range(w["y"], w["y"] + w["h"])}
        assert not cells & mine, f"{w['widget']} overlaps another"
        cells |= mine


def test_the_first_page_shows_the_service_list_and_the_topology_whole() -> None:
    root = next(d for d in dashboards() if d["id"] == "General-Root")
    (tab,) = root["configuration"]["children"]
    services, topology = tab["children"][0]["children"][0], tab["children"][1]["children"][0]
    assert (services["graph"]["type"], services["h"], topology["type"], topology["h"]) == (
        "ServiceList", 48, "Topology", 48,
    )  # fmt: skip


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "state.db")


@pytest.fixture
def state(path: str) -> Iterator[EmbeddedStateStore]:
    store = EmbeddedStateStore(Database(path))
    yield store
    store.close()


def ask(state: EmbeddedStateStore | None, query: str, **variables: Any) -> Any:
    ttl = TimesToLive(3, 1, 7, 90, 7, 7)
    context = QueryContext(MemoryInventoryDAO(), MemoryMetricsDAO(), None, ttl, state)  # type: ignore[arg-type]
    binder = resolvers()
    result = graphql.graphql_sync(
        binder.schema, query, variable_values=variables, context_value=context, field_resolver=binder.resolve
    )
    assert not result.errors, result.errors
    assert result.data is not None
    return next(iter(result.data.values()))


def listed(state: EmbeddedStateStore) -> dict[str, dict[str, Any]]:
    return {t["id"]: json.loads(t["configuration"]) for t in ask(state, TEMPLATES)}


def config(name: str, entity: str = "Service", **more: Any) -> str:
    return json.dumps({"layer": "GENERAL", "entity": entity, "name": name, "children": [], **more})


def test_a_dashboard_added_changed_and_disabled_is_kept_and_reset(
    state: EmbeddedStateStore, path: str
) -> None:
    shipped = listed(state)
    assert list(shipped) == [d["id"] for d in dashboards()]

    added = ask(state, ADD, setting={"configuration": config("Mine")})
    assert (added["status"], added["message"]) == (True, None)
    mine = added["id"]
    assert listed(state)[mine] == json.loads(config("Mine"))

    changed = json.loads(config("General-Service", isRoot=False, children=[{"type": "Text"}]))
    answer = ask(state, UPDATE, setting={"id": "General-Service", "configuration": json.dumps(changed)})
    assert answer == {"id": "General-Service", "status": True, "message": None}
    assert listed(state)["General-Service"] == changed

    assert ask(state, REMOVE, id="General-Endpoint") == {
        "id": "General-Endpoint",
        "status": True,
        "message": None,
    }
    assert "General-Endpoint" not in listed(state)
    gone = ask(state, '{ getTemplate(id: "General-Endpoint") { id } }')
    assert gone is None

    # Another node over the same storage answers the same.
    again = EmbeddedStateStore(Database(path))
    assert listed(again) == listed(state)
    again.close()

    kept = {t.id: (t.shipped, t.disabled) for t in ui_templates.templates(state).values() if t.changed}
    assert kept == {"General-Service": (True, False), "General-Endpoint": (True, True), mine: (False, False)}
    assert ui_templates.reset(state, ["General-Service"]) == ["General-Service"]
    assert listed(state)["General-Service"] == shipped["General-Service"]
    assert sorted(ui_templates.reset(state)) == sorted(["General-Endpoint", mine])
    assert listed(state) == shipped
    with pytest.raises(ValueError, match=r"^no change to a dashboard is kept under 'General-Root'$"):
        ui_templates.reset(state, ["General-Root"])


@pytest.mark.parametrize(
    ("query", "setting", "message"),
    [
        (ADD, {"configuration": "{"}, "the dashboard cannot be kept: it is not JSON (Expecting property name "
         "enclosed in double quotes: line 1 column 2 (char 1))"),
        (ADD, {"configuration": "[]"}, "the dashboard cannot be kept: it is not a JSON object"),
        (ADD, {"configuration": '{"layer": "GENERAL"}'},
         "the dashboard cannot be kept: it names no entity, name"),
        (ADD, {"configuration": config("General-Service")},
         "there is a dashboard 'General-Service' of Service in GENERAL already (General-Service)"),
        (UPDATE, {"id": "nope", "configuration": config("X")},
         "there is no dashboard 'nope' to change (addTemplate adds one)"),
        (UPDATE, {"id": "General-Instance", "configuration": config("General-Service")},
         "there is a dashboard 'General-Service' of Service in GENERAL already (General-Service)"),
    ],
)  # fmt: skip
def test_a_dashboard_that_cannot_be_kept_is_refused_and_nothing_changes(
    state: EmbeddedStateStore, query: str, setting: dict[str, str], message: str
) -> None:
    before = listed(state)
    answer = ask(state, query, setting=setting)
    assert (answer["status"], answer["message"]) == (False, message)
    assert listed(state) == before


def test_a_dashboard_past_the_size_bound_is_refused(state: EmbeddedStateStore) -> None:
    big = config("Big", padding="x" * ui_templates.MAX_CONFIGURATION_BYTES)
    answer = ask(state, ADD, setting={"configuration": big})
    assert answer["message"] == f"the dashboard cannot be kept: it is larger than {1 << 20} bytes"
    assert ask(state, REMOVE, id="nope")["message"] == "there is no dashboard 'nope' to disable"
