"""Rules evaluated minute by minute over stored metrics, by one node or by
two sharing the state store, with the notices sent to a real HTTP server."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest

from skyoap.alarm.delivery import Delivery
from skyoap.alarm.rounds import BUCKETS, Alarms, AlarmStorage, Membership
from skyoap.alarm.settings import parse_settings
from skyoap.model.metrics import minute_bucket
from skyoap.model.records import AlarmRecord
from skyoap.model.stream import Text, Words
from skyoap.runtime.instruments import Instruments
from skyoap.storage.api import RecordSearch, StateStore
from skyoap.storage.select import OpenStorage
from tests.integration.helpers import eventually
from tests.unit.test_alarm_delivery import FAST, Hook
from tests.unit.test_alarm_evaluation import FIRST, storage

__all__ = ["storage"]  # a fixture of this module's tests

SETTINGS = """
rules:
  shop_sla_rule:
    expression: sum(service_sla < 9000) >= 2
    period: 3
    silence-period: 3
    message: Service {name} fails
    tags: {level: WARNING}
hooks:
  webhook:
    default:
      is-default: true
      urls: [URL/fired]
      recovery-urls: [URL/recovered]
"""


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def at_minute(self, minute: int) -> None:
        """Just after ``minute`` has settled (a second after it ended)."""
        self.now = (minute + 1) * 60 + 1.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def hook() -> Iterator[Hook]:
    h = Hook([])
    yield h
    h.shutdown()


def alarms(
    storage: OpenStorage,
    hook: Hook,
    me: str,
    nodes: list[str],
    clock: Clock,
    instruments: Instruments | None = None,
) -> tuple[Alarms, Delivery]:
    settings = parse_settings(SETTINGS.replace("URL", hook.url))
    instruments = instruments or Instruments()
    delivery = Delivery(instruments, retries=FAST)
    delivery.start()
    a = Alarms(
        lambda: settings, stores(storage), Membership(me, lambda: nodes), delivery, instruments, 0.5, clock
    )
    return a, delivery


def stores(storage: OpenStorage) -> AlarmStorage:
    return AlarmStorage(storage.metrics, storage.state, storage.records)


def notices(hook: Hook) -> list[dict[str, Any]]:
    """What the hook took, firings first: a firing sent again after a failed
    try may arrive after its recovery."""
    return sorted((json.loads(b)[0] for b in hook.taken), key=lambda m: m.get("recoveryTime") or 0)


def received(hook: Hook) -> list[tuple[str, str, int | None]]:
    return [(m["name"], m["alarmMessage"], m.get("recoveryTime")) for m in notices(hook)]


def test_each_round_a_node_finishes_is_counted(storage: OpenStorage, hook: Hook) -> None:
    """Tests wait on this counter rather than on the clock."""
    clock, counted, outside = Clock(), Instruments(), Instruments()
    a, _ = alarms(storage, hook, "n1", ["n1"], clock, counted)
    clock.at_minute(FIRST)
    a.run_once()
    a.run_once()
    assert counted.value("skyoap_alarm_rounds_total") == 2
    # A node the cluster does not list yet evaluates nothing: no round.
    b, _ = alarms(storage, hook, "n2", ["n1"], clock, outside)
    b.run_once()
    assert outside.value("skyoap_alarm_rounds_total") == 0


def test_a_firing_and_its_recovery_are_sent_once(storage: OpenStorage, hook: Hook) -> None:
    clock = Clock()
    a, delivery = alarms(storage, hook, "n1", ["n1"], clock)
    for m in range(9):
        clock.at_minute(FIRST + m)
        a.run_once()
        a.run_once()  # a second round in the same minute evaluates nothing again
    eventually(lambda: delivery.idle() and len(hook.taken) == 2)
    # shop failed in minutes 2, 3, 4: twice in the 3 minutes up to minute 3, so it fired then;
    # once up to minute 6, but minutes 4 to 6 are the firing's silence: it recovered at minute 7.
    assert received(hook) == [
        ("shop", "Service shop fails", None),
        ("shop", "Service shop fails", (FIRST + 8) * 60_000),
    ]
    first, second = notices(hook)
    assert (first["uuid"], first["startTime"], first["scope"], first["tags"]) == (
        second["uuid"], (FIRST + 4) * 60_000, "SERVICE", [{"key": "level", "value": "WARNING"}],
    )  # fmt: skip
    # The firing stored by its id; the recovery by that and /recovery, with its time.
    firing = AlarmRecord(
        alarm_id=first["uuid"], uuid=first["uuid"], time_bucket=minute_bucket((FIRST + 4) * 60_000), scope=1,
        name="shop", id0=first["id0"], id1="", service="shop", rule_name="shop_sla_rule",
        message=Words("Service shop fails"), start_time=(FIRST + 4) * 60_000,
        expression=Text("sum(service_sla < 9000) >= 2"), tags=("level=WARNING",),
        snapshot=Text(json.dumps([{"name": "service_sla", "results": [{"metric": {"labels": []}, "values": [
            {"id": str((FIRST + m) * 60_000), "value": sla, "traceID": None, "owner": None}
            for m, sla in ((1, "10000"), (2, "5000"), (3, "5000"))
        ]}]}], separators=(",", ":"))),  # what it read in the period up to when it fired
    )  # fmt: skip
    recovery = replace(
        firing, alarm_id=f"{first['uuid']}/recovery", recovery_time=(FIRST + 8) * 60_000, snapshot=Text("")
    )
    assert sorted(stored_alarms(storage), key=lambda r: r.recovery_time) == [firing, recovery]
    a.run_once()  # recorded and sent: the outboxes are empty again
    assert outboxes(storage) == []
    delivery.close()


def stored_alarms(storage: OpenStorage) -> list[AlarmRecord]:
    return storage.records.search(AlarmRecord, RecordSearch(first_bucket=0, last_bucket=999999999999))


def outboxes(storage: OpenStorage) -> list[dict[str, Any]]:
    return [e for n in range(BUCKETS) for e in (storage.state.load(f"alarm:{n}")[0] or {}).get("outbox", [])]


def test_a_notice_its_node_did_not_send_is_sent_by_the_next_owner(storage: OpenStorage, hook: Hook) -> None:
    """n1 stores the firing in its bucket's outbox and dies before it records
    or sends it (its delivery never starts); n2, the owner once n1 is gone,
    records and sends it, once. n1 started again does the same for what it
    forgot."""
    clock = Clock()
    settings = parse_settings(SETTINGS.replace("URL", hook.url))
    dead = Delivery(Instruments(), retries=FAST)  # never started: nothing it is given is sent
    one = Alarms(
        lambda: settings, stores(storage), Membership("n1", lambda: ["n1"]),
        dead, Instruments(), 0.5, clock,
    )  # fmt: skip
    one._handle = lambda settings, stored: None  # type: ignore[method-assign]  # killed after the swap
    for m in range(4):
        clock.at_minute(FIRST + m)
        one.run_once()
    [entry] = outboxes(storage)
    assert (entry["by"], entry["recorded"], entry["hooks"]) == ("n1", False, ["webhook.default"])
    two, delivery = alarms(storage, hook, "n2", ["n2"], clock)
    two.run_once()  # the same minute: nothing evaluated, the firing taken over
    eventually(lambda: delivery.idle() and len(hook.taken) == 1)
    assert received(hook) == [("shop", "Service shop fails", None)]
    assert [(r.alarm_id, r.recovery_time) for r in stored_alarms(storage)] == [
        (entry["message"]["firing"], 0)
    ]
    two.run_once()
    assert outboxes(storage) == []
    delivery.close()


def test_a_node_started_again_sends_what_it_had_not(storage: OpenStorage, hook: Hook) -> None:
    clock = Clock()
    settings = parse_settings(SETTINGS.replace("URL", hook.url))
    one = Alarms(
        lambda: settings, stores(storage), Membership("n1", lambda: ["n1"]),
        Delivery(Instruments(), retries=FAST), Instruments(), 0.5, clock,
    )  # fmt: skip
    one._handle = lambda settings, stored: None  # type: ignore[method-assign]  # killed after the swap
    for m in range(4):
        clock.at_minute(FIRST + m)
        one.run_once()
    again, delivery = alarms(storage, hook, "n1", ["n1"], clock)
    again.run_once()
    eventually(lambda: delivery.idle() and len(hook.taken) == 1)
    assert received(hook) == [("shop", "Service shop fails", None)]
    again.run_once()
    assert outboxes(storage) == []
    delivery.close()


class Racing:
    """The state store, but the next swap first lets ``before`` run: another
    node that evaluates the same minute between this one's read and write."""

    def __init__(self, state: StateStore) -> None:
        self.state = state
        self.before: Callable[[], None] | None = None

    def load(self, name: str) -> tuple[dict[str, Any] | None, object]:
        return self.state.load(name)

    def swap(self, name: str, version: object, value: dict[str, Any]) -> bool:
        if self.before is not None:
            run, self.before = self.before, None
            run()
        return self.state.swap(name, version, value)

    def names(self) -> list[str]:
        return self.state.names()

    def close(self) -> None:
        self.state.close()


