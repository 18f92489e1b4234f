"""Trace profiling with SkyWalking's Python agent (1.2.0): a task created
through the query protocol reaches the agent, which dumps the thread of each
slow request and sends the dumps; the analysis finds the slow function."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import pytest
from playwright.sync_api import Browser, Page

from skyoap.deploy.cluster import LocalCluster, NodeProcess
from skyoap.model.records import ProfileSnapshotRecord, SegmentRecord
from skyoap.proto.skywalking import common_pb2, profile_pb2
from skyoap.storage.api import RecordSearch
from skyoap.storage.select import open_storage
from skyoap.wiring.config import NodeConfig
from skyoap.wiring.node import Node
from tests.integration.browser import VIEWPORT, open_page, redrawn
from tests.integration.helpers import command, eventually, storage_argv
from tests.integration.test_query_agents import AGENT_PYTHON, SHOP, b64, get, start_app
from tests.integration.test_query_endpoint import ask

CREATE = """mutation($r: ProfileTaskCreationRequest) {
    task: createProfileTask(creationRequest: $r) { id errorReason }
}"""
TASKS = """query($s: ID, $e: String) {
    tasks: getProfileTaskList(serviceId: $s, endpointName: $e) {
        id serviceId serviceName endpointName startTime duration minDurationThreshold dumpPeriod
        maxSamplingCount logs { instanceId instanceName operationType }
    }
}"""
SEGMENTS = """query($t: ID!) {
    segments: getProfileTaskSegments(taskID: $t) {
        traceId instanceName endpointNames duration
        spans { spanId segmentId serviceCode endpointName type profiled startTime endTime }
    }
}"""
ANALYZE = """query($q: [SegmentProfileAnalyzeQuery!]!) {
    analysis: getSegmentsProfileAnalyze(queries: $q) {
        tip trees { elements { id parentId codeSignature duration durationChildExcluded count } }
    }
}"""


SAMPLES = 5
"""The requests a task profiles on an instance, at most (the UI's form's default)."""


class Asker:
    def __init__(self, node: Node) -> None:
        assert node.query_url is not None
        self.url = node.query_url

    def __call__(self, query: str, **variables: Any) -> Any:
        reply = ask(self.url, query, variables)
        assert reply.status == 200, reply.body
        assert "errors" not in reply.body, reply.body["errors"]
        return reply.body["data"]


@pytest.fixture
def shop(node_config: NodeConfig, start_node: Callable[[NodeConfig], Node]) -> Iterator[tuple[Node, int]]:
    assert AGENT_PYTHON.exists(), (
        "run deploy/install.sh: it installs SkyWalking's Python agent in .venv-agent"
    )
    node = start_node(node_config.with_options(metrics_persist_interval_s=0.5, metrics_l1_flush_period_s=0.2))
    app, port = start_app(
        "shop", node, STOCK_URL="http://127.0.0.1:1", SW_AGENT_PROFILE_ACTIVE="True",
        SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL="1",
    )  # fmt: skip
    try:
        yield node, port
    finally:
        assert app.stdin is not None and app.stderr is not None
        app.stdin.close()
        errors = app.stderr.read()
        assert app.wait(60) == 0, errors[-4000:]


def request(**fields: Any) -> dict[str, Any]:
    return {
        "serviceId": SHOP, "endpointName": "/price", "duration": 1, "minDurationThreshold": 0,
        "dumpPeriod": 10, "maxSamplingCount": SAMPLES, **fields,
    }  # fmt: skip


def test_a_task_made_in_the_ui_profiles_the_slow_function_of_an_endpoint(
    shop: tuple[Node, int], browser: Browser, shots: Path
) -> None:
    node, port = shop
    ask = Asker(node)
    assert node.ui_url is not None
    page = browser.new_page(viewport=VIEWPORT)
    try:
        # The UI's form creates the task (the endpoint is given by the link an endpoint's page has).
        open_page(page, f"{node.ui_url}#/profiling?service={SHOP}&endpoint=/price", "profiling")
        page.fill("form.search input[name=minutes]", "1")
        redrawn(page, "profiling", lambda: page.click("form.search button"))
        task_id = ask(TASKS, s=SHOP)["tasks"][0]["id"]
        assert page.locator("ol.tasks li.chosen").get_attribute("data-task") == task_id
        page.click("form.search button")  # again: refused, saying why
        refused = page.locator("main p.error").text_content()
        assert refused == f"No task: {ask(CREATE, r=request())['task']['errorReason']}"
        profile(node, port, task_id, page, shots)
    finally:
        page.close()


def profile(node: Node, port: int, task_id: str, page: Page, shots: Path) -> None:
    """What the task of ``task_id`` on shop's /price finds, asked, printed and drawn."""
    ask = Asker(node)
    # One task at a time for a service, and SkyWalking's bounds, refused with why.
    refusals = [
        ask(CREATE, r=request())["task"]["errorReason"],
        ask(CREATE, r=request(duration=16))["task"]["errorReason"],
        ask(CREATE, r=request(maxSamplingCount=10))["task"]["errorReason"],
    ]
    assert refusals[0].startswith("shop has a profiling task from ")
    assert refusals[0].endswith(f"({task_id}): an agent runs one task at a time")
    assert refusals[1:] == [
        "the duration must be 1 to 15 minutes, not 16",
        "the maximum sampling count must be 1 to 9, not 10",
    ]

    def notified() -> bool:
        (task,) = ask(TASKS, s=SHOP, e="/price")["tasks"]
        return task["logs"] == [
            {"instanceId": f"{SHOP}_{b64('shop-1')}", "instanceName": "shop-1", "operationType": "NOTIFIED"}
        ]

    eventually(notified, timeout_s=60)

    # The agent starts the task a moment after it is given it, and profiles
    # at most 5 requests (maxSamplingCount): ask until 5 are, then no more are.
    made = 0

    def profiled() -> list[dict[str, Any]]:
        nonlocal made
        assert get(f"http://127.0.0.1:{port}/price") == 200
        made += 1
        segments: list[dict[str, Any]] = ask(SEGMENTS, t=task_id)["segments"]
        return segments if len(segments) == SAMPLES else []

    segments = eventually(profiled, timeout_s=120, interval_s=0.5)
    for _ in range(3):  # while the task runs (a minute): stored, none of them profiled
        assert get(f"http://127.0.0.1:{port}/price") == 200
    made += 3
    eventually(lambda: stored_requests(node, "/price") == made, timeout_s=60)
    assert ask(SEGMENTS, t=task_id)["segments"] == segments
    assert {(s["instanceName"], tuple(s["endpointNames"])) for s in segments} == {("shop-1", ("/price",))}
    spans = [s["spans"][0] for s in segments]
    assert {(x["serviceCode"], x["endpointName"], x["type"], x["profiled"]) for x in spans} == {
        ("shop", "/price", "Entry", True),
    }  # fmt: skip

    def analyzed(span: dict[str, Any]) -> dict[str, Any]:
        window = {"start": span["startTime"], "end": span["endTime"]}
        analysis: dict[str, Any] = ask(ANALYZE, q=[{"segmentId": span["segmentId"], "timeRange": window}])
        return analysis["analysis"]

    # Every profiled request was caught in the slow function, under the request's entry.
    analyses = [(x, analyzed(x)) for x in spans]
    frames = [slow_frame(analysis) for _, analysis in analyses]
    # Its share of the time is held in the request whose dumps span the longest
    # time alone: on a busy machine the agent's dumping thread may be let run
    # only now and then, so another request may have a single dump, taken as
    # the function returned. Without the analysis, none would have the share.
    (span, _), (root, slow) = max(zip(analyses, frames, strict=True), key=lambda pair: pair[1][0]["duration"])
    assert root["duration"] > 0 and root["count"] >= 2
    assert slow["duration"] * 3 >= root["duration"] * 2, (slow, root)
    assert slow["durationChildExcluded"] == slow["duration"]

    # skyoap's CLI prints the same tree, each frame under its parent.
    code, printed = command("profile", "analyze", task_id, *storage_argv(node.config.storage))
    assert code == 0
    first = printed.index(next(p for p in printed if p.startswith(f"segment {span['segmentId']} of trace ")))
    block = printed[first : printed.index("", first)]
    (line,) = [p for p in block if ".price_the_basket_slowly: " in p]
    assert line.split()[:3] == [str(slow["duration"]), str(slow["durationChildExcluded"]), str(slow["count"])]
    assert sum(p.startswith("segment ") for p in printed) == SAMPLES

    # The UI draws the same tree, as a flame graph and as a table.
    open_page(page, f"{node.ui_url}#/profiling?service={SHOP}&task={task_id}", "profiling")
    assert len(page.locator("table.segments tbody tr").all()) == SAMPLES
    redrawn(page, "profiling", lambda: page.click(f"table.segments tr[data-segment='{span['segmentId']}'] a"))
    frame = page.locator(".flame .frame", has_text="price_the_basket_slowly")
    assert [frame.get_attribute(k) for k in ("data-duration", "data-self", "data-count")] == [
        str(slow["duration"]), str(slow["durationChildExcluded"]), str(slow["count"]),
    ]  # fmt: skip
    page.screenshot(path=shots / "profiling.png", full_page=True)
    redrawn(page, "profiling", lambda: page.locator("p.views a", has_text="table").click())
    row = page.locator("table.frames tr", has_text="price_the_basket_slowly").locator("td")
    assert [row.nth(i).text_content() for i in (1, 2, 3)] == [
        str(slow["duration"]), str(slow["durationChildExcluded"]), str(slow["count"]),
    ]  # fmt: skip

    # The dumps are stored with their task and segment.
    storage = open_storage(node.config.storage)
    try:
        search = RecordSearch(equal={"segment_id": span["segmentId"]}, limit=10_000)
        dumps = storage.records.search(ProfileSnapshotRecord, search)
    finally:
        storage.close()
    assert {(d.task_id, d.service) for d in dumps} == {(task_id, "shop")}
    assert sorted(d.sequence for d in dumps) == list(range(len(dumps)))
    assert len(dumps) == root["count"]

    # The agent says when the task (one minute) is over.
    def finished() -> bool:
        (task,) = ask(TASKS, s=SHOP)["tasks"]
        return [g["operationType"] for g in task["logs"]] == ["NOTIFIED", "EXECUTION_FINISHED"]

    eventually(finished, timeout_s=120)


