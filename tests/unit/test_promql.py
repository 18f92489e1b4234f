"""SkyWalking's PromQL service over stored metrics (the rows of
``test_query_reads``: shop takes 10 calls at 10:00, one failing, and 30 at
10:02; pay::checkout 5 at 10:00; shop's /pay 2 at 10:00 and 6 at 10:01),
answered as Prometheus's query API answers: the envelope, the result types,
SkyWalking's labels, and a reason for each query it cannot answer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from skyoap.query.context import QueryContext
from skyoap.query.promql.api import PromQLApi
from skyoap.storage.select import OpenStorage
from skyoap.vocabulary.ttl import TimesToLive
from tests.unit.test_query_reads import storage as reads_storage

T = 1_795_514_400
"""10:00 UTC, in seconds: the first minute of the rows."""
SHOP = "service='shop', layer='GENERAL'"
SHOP_LABELS = {"layer": "GENERAL", "scope": "Service", "service": "shop"}

storage = reads_storage


@pytest.fixture
def api(storage: OpenStorage) -> Iterator[PromQLApi]:
    yield PromQLApi(
        QueryContext(storage.inventory, storage.metrics, storage.records, TimesToLive(3, 1, 7, 90, 7, 7))
    )


def ask(api: PromQLApi, endpoint: str, **params: Any) -> tuple[int, Any]:
    """The status and the JSON body of ``endpoint`` asked with ``params``
    (``match`` stands for ``match[]``; a list, for a repeated parameter)."""
    given = {
        ("match[]" if k == "match" else k): (v if isinstance(v, list) else [str(v)])
        for k, v in params.items()
    }
    reply = api.answer(f"/api/v1/{endpoint}", given)
    return reply.status, json.loads(reply.body)


def data(api: PromQLApi, endpoint: str, **params: Any) -> Any:
    status, body = ask(api, endpoint, **params)
    assert (status, body["status"]) == (200, "success"), body
    return body["data"]


def instant(api: PromQLApi, query: str, at: float) -> list[tuple[dict[str, str], str]]:
    found = data(api, "query", query=query, time=at)
    assert found["resultType"] == "vector"
    assert all(r["value"][0] == at for r in found["result"])
    return [(r["metric"], r["value"][1]) for r in found["result"]]


def test_a_selector_reads_a_metric_with_skywalkings_labels(api: PromQLApi) -> None:
    assert instant(api, f"service_cpm{{{SHOP}}}", T + 30) == [
        ({"__name__": "service_cpm", **SHOP_LABELS}, "10")
    ]
    # An instant query looks two minutes back: 10:01 has no row, so 10:00's value stands.
    assert instant(api, f"service_cpm{{{SHOP}}}", T + 90) == [
        ({"__name__": "service_cpm", **SHOP_LABELS}, "10")
    ]
    assert instant(api, f"service_cpm{{{SHOP}}}", T + 200) == [
        ({"__name__": "service_cpm", **SHOP_LABELS}, "30")
    ]
    assert instant(api, f"service_sla{{{SHOP}}}", T) == [({"__name__": "service_sla", **SHOP_LABELS}, "9000")]
    percentiles = instant(api, f"service_percentile{{{SHOP}, p='50,99'}}", T)
    assert percentiles == [
        ({"__name__": "service_percentile", "p": "50", **SHOP_LABELS}, "20"),
        ({"__name__": "service_percentile", "p": "99", **SHOP_LABELS}, "20"),
    ]
    endpoint = instant(api, "endpoint_cpm{service='shop', endpoint='/pay', layer='GENERAL'}", T + 60)
    pay = {"__name__": "endpoint_cpm", "endpoint": "/pay", "layer": "GENERAL", "scope": "Endpoint"}
    assert endpoint == [({**pay, "service": "shop"}, "6")]


def test_a_range_query_answers_each_step_by_the_bucket_holding_it(api: PromQLApi) -> None:
    found = data(api, "query_range", query=f"service_cpm{{{SHOP}}}", start=T, end=T + 240, step="60")
    # 10:01, 10:03 and 10:04 have no row: no point (a range query does not look back).
    assert found == {
        "resultType": "matrix",
        "result": [
            {"metric": {"__name__": "service_cpm", **SHOP_LABELS}, "values": [[T, "10"], [T + 120, "30"]]}
        ],
    }
    # Every 30 s, the steps within a minute share its bucket's value.
    half = data(api, "query_range", query=f"service_cpm{{{SHOP}}} / 10", start=T, end=T + 150, step="30s")
    assert half["result"] == [{"metric": SHOP_LABELS, "values": [[T, "1"], [T + 30, "1"], [T + 120, "3"],
                                                                [T + 150, "3"]]}]  # fmt: skip
    # A scalar over a range is a series of no labels.
    assert data(api, "query_range", query="1 + 1", start=T, end=T + 60, step="60")["result"] == [
        {"metric": {}, "values": [[T, "2"], [T + 60, "2"]]}
    ]


def test_expressions_combine_and_aggregate_series(api: PromQLApi) -> None:
    both = f"service_cpm{{{SHOP}}} or service_cpm{{service='pay::checkout', layer='GENERAL'}}"
    assert instant(api, f"sum by (layer) ({both})", T) == [({"layer": "GENERAL"}, "15")]
    assert instant(api, f"count({both})", T) == [({}, "2")]
    assert instant(api, f"max without (service) ({both})", T) == [
        ({"layer": "GENERAL", "scope": "Service"}, "10")
    ]
    assert [m["service"] for m, _ in instant(api, f"topk(1, {both})", T)] == ["shop"]
    assert [m["service"] for m, _ in instant(api, f"bottomk(1, {both})", T)] == ["pay::checkout"]
    assert [v for _, v in instant(api, f"sort({both})", T)] == ["5", "10"]
    # Arithmetic drops the name; a comparison filters, or with bool answers 0 or 1.
    assert instant(api, f"service_sla{{{SHOP}}} / 100", T) == [(SHOP_LABELS, "90")]
    assert instant(api, f"{both} > 6", T) == [({"__name__": "service_cpm", **SHOP_LABELS}, "10")]
    assert instant(api, f"service_cpm{{{SHOP}}} < bool 6", T) == [(SHOP_LABELS, "0")]
    # Series are matched by their labels but the name.
    ratio = f"service_cpm{{{SHOP}}} / service_sla{{{SHOP}}}"
    assert instant(api, ratio, T) == [(SHOP_LABELS, str(10 / 9000))]
    assert instant(api, f"abs(-service_cpm{{{SHOP}}})", T) == [(SHOP_LABELS, "10")]
    seventh = f"service_sla{{{SHOP}}} / 7"  # 1285.71…
    rounded = [f"ceil({seventh})", f"floor({seventh})", f"round({seventh})", f"round({seventh}, 10)"]
    assert [instant(api, r, T)[0][1] for r in rounded] == ["1286", "1285", "1286", "1290"]
    assert [v for _, v in instant(api, f"sort_desc({both})", T)] == ["10", "5"]
    shop = f"service_cpm{{{SHOP}}}"
    assert [m["service"] for m, _ in instant(api, f"({both}) and {shop}", T)] == ["shop"]
    assert [m["service"] for m, _ in instant(api, f"({both}) unless {shop}", T)] == ["pay::checkout"]
    over_time = f"sum_over_time(service_cpm{{{SHOP}}}[5m])"
    assert instant(api, over_time, T + 240) == [(SHOP_LABELS, "40")]
    renamed = f'label_replace(service_cpm{{{SHOP}}}, "app", "$1-app", "service", "(.*)")'
    assert instant(api, renamed, T) == [({"__name__": "service_cpm", "app": "shop-app", **SHOP_LABELS}, "10")]


def test_a_top_list_ranks_entities_as_skywalking_sorts_metrics(api: PromQLApi) -> None:
    top = instant(api, "service_cpm{layer='GENERAL', top_n='10', order='DES'}", T)
    assert top == [
        ({"__name__": "service_cpm", **SHOP_LABELS}, "10"),
        ({"__name__": "service_cpm", **SHOP_LABELS, "service": "pay::checkout"}, "5"),
    ]
    endpoints = instant(
        api, "endpoint_cpm{parent_service='shop', layer='GENERAL', top_n='1', order='ASC'}", T
    )
    pay = {"__name__": "endpoint_cpm", "endpoint": "/pay", "layer": "GENERAL", "scope": "Endpoint"}
    assert endpoints == [(pay, "2")]
    # Of every service, each with its service's name too: services may share endpoints' names.
    busiest = instant(api, "endpoint_cpm{layer='GENERAL', top_n='1', order='DES'}", T)
    assert busiest == [({**pay, "endpoint": "/orders", "service": "shop"}, "8")]


def test_a_range_selector_answers_its_buckets(api: PromQLApi) -> None:
    found = data(api, "query", query=f"service_cpm{{{SHOP}}}[5m]", time=T + 240)
    assert found == {
        "resultType": "matrix",
        "result": [
            {"metric": {"__name__": "service_cpm", **SHOP_LABELS}, "values": [[T, "10"], [T + 120, "30"]]}
        ],
    }


def test_services_instances_and_endpoints_are_listed_as_skywalking_lists_them(api: PromQLApi) -> None:
    assert data(api, "series", match="service_traffic{layer='GENERAL'}", start=T, end=T + 60) == [
        {"__name__": "service_traffic", "service": "pay::checkout", "scope": "Service", "layer": "GENERAL"},
        {"__name__": "service_traffic", "service": "shop", "scope": "Service", "layer": "GENERAL"},
    ]
    # Grafana's label_values(service_traffic{layer='GENERAL'}, service), and its other variables.
    assert data(api, "label/service/values", match="service_traffic{layer='GENERAL'}") == [
        "pay::checkout",
        "shop",
    ]
    # The instances alive since the start asked (shop-2 was last seen the day before).
    instances = "instance_traffic{layer='GENERAL', service='shop'}"
    assert data(api, "label/service_instance/values", match=instances, start=T - 60, end=T + 60) == ["shop-1"]
    endpoints = "endpoint_traffic{layer='GENERAL', service='shop', keyword='pa', limit='20'}"
    assert data(api, "label/endpoint/values", match=endpoints) == ["/pay"]
    assert data(api, "labels", match="service_percentile") == ["layer", "order", "p", "service", "top_n"]
    assert data(api, "label/p/values", match="service_percentile") == ["50", "75", "90", "95", "99"]
    assert "GENERAL" in data(api, "label/layer/values")
    names = data(api, "label/__name__/values")
    assert {"service_cpm", "endpoint_percentile", "service_relation_server_cpm"} <= set(names)
    assert data(api, "metadata", metric="service_cpm") == {
        "service_cpm": [{"type": "gauge", "help": "", "unit": ""}]
    }
    assert data(api, "status/buildinfo")["version"] == "2.45.0"


@pytest.mark.parametrize(
    ("endpoint", "params", "error"),
    [
        ("query", {"query": "service_cpm{service='shop'}"}, "Metrics expression missing label: layer"),
        ("query", {"query": "service_cpm{layer='GENERAL'}"}, "Metrics expression missing label: service"),
        ("query", {"query": "service_nope{layer='GENERAL'}"}, "Metric: [service_nope] does not exist."),
        ("query", {"query": "service_cpm{service=~'sh.*', layer='GENERAL'}"},
         "label service is matched with =~: a metric's labels are matched with = (several values of a "
         "labelled value separated by commas)"),
        ("query", {"query": f"rate(service_cpm{{{SHOP}}}[5m])"},
         "rate reads counters; skyoap's metrics are values per bucket (service_cpm is already calls per "
         "minute): use sum_over_time, avg_over_time or the metric itself"),
        ("query", {"query": f"service_cpm{{{SHOP}}} offset 5m"},
         "offset and @ are not supported: ask for the time the query is evaluated at"),
        ("query", {"query": "1 > 2"},
         "the query cannot be parsed: comparisons between scalars must use BOOL modifier"),
        ("query", {"query": "service_cpm{"}, None),
        ("query", {}, "missing parameter 'query'"),
        ("query", {"query": "1", "time": "yesterday"},
         "invalid parameter 'time': cannot parse 'yesterday' to a valid timestamp"),
        ("query_range", {"query": "1", "start": T, "end": T + 60, "step": "0"},
         "zero or negative query resolution step widths are not accepted. Try a positive integer"),
        ("query_range", {"query": "1", "start": T, "end": T + 86_400, "step": "1"},
         "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution "
         "(?step=XX)"),
        ("query_range", {"query": f"service_cpm{{{SHOP}}}[5m]", "start": T, "end": T + 60, "step": "60"},
         "a range query asks an instant vector or a scalar, not a range vector: leave out the [range]"),
        ("series", {}, "no match[] parameter provided"),
        ("label/service/values", {"match": "service_traffic{service='shop'}"},
         "label {layer} should not be empty. (service_traffic)"),
    ],
)  # fmt: skip
def test_what_cannot_be_answered_is_bad_data_with_why(
    api: PromQLApi, endpoint: str, params: dict[str, Any], error: str | None
) -> None:
    status, body = ask(api, endpoint, **params)
    assert (status, body["status"], body["errorType"]) == (400, "error", "bad_data")
    if error is None:
        assert body["error"].startswith("the query cannot be parsed: ")
    else:
        assert body["error"] == error


def test_an_answer_past_the_bound_is_refused(storage: OpenStorage) -> None:
    small = PromQLApi(
        QueryContext(storage.inventory, storage.metrics, storage.records, TimesToLive(3, 1, 7, 90, 7, 7)), 200
    )
    status, body = ask(small, "query_range", query=f"service_cpm{{{SHOP}}}", start=T, end=T + 3000, step="1")
    assert (status, body["errorType"]) == (422, "execution")
    assert body["error"] == (
        "the answer would be larger than the 200 bytes this node sends (--query-max-answer-bytes): ask for "
        "fewer series, a shorter range or a longer step"
    )


def test_an_unknown_endpoint_is_not_found(api: PromQLApi) -> None:
    status, body = ask(api, "alerts")
    assert (status, body["errorType"]) == (404, "not_found")


def test_labels_without_a_match_are_skywalkings(api: PromQLApi) -> None:
    labels = data(api, "labels")
    assert {"layer", "service", "service_instance", "endpoint", "dest_service", "top_n", "order"} <= set(
        labels
    )
