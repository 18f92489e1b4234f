"""Dashboards users add, change and disable through SkyWalking's UI, on both
storages: answered at once by another node running on the same storage,
kept by a node that restarts on it, listed and reset by ``skyoap
dashboards``."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from skyoap.wiring.config import NodeConfig
from skyoap.wiring.node import Node
from tests.integration.helpers import command, storage_argv
from tests.integration.test_query_traces import ask
from tests.unit.test_ui_templates import ADD, REMOVE, TEMPLATES, UPDATE


def listed(node: Node) -> dict[str, Any]:
    assert node.query_url is not None
    answer = ask(node.query_url, TEMPLATES, {})
    assert "errors" not in answer, answer
    return {t["id"]: json.loads(t["configuration"]) for t in answer["data"]["getAllTemplates"]}


def change(node: Node, query: str, **variables: Any) -> dict[str, Any]:
    assert node.query_url is not None
    answer = ask(node.query_url, query, variables)
    assert "errors" not in answer, answer
    result: dict[str, Any] = next(iter(answer["data"].values()))
    assert (result["status"], result["message"]) == (True, None)
    return result


def dashboards_command(config: NodeConfig, *argv: str) -> list[str]:
    code, lines = command("dashboards", *argv, *storage_argv(config.storage))
    assert code == 0
    return lines


def test_dashboards_users_change_are_kept_by_every_node_and_reset(
    node_config: NodeConfig, start_node: Callable[[NodeConfig], Node]
) -> None:
    first, other = start_node(node_config), start_node(node_config)  # two nodes of one storage at once
    shipped = listed(first)
    mine = {"layer": "GENERAL", "entity": "Service", "name": "Mine", "isRoot": False, "children": []}
    added = change(first, ADD, setting={"configuration": json.dumps(mine)})["id"]
    service = {**shipped["General-Service"], "children": []}
    change(first, UPDATE, setting={"id": "General-Service", "configuration": json.dumps(service)})
    change(first, REMOVE, id="General-Endpoint")
    expected = {**shipped, "General-Service": service, added: mine}
    del expected["General-Endpoint"]
    assert listed(other) == expected
    first.close()
    other.close()

    second = start_node(node_config)  # the same storage, restarted
    assert listed(second) == expected
    assert sorted(dashboards_command(node_config, "list")) == sorted(
        [
            f"{added}\tadded\tGENERAL\tService\tMine",
            "General-Endpoint\tdisabled\tGENERAL\tEndpoint\tGeneral-Endpoint",
            "General-Service\tchanged\tGENERAL\tService\tGeneral-Service",
        ]
    )
    assert dashboards_command(node_config, "reset", "General-Service") == ["reset General-Service"]
    assert listed(second)["General-Service"] == shipped["General-Service"]
    assert sorted(dashboards_command(node_config, "reset")) == sorted(
        [f"reset {added}", "reset General-Endpoint"]
    )
    assert listed(second) == shipped
