"""Trace profiling on the query side, over a real embedded storage: tasks
created with SkyWalking's bounds and listed, and the analysis of the dumps
as SkyWalking computes it (durations over runs of consecutive dumps)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import graphql
import pytest

from skyoap.model.metrics import minute_bucket
from skyoap.model.records import RECORD_TYPES, ProfileSnapshotRecord
from skyoap.model.stream import Text
from skyoap.query.context import QueryContext
from skyoap.query.resolvers import resolvers
from skyoap.runtime import clock
from skyoap.storage.config import StorageConfig, StorageKind
from skyoap.storage.select import OpenStorage, open_storage
from skyoap.vocabulary.ttl import TimesToLive

SHOP = "c2hvcA==.1"
ANALYZE = """query($q: [SegmentProfileAnalyzeQuery!]!) {
    analysis: getSegmentsProfileAnalyze(queries: $q) {
        tip trees { elements { id parentId codeSignature duration durationChildExcluded count } }
    }
}"""
CREATE = """mutation($r: ProfileTaskCreationRequest) {
    task: createProfileTask(creationRequest: $r) { id errorReason }
}"""
TASKS = """query queryData($endpointName: String, $serviceId: ID) {
  taskList: getProfileTaskList(endpointName: $endpointName, serviceId: $serviceId) {
    serviceId endpointName startTime duration minDurationThreshold dumpPeriod maxSamplingCount id
    logs { id instanceId instanceName operationType operationTime }
  }
}"""
"""What SkyWalking's UI (booster-ui 10) asks."""


def dump(segment: str, sequence: int, time: int, *stack: str) -> ProfileSnapshotRecord:
    return ProfileSnapshotRecord(
        time_bucket=minute_bucket(time), snapshot_id=f"{segment}/{sequence}", task_id="t", segment_id=segment,
        service="shop", dump_time=time, sequence=sequence, stack=Text(json.dumps(stack)),
    )  # fmt: skip


T = 1_795_514_400_000
DUMPS = [
    *(dump("s1", n, T + 10 * n, "main", "handle", "price") for n in (0, 1, 2)),
    dump("s1", 3, T + 30, "main", "handle", "log"),
    # dump 4 was not taken (the request was not running then): 5 starts another run
    *(dump("s1", n, T + 10 * n, "main", "handle", "price") for n in (5, 6)),
    *(dump("s2", n, T + 4000 + 10 * n, "main", "handle", "price") for n in (0, 1)),
    dump("s2", 2, T + 4020, "worker", "flush"),
]


@pytest.fixture
def storage(tmp_path: Path) -> Iterator[OpenStorage]:
    opened = open_storage(StorageConfig(kind=StorageKind.EMBEDDED, embedded_path=str(tmp_path / "s.db")))
    opened.records.install(RECORD_TYPES)
    assert opened.records.insert(ProfileSnapshotRecord, DUMPS) == {}
    yield opened
    opened.close()


def ask(storage: OpenStorage, query: str, **variables: Any) -> Any:
    context = QueryContext(
        storage.inventory, storage.metrics, storage.records, TimesToLive(3, 1, 7, 90, 7, 7), storage.state
    )
    binder = resolvers()
    result = graphql.graphql_sync(
        binder.schema, query, variable_values=variables, context_value=context, field_resolver=binder.resolve
    )
    assert not result.errors, result.errors
    return result.data


def elements(analysis: dict[str, Any]) -> list[list[tuple[str, str, str, int, int, int]]]:
    return [
        [
            (
                e["id"],
                e["parentId"],
                e["codeSignature"],
                e["duration"],
                e["durationChildExcluded"],
                e["count"],
            )
            for e in tree["elements"]
        ]
        for tree in analysis["trees"]
    ]


