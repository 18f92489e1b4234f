"""SkyWalking's PromQL service: Prometheus's HTTP query API over skyoap's
metrics (``evaluation.py``), so that Grafana's Prometheus data source and
``promtool`` read them. Every endpoint takes its parameters in the query
string or (but ``label/<name>/values`` and ``metadata``) a form-encoded
POST body, and answers Prometheus's envelope: ``{"status": "success",
"data": ...}``, or ``{"status": "error", "errorType": "bad_data", "error":
why}`` with status 400 (``internal`` 500, ``not_found`` 404).

The services, instances and endpoints are listed as SkyWalking lists them,
as the series of ``service_traffic{layer}``, ``instance_traffic{layer,
service}`` and ``endpoint_traffic{layer, service}`` (what Grafana's
``label_values`` variables ask)."""

from __future__ import annotations

import datetime
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import promql_parser as pp

from skyoap.layers import CATALOGUE, KNOWN_BY_CALLERS
from skyoap.model.layers import LAYERS
from skyoap.mqe.stored import StoredMetrics
from skyoap.query import metadata
from skyoap.query.context import QueryContext
from skyoap.query.promql.evaluation import (
    LOOK_BACK_MS,
    NAME,
    RANKED_LABEL,
    RESERVED,
    BadData,
    Matrix,
    PromQL,
    Scalar,
    String,
    Times,
    Value,
    parse,
)
from skyoap.runtime import clock
from skyoap.vocabulary import ids
from skyoap.vocabulary.catalogue import PERCENTILE_LABEL, MetricsType
from skyoap.vocabulary.duration import SERVER_ZONE
from skyoap.vocabulary.entity import Scope

PREFIX = "/api/v1/"
MAX_POINTS = 11_000
"""Most points of a series a range query answers, as Prometheus bounds them."""
DEFAULT_LIMIT = 100
"""The services, instances or endpoints a listing answers unless told, as SkyWalking's."""
BUILD_INFO = {
    "version": "2.45.0",
    "revision": "",
    "branch": "",
    "buildUser": "",
    "buildDate": "",
    "goVersion": "",
}
"""What ``status/buildinfo`` answers: the Prometheus version whose API this one is (SkyWalking's)."""
TRAFFIC = {
    "service_traffic": "service",
    "instance_traffic": "service_instance",
    "endpoint_traffic": "endpoint",
}
"""SkyWalking's metadata "metrics" and the label each lists."""

Params = Mapping[str, Sequence[str]]


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes


def success(data: object) -> Reply:
    return Reply(200, _json({"status": "success", "data": data}))


def failure(status: int, error_type: str, error: str) -> Reply:
    return Reply(status, _json({"status": "error", "errorType": error_type, "error": error}))