@pytest.mark.parametrize("node_config", ["embedded"], indirect=True)
def slow_frame(analysis: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The root frame of a profiled request's one tree, and the slow
    function's, which must be under the request's entry (``do_GET``)."""
    assert analysis["tip"] is None
    (tree,) = analysis["trees"]
    elements = {e["id"]: e for e in tree["elements"]}
    (root,) = [e for e in elements.values() if e["parentId"] == "0"]
    (slow,) = [e for e in elements.values() if ".price_the_basket_slowly: " in e["codeSignature"]]
    ancestors = []
    parent = slow["parentId"]
    while parent != "0":
        ancestors.append(elements[parent]["codeSignature"])
        parent = elements[parent]["parentId"]
    assert any(".do_GET: " in a for a in ancestors), ancestors
    return root, slow


def stored_requests(node: Node, endpoint: str) -> int:
    """The segments of shop's ``endpoint`` stored."""
    storage = open_storage(node.config.storage)
    try:
        search = RecordSearch(equal={"service": "shop", "endpoint": endpoint}, limit=10_000)
        return len(storage.records.search(SegmentRecord, search))
    finally:
        storage.close()


def test_each_instance_is_given_a_task_until_it_has_it_and_bad_dumps_are_refused(
    node_config: NodeConfig, start_node: Callable[[NodeConfig], Node]
) -> None:
    node = start_node(node_config)
    ask = Asker(node)
    where = storage_argv(node_config.storage)
    settings = ["--minutes", "2", "--min-duration-ms", "5", "--dump-period-ms", "20"]
    code, (task_id,) = command(
        "profile", "create", "--service", "shop", "--endpoint", "/price", *settings, *where
    )
    assert code == 0
    assert command("profile", "create", "--service", "shop", "--endpoint", "/buy", *where) == (
        1, [f"no task: {ask(CREATE, r=request())['task']['errorReason']}"],
    )  # fmt: skip
    created = int(task_id.partition("_")[0])
    with grpc.insecure_channel(node.address) as channel:
        poll = channel.unary_unary(
            "/skywalking.v3.ProfileTask/getProfileTaskCommands",
            request_serializer=profile_pb2.ProfileTaskCommandQuery.SerializeToString,
            response_deserializer=common_pb2.Commands.FromString,
        )

        def commands(instance: str, last: int = 0) -> list[dict[str, str]]:
            query = profile_pb2.ProfileTaskCommandQuery(
                service="shop", serviceInstance=instance, lastCommandTime=last
            )
            return [
                {"command": c.command, **{a.key: a.value for a in c.args}}
                for c in poll(query, timeout=10).commands
            ]

        (given,) = commands("shop-1")
        (listed,) = ask(TASKS, s=SHOP)["tasks"]  # made without a start: it starts when it is made
        assert listed["startTime"] == created
        assert given == {
            "command": "ProfileTaskQuery", "SerialNumber": task_id, "TaskId": task_id,
            "EndpointName": "/price", "Duration": "2", "MinDurationThreshold": "5", "DumpPeriod": "20",
            "MaxSamplingCount": "5", "StartTime": str(created), "CreateTime": str(created),
        }  # fmt: skip
        assert commands("shop-1") == [given]  # it does not say it has it yet
        assert commands("shop-1", last=created) == []
        assert commands("shop-2") == [given]
        # The answer ends with the first refusal's reason; the good dump is kept.
        now = int(time.time() * 1000)
        dumps = [
            profile_pb2.ThreadSnapshot(
                taskId=task_id, traceSegmentId="seg-1", time=now, sequence=0,
                stack=profile_pb2.ThreadStack(codeSignatures=["main", "handle"]),
            ),
            profile_pb2.ThreadSnapshot(taskId=f"1_{SHOP}", traceSegmentId="seg-1", time=now, sequence=1),
            profile_pb2.ThreadSnapshot(taskId=task_id, traceSegmentId="seg-1", time=now, sequence=6001),
            profile_pb2.ThreadSnapshot(
                taskId=task_id, traceSegmentId="seg-1", time=now, sequence=2,
                stack=profile_pb2.ThreadStack(codeSignatures=["f"] * 1001),
            ),
        ]  # fmt: skip
        collect = channel.stream_unary(
            "/skywalking.v3.ProfileTask/collectSnapshot",
            request_serializer=profile_pb2.ThreadSnapshot.SerializeToString,
            response_deserializer=common_pb2.Commands.FromString,
        )
        with pytest.raises(grpc.RpcError) as refused:
            collect(iter(dumps), timeout=10)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert refused.value.details() == (
            "3 profiles refused (2 over_limit, 1 unknown_task; the first: there is no profiling task "
            f"'1_{SHOP}'); the other 1 were taken"
        )
        channel.unary_unary(
            "/skywalking.v3.ProfileTask/reportTaskFinish",
            request_serializer=profile_pb2.ProfileTaskFinishReport.SerializeToString,
            response_deserializer=common_pb2.Commands.FromString,
        )(
            profile_pb2.ProfileTaskFinishReport(service="shop", serviceInstance="shop-1", taskId=task_id),
            timeout=10,
        )
    (task,) = ask(TASKS, s=SHOP)["tasks"]
    assert [(g["instanceName"], g["operationType"]) for g in task["logs"]] == [
        ("shop-1", "NOTIFIED"), ("shop-2", "NOTIFIED"), ("shop-1", "EXECUTION_FINISHED"),
    ]  # fmt: skip

    def stored() -> list[tuple[str, int, str]]:
        storage = open_storage(node.config.storage)
        try:
            found = storage.records.search(ProfileSnapshotRecord, RecordSearch(equal={"task_id": task_id}))
        finally:
            storage.close()
        return [(d.segment_id, d.sequence, str(d.stack)) for d in found]

    assert eventually(stored) == [("seg-1", 0, '["main", "handle"]')]

    def published() -> list[tuple[str, str, int]]:
        storage = open_storage(node.config.storage)
        try:
            entries = [
                r for b in storage.topics.bounds("profile")
                for r in storage.topics.read("profile", b.partition, b.start, 100).records
            ]  # fmt: skip
        finally:
            storage.close()
        return [(r.key, r.value["task_id"], r.value["sequence"]) for r in entries]

    # Published on the profile topic, for consumers and Spark.
    assert eventually(published) == [("seg-1/0", task_id, 0)]


def test_a_task_made_on_one_node_reaches_the_agents_polling_others(
    local_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = local_cluster()
    cluster.add("aggregator")
    receivers = [cluster.add("receiver") for _ in range(2)]
    made = ask(receivers[0].query, CREATE, {"r": request()})
    task_id = made.body["data"]["task"]["id"]

    def poll(node: NodeProcess, instance: str) -> list[str]:
        with grpc.insecure_channel(node.address) as channel:
            answer = channel.unary_unary(
                "/skywalking.v3.ProfileTask/getProfileTaskCommands",
                request_serializer=profile_pb2.ProfileTaskCommandQuery.SerializeToString,
                response_deserializer=common_pb2.Commands.FromString,
            )(profile_pb2.ProfileTaskCommandQuery(service="shop", serviceInstance=instance), timeout=10)
        return [a.value for c in answer.commands for a in c.args if a.key == "TaskId"]

    # Each receiver's agents, polling at once: each node logs its instance in the shared document.
    pods = [(receivers[i % 2], f"shop-{i}") for i in range(6)]
    with ThreadPoolExecutor(len(pods)) as pool:
        given = list(pool.map(lambda pod: poll(*pod), pods))
    assert given == [[task_id]] * 6
    listed = ask(receivers[1].query, TASKS, {"s": SHOP}).body["data"]["tasks"]
    assert sorted(g["instanceName"] for g in listed[0]["logs"]) == [f"shop-{i}" for i in range(6)]
