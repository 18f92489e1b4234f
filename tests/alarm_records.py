"""Alarms as the alarm rules store them, for the tests of what reads them: a
firing stored with ``recovery_time`` 0, and its recovery stored again under
the same uuid, in the firing's minute.

From a minute ``t0`` (ms): shop's response time fires at 0:10 and lasts; its
instance's success rate fires at 1:10 and recovers at 3:10; its endpoint
/buy's response time fires at 2:10; its calls to stock fire at 4:10; stock
fires at 10:10, after a window of minutes 0 to 4."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from skyoap.model.metrics import minute_bucket
from skyoap.model.records import AlarmRecord
from skyoap.model.stream import Text, Words
from skyoap.storage.api import RecordDAO
from skyoap.vocabulary import ids

SHOP = ids.service_id("shop", True)
STOCK = ids.service_id("stock", True)
SHOP_INST = ids.instance_id("shop", True, "inst")
SHOP_BUY = ids.endpoint_id("shop", True, "/buy")

RECOVERED_AT_S = {"shop-inst-sla": 190}
"""When each alarm that recovers does, in seconds from ``t0``."""


def alarm(
    t0: int,
    at_s: int,
    uuid: str,
    scope: int,
    name: str,
    id0: str,
    rule: str,
    message: str,
    *tags: str,
    **more: str,
) -> AlarmRecord:
    start = t0 + at_s * 1000
    return AlarmRecord(
        alarm_id=uuid,
        time_bucket=minute_bucket(start),
        uuid=uuid,
        scope=scope,
        name=name,
        id0=id0,
        id1=more.get("id1", ""),
        service=more.get("service", "shop"),
        rule_name=rule,
        message=Words(message),
        start_time=start,
        expression=Text(more.get("expression", f"{rule} > 1")),
        tags=tags,
        snapshot=Text(more.get("snapshot", "")),
    )


def shop_read(t0: int) -> list[dict[str, Any]]:
    """What the rule of shop's alarm read when it fired: the minutes before."""
    values = [{"id": str(t0 + m * 60_000), "value": v, "traceID": None, "owner": None}
              for m, v in ((-1, "1200"), (0, "1500"))]  # fmt: skip
    return [{"name": "service_resp_time", "results": [{"metric": {"labels": []}, "values": values}]}]


def firings(t0: int) -> list[AlarmRecord]:
    """Each alarm as stored when it fired, the oldest first."""
    return [
        alarm(t0, 10, "shop-resp", 1, "shop", SHOP, "service_resp_time_rule",
              "Response time of service shop is more than 1000ms in 2 minutes of last 10 minutes",
              "level=WARNING", "team=shop", expression="avg(service_resp_time) > 1000",
              snapshot=json.dumps(shop_read(t0))),
        alarm(t0, 70, "shop-inst-sla", 2, "inst of shop", SHOP_INST, "instance_sla_rule",
              "Success rate of instance inst of shop is lower than 80%", "level=CRITICAL",
              expression="avg(service_instance_sla) < 8000"),
        alarm(t0, 130, "shop-buy-resp", 3, "/buy in shop", SHOP_BUY, "endpoint_resp_time_rule",
              "Response time of endpoint /buy in shop is more than 1000ms", "level=WARNING"),
        alarm(t0, 250, "shop-stock-resp", 4, "shop to stock", SHOP, "service_relation_resp_time_rule",
              "Response time of calls from shop to stock is more than 1000ms", id1=STOCK),
        alarm(t0, 610, "stock-resp", 1, "stock", STOCK, "service_resp_time_rule",
              "Response time of service stock is more than 1000ms in 2 minutes of last 10 minutes",
              "level=CRITICAL", "team=stock", service="stock"),
    ]  # fmt: skip


def store(records: RecordDAO, t0: int, uuids: Sequence[str] | None = None) -> list[AlarmRecord]:
    """Stores the alarms named by ``uuids`` (all by default) as they fired,
    then the recoveries of those that recovered; returns each firing with
    the time it recovered."""
    fired = [a for a in firings(t0) if uuids is None or a.uuid in uuids]
    assert records.insert(AlarmRecord, fired) == {}
    recovered = [
        replace(a, alarm_id=f"{a.uuid}/recovery", recovery_time=t0 + RECOVERED_AT_S[a.uuid] * 1000)
        for a in fired
        if a.uuid in RECOVERED_AT_S
    ]
    assert records.insert(AlarmRecord, recovered) == {}
    recovered_at = {a.uuid: a.recovery_time for a in recovered}
    return [replace(a, recovery_time=recovered_at.get(a.uuid, 0)) for a in fired]


def ui_message(
    t0: int, start_s: int, scope: str, id_: str, name: str, text: str, expression: str, *tags: tuple[str, str]
) -> dict[str, Any]:
    """An AlarmMessage as SkyWalking's UI selects it (``ui alarms`` of
    ``test_query_schema``), still firing."""
    return {
        "key": id_, "message": text, "startTime": t0 + start_s * 1000, "recoveryTime": None,
        "scope": scope, "name": name, "tags": [{"key": k, "value": v} for k, v in tags], "events": [],
        "snapshot": {"expression": expression, "metrics": []},
    }  # fmt: skip


def ui_answer(t0: int) -> list[dict[str, Any]]:
    """What ``getAlarm`` answers SkyWalking's UI for minutes 0 to 4: every
    alarm but stock's, the newest first."""
    return [
        ui_message(t0, 250, "ServiceRelation", SHOP, "shop to stock",
                   "Response time of calls from shop to stock is more than 1000ms",
                   "service_relation_resp_time_rule > 1"),
        ui_message(t0, 130, "Endpoint", SHOP_BUY, "/buy in shop",
                   "Response time of endpoint /buy in shop is more than 1000ms",
                   "endpoint_resp_time_rule > 1", ("level", "WARNING")),
        {**ui_message(t0, 70, "ServiceInstance", SHOP_INST, "inst of shop",
                      "Success rate of instance inst of shop is lower than 80%",
                      "avg(service_instance_sla) < 8000", ("level", "CRITICAL")),
         "recoveryTime": t0 + 190_000},
        {**ui_message(t0, 10, "Service", SHOP, "shop",
                      "Response time of service shop is more than 1000ms in 2 minutes of last 10 minutes",
                      "avg(service_resp_time) > 1000", ("level", "WARNING"), ("team", "shop")),
         "snapshot": {"expression": "avg(service_resp_time) > 1000", "metrics": shop_read(t0)}},
    ]  # fmt: skip