def _json(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


class PromQLApi:
    """The endpoints, as ``answer(path, params)``: what a thread of the query
    endpoint runs for one request."""

    def __init__(self, context: QueryContext, max_answer_bytes: int = 16 * 2**20) -> None:
        self._context = context
        self._max_answer_bytes = max_answer_bytes
        self._routes: dict[str, Callable[[Params], object]] = {
            "query": self._query,
            "query_range": self._query_range,
            "series": self._series,
            "labels": self._labels,
            "metadata": self._metadata,
            "status/buildinfo": lambda _: BUILD_INFO,
        }

    def answer(self, path: str, params: Params) -> Reply:
        name = path.removeprefix(PREFIX)
        route = self._routes.get(name)
        if route is None and (label := re.fullmatch(r"label/([^/]+)/values", name)):
            route = lambda p: self._label_values(label.group(1), p)  # noqa: E731
        if route is None:
            return failure(404, "not_found", f"{path} is not an endpoint of the Prometheus query API")
        try:
            reply = success(route(params))
        except ValueError as e:  # BadData, or what the reads refuse (more services than are listed)
            return failure(400, "bad_data", str(e))
        if len(reply.body) > self._max_answer_bytes:
            return failure(
                422,
                "execution",
                f"the answer would be larger than the {self._max_answer_bytes} bytes this node sends "
                "(--query-max-answer-bytes): ask for fewer series, a shorter range or a longer step",
            )
        return reply

    def _reader(self) -> StoredMetrics:
        context = self._context.for_request()
        return StoredMetrics(context.metrics, context.shared, context.records)

    def _query(self, params: Params) -> dict[str, Any]:
        at = _time(_one(params, "time"), "time") if _one(params, "time") else clock.now_ms()
        times = Times((at,), LOOK_BACK_MS)
        value = PromQL(self._reader(), times).evaluate(parse(_required(params, "query")))
        return _instant(value, at)

    def _query_range(self, params: Params) -> dict[str, Any]:
        start, end = (_time(_required(params, k), k) for k in ("start", "end"))
        step = _step(_required(params, "step"))
        if end < start:
            raise BadData("end timestamp must not be before start time")
        if (end - start) // step + 1 > MAX_POINTS:
            raise BadData(
                f"exceeded maximum resolution of {MAX_POINTS:,} points per timeseries. "
                "Try decreasing the query resolution (?step=XX)"
            )
        times = Times(tuple(range(start, end + 1, step)))
        value = PromQL(self._reader(), times).evaluate(parse(_required(params, "query")))
        return _range(value, times)

    def _series(self, params: Params) -> list[dict[str, str]]:
        matches = params.get("match[]") or []
        if not matches:
            raise BadData("no match[] parameter provided")
        found: list[dict[str, str]] = []
        for text in matches:
            found += self._series_of(_selector(text), params)
        return found[: _limit(params, len(found) or 1)]

    def _series_of(self, selector: pp.VectorSelector, params: Params) -> list[dict[str, str]]:
        name, given = _name_and_labels(selector)
        if name in TRAFFIC:
            label = TRAFFIC[name]
            scope = _SCOPE_LISTED[label]
            return [
                {NAME: name, label: n, "scope": scope, "layer": given.get("layer", "")}
                for n in self._traffic(name, given, params)
            ]
        definition = CATALOGUE.get(name)
        if definition is None:
            raise BadData(f"Metric: [{name}] does not exist.")
        return [{NAME: name, **dict.fromkeys(_metric_labels(name), ""), "scope": definition.scope.value}]

    def _labels(self, params: Params) -> list[str]:
        matches = params.get("match[]") or []
        if not matches:
            return sorted(RESERVED | {"limit", "keyword", "record", "labels", "relabels", "label"})
        found: set[str] = set()
        for text in matches:
            name, _ = _name_and_labels(_selector(text))
            if name in TRAFFIC:
                found |= {"layer", "limit", TRAFFIC[name]} | (
                    {"service"} if name != "service_traffic" else set()
                )
                found |= {"keyword"} if name == "endpoint_traffic" else set()
            elif name in CATALOGUE:
                found |= set(_metric_labels(name))
            else:
                raise BadData(f"Metric: [{name}] does not exist.")
        return sorted(found)

    def _label_values(self, label: str, params: Params) -> list[str]:
        if label == NAME:
            return sorted(
                name
                for name, d in CATALOGUE.items()
                if d.measured and d.type is not MetricsType.SAMPLED_RECORD
            )
        if label == "layer":
            return sorted(LAYERS)
        if label == "scope":
            return sorted(s.value for s in Scope)
        found: list[str] = []
        for text in params.get("match[]") or []:
            name, given = _name_and_labels(_selector(text))
            if TRAFFIC.get(name) == label:
                found += self._traffic(name, given, params)
            elif label == PERCENTILE_LABEL and (d := CATALOGUE.get(name)) and d.label_columns:
                found += list(d.label_columns)
        return sorted(set(found), key=found.index)

    def _metadata(self, params: Params) -> dict[str, list[dict[str, str]]]:
        wanted = _one(params, "metric")
        names = sorted(
            n for n, d in CATALOGUE.items() if d.measured and d.type is not MetricsType.SAMPLED_RECORD
        )
        if wanted:
            names = [n for n in names if n == wanted]
        return {
            n: [{"type": "gauge", "help": "", "unit": ""}] for n in names[: _limit(params, len(names) or 1)]
        }

    def _traffic(self, name: str, given: Mapping[str, str], params: Params) -> list[str]:
        """The services, instances or endpoints ``name`` lists (``service_traffic``, …)."""
        layer = given.get("layer", "")
        if not layer:
            raise BadData(f"label {{layer}} should not be empty. ({name})")
        limit = min(_limit(params, DEFAULT_LIMIT), int(given.get("limit") or DEFAULT_LIMIT))
        context = self._context.for_request()
        if name == "service_traffic":
            return [s["name"] for s in metadata.list_services(context, layer)][:limit]
        service = given.get("service", "")
        if not service:
            raise BadData(f"label {{service}} should not be empty. ({name})")
        normal = layer not in KNOWN_BY_CALLERS
        if name == "instance_traffic":
            # Those alive (a heartbeat) since the start asked, or within the day before its end.
            end = _time(_one(params, "end"), "end") if _one(params, "end") else clock.now_ms()
            since = _time(_one(params, "start"), "start") if _one(params, "start") else end - _DAY_MS
            alive = {"start": _minute(since), "end": _minute(max(since, end)), "step": "MINUTE"}
            found = metadata.list_instances(context, alive, ids.service_id(service, normal))
            return [i["name"] for i in found][:limit]
        keyword = given.get("keyword") or None
        return [
            e["name"]
            for e in metadata.find_endpoint(context, ids.service_id(service, normal), limit, keyword)
        ]


_SCOPE_LISTED = {label: scope.value for scope, label in RANKED_LABEL.items()}
"""The scope of what each ``TRAFFIC`` label lists."""
_DAY_MS = 86_400_000


def _minute(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, SERVER_ZONE).strftime("%Y-%m-%d %H%M")


def _metric_labels(name: str) -> list[str]:
    """The labels a selector of metric ``name`` takes, as SkyWalking lists them."""
    definition = CATALOGUE[name]
    labels = ["layer", "service", "top_n", "order"]
    if definition.scope in (Scope.SERVICE_INSTANCE, Scope.ENDPOINT):
        labels += [
            "service_instance" if definition.scope is Scope.SERVICE_INSTANCE else "endpoint",
            "parent_service",
        ]
    if definition.scope in (Scope.SERVICE_RELATION, Scope.SERVICE_INSTANCE_RELATION, Scope.ENDPOINT_RELATION):
        labels = ["layer", "service", "dest_service", "dest_layer"]
    return labels + ([PERCENTILE_LABEL] if definition.label_columns else [])


def _selector(text: str) -> pp.VectorSelector:
    node = parse(text)
    if not isinstance(node, pp.VectorSelector):
        raise BadData(f"match[] must be a series selector, not {text!r}")
    return node


def _name_and_labels(node: pp.VectorSelector) -> tuple[str, dict[str, str]]:
    given = {m.name: m.value for m in node.matchers.matchers if m.op == pp.MatchOp.Equal}
    return node.name or given.pop(NAME, ""), given


def _one(params: Params, name: str) -> str:
    values = params.get(name) or [""]
    return values[-1]


def _required(params: Params, name: str) -> str:
    value = _one(params, name)
    if not value:
        raise BadData(f"missing parameter {name!r}")
    return value


def _limit(params: Params, default: int) -> int:
    text = _one(params, "limit")
    try:
        limit = int(text) if text else default
    except ValueError:
        raise BadData(f"limit must be a whole number, not {text!r}") from None
    return limit if limit > 0 else default


def _time(text: str, what: str) -> int:
    """A Prometheus time (seconds since the epoch, or RFC 3339) in epoch ms."""
    try:
        seconds = float(text)
        if math.isfinite(seconds):
            return round(seconds * 1000)
    except ValueError:
        try:
            return round(datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
        except ValueError:
            pass
    raise BadData(f"invalid parameter {what!r}: cannot parse {text!r} to a valid timestamp")


_DURATION = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")
_UNIT_MS = {
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
    "w": 604_800_000,
    "y": 31_536_000_000,
}


def _step(text: str) -> int:
    """A Prometheus step (seconds, or a duration: ``1m``) in ms, at least 1."""
    try:
        step = round(float(text) * 1000)
    except ValueError:
        parts = _DURATION.findall(text)
        if not parts or "".join(n + u for n, u in parts) != text:
            raise BadData(f"invalid parameter 'step': cannot parse {text!r} to a valid duration") from None
        step = sum(int(n) * _UNIT_MS[u] for n, u in parts)
    if step <= 0:
        raise BadData(
            "zero or negative query resolution step widths are not accepted. Try a positive integer"
        )
    return step


def _number(value: float) -> str:
    """A sample's value as Prometheus writes it."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return str(int(value)) if value == int(value) and abs(value) < 1e15 else repr(value)


def _instant(value: Value, at: int) -> dict[str, Any]:
    seconds = at / 1000
    if isinstance(value, Scalar):
        return {"resultType": "scalar", "result": [seconds, _number(value.values[0])]}
    if isinstance(value, String):
        return {"resultType": "string", "result": [seconds, value.value]}
    if isinstance(value, Matrix):
        result = [
            {
                "metric": dict(s.labels),
                "values": [[t / 1000, _number(v)] for t, v in s.points if at - value.range_ms < t <= at],
            }
            for s in value.series
        ]
        return {"resultType": "matrix", "result": [r for r in result if r["values"]]}
    series = value.series if value.ordered else sorted(value.series, key=lambda s: s.labels)
    vector: list[dict[str, Any]] = [
        {"metric": dict(s.labels), "value": [seconds, _number(s.values[0])]}
        for s in series
        if s.values[0] is not None
    ]
    return {"resultType": "vector", "result": vector}


def _range(value: Value, times: Times) -> dict[str, Any]:
    if isinstance(value, Matrix):
        raise BadData(
            "a range query asks an instant vector or a scalar, not a range vector: leave out the [range]"
        )
    if isinstance(value, String):
        raise BadData("a range query asks an instant vector or a scalar, not a string")
    if isinstance(value, Scalar):
        points = [[t / 1000, _number(v)] for t, v in zip(times.at_ms, value.values, strict=True)]
        return {"resultType": "matrix", "result": [{"metric": {}, "values": points}]}
    result = []
    for s in sorted(value.series, key=lambda s: s.labels):
        points = [[t / 1000, _number(v)] for t, v in zip(times.at_ms, s.values, strict=True) if v is not None]
        if points:
            result.append({"metric": dict(s.labels), "values": points})
    return {"resultType": "matrix", "result": result}