def test_two_nodes_that_both_evaluate_a_minute_raise_its_alarm_once(storage: OpenStorage, hook: Hook) -> None:
    """While membership changes, two nodes can each see themselves alone
    and evaluate the same bucket at once: the one whose swap lands second
    sends nothing."""
    clock = Clock()
    racing = Racing(storage.state)
    settings = parse_settings(SETTINGS.replace("URL", hook.url))
    instruments = Instruments()
    d1 = Delivery(instruments, retries=FAST)
    d1.start()
    one = Alarms(
        lambda: settings,
        AlarmStorage(storage.metrics, racing, storage.records),
        Membership("n1", lambda: ["n1"]),
        d1,
        instruments,
        0.5,
        clock,
    )
    two, d2 = alarms(storage, hook, "n2", ["n2"], clock)
    for m in range(9):
        clock.at_minute(FIRST + m)
        racing.before = two.run_once
        one.run_once()
    eventually(lambda: d1.idle() and d2.idle() and len(hook.taken) == 2)
    assert [r[2] is None for r in received(hook)] == [True, False]
    assert instruments.value("skyoap_alarm_notices_total", kind="firing") == 0  # n2 stored every minute first
    assert instruments.value("skyoap_alarm_minutes_taken_total") == 9 * BUCKETS  # every bucket, every minute
    d1.close()
    d2.close()


def test_a_new_owner_goes_on_from_the_state_and_catches_up_missed_minutes(
    storage: OpenStorage, hook: Hook
) -> None:
    clock = Clock()
    first, d1 = alarms(storage, hook, "n1", ["n1"], clock)
    for m in range(3):  # minutes 0-2: nothing fires yet
        clock.at_minute(FIRST + m)
        first.run_once()
    # n1 is gone; n2 owns everything from minute 5 on and evaluates minutes 3 to 5.
    second, d2 = alarms(storage, hook, "n2", ["n2"], clock)
    for m in range(5, 9):
        clock.at_minute(FIRST + m)
        second.run_once()
    eventually(lambda: d2.idle() and len(hook.taken) == 2)
    assert [r[2] is None for r in received(hook)] == [True, False]
    d1.close()
    d2.close()