def test_frames_last_over_their_runs_of_consecutive_dumps_in_each_segment(storage: OpenStorage) -> None:
    whole = {"start": T, "end": T + 10_000}
    queries = [{"segmentId": "s1", "timeRange": whole}, {"segmentId": "s2", "timeRange": whole}]
    analysis = ask(storage, ANALYZE, q=queries)["analysis"]
    assert analysis["tip"] is None
    # main: s1's dumps 0-3 (30 ms) and 5-6 (10 ms), s2's 0-1 (10 ms); price: s1's 0-2, 5-6, s2's 0-1.
    assert elements(analysis) == [
        [
            ("1", "0", "main", 50, 0, 8),
            ("2", "1", "handle", 50, 10, 8),
            ("3", "2", "price", 40, 40, 7),
            ("4", "2", "log", 0, 0, 1),
        ],
        [("1", "0", "worker", 0, 0, 1), ("2", "1", "flush", 0, 0, 1)],
    ]


def test_the_time_range_bounds_the_dumps_analyzed(storage: OpenStorage) -> None:
    queries = [{"segmentId": "s1", "timeRange": {"start": T + 10, "end": T + 30}}]
    assert elements(ask(storage, ANALYZE, q=queries)["analysis"]) == [
        [
            ("1", "0", "main", 20, 0, 3),
            ("2", "1", "handle", 20, 10, 3),
            ("3", "2", "price", 10, 10, 2),
            ("4", "2", "log", 0, 0, 1),
        ]
    ]
    nothing = ask(storage, ANALYZE, q=[{"segmentId": "s9", "timeRange": {"start": T, "end": T + 1}}])
    assert nothing["analysis"] == {
        "tip": "no thread dumps of these segments in these time ranges",
        "trees": [],
    }


def request(**fields: Any) -> dict[str, Any]:
    return {
        "serviceId": SHOP, "endpointName": "/price", "duration": 5, "minDurationThreshold": 100,
        "dumpPeriod": 10, "maxSamplingCount": 5, **fields,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"duration": 0}, "the duration must be 1 to 15 minutes, not 0"),
        ({"minDurationThreshold": -1}, "the minimum duration threshold must be at least 0 ms, not -1"),
        ({"dumpPeriod": 9}, "the dump period must be at least 10 ms, not 9"),
        ({"maxSamplingCount": 0}, "the maximum sampling count must be 1 to 9, not 0"),
        ({"endpointName": "  "}, "the endpoint name is empty"),
        ({"serviceId": "cmVkaXM6NjM3OQ==.0"}, "redis:6379 runs no agent to profile (it is a database, cache "
                                              "or broker its callers name)"),
    ],
)  # fmt: skip
def test_a_task_agents_cannot_run_is_refused_with_why(
    storage: OpenStorage, fields: dict[str, Any], reason: str
) -> None:
    assert ask(storage, CREATE, r=request(**fields))["task"] == {"id": None, "errorReason": reason}
    assert ask(storage, TASKS)["taskList"] == []


def test_a_task_asked_without_its_request_is_refused_with_why(storage: OpenStorage) -> None:
    refused = {"id": None, "errorReason": "createProfileTask needs a creationRequest"}
    assert ask(storage, CREATE, r=None)["task"] == refused


def test_tasks_are_listed_newest_first_by_service_and_endpoint(storage: OpenStorage) -> None:
    start = clock.now_ms() + 3_600_000
    first = ask(storage, CREATE, r=request(startTime=start))["task"]["id"]
    second = ask(storage, CREATE, r=request(startTime=start + 6 * 60_000, endpointName="/buy"))["task"]["id"]
    stock = ask(storage, CREATE, r=request(serviceId="c3RvY2s=.1", startTime=start))["task"]["id"]
    # The latest start first, then the latest made.
    assert [t["id"] for t in ask(storage, TASKS)["taskList"]] == [second, stock, first]
    assert [t["id"] for t in ask(storage, TASKS, serviceId=SHOP)["taskList"]] == [second, first]
    assert ask(storage, TASKS, serviceId=SHOP, endpointName="/price")["taskList"] == [
        {
            "id": first, "serviceId": SHOP, "endpointName": "/price",
            "startTime": start, "duration": 5, "minDurationThreshold": 100, "dumpPeriod": 10,
            "maxSamplingCount": 5, "logs": [],
        }
    ]  # fmt: skip
    assert first.endswith(f"_{SHOP}")
    assert int(second.partition("_")[0]) > int(first.partition("_")[0])  # made in the same ms, or not
