"""Alarm notices sent to a real HTTP server in the test: taken once after
failures, never blocking the sender, dropped (and counted) when refused or
when the queue is full."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

from skyoap.alarm.delivery import Delivery
from skyoap.alarm.messages import Request
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.retry import RetryPolicy
from tests.integration.helpers import eventually

FAST = RetryPolicy(attempts=4, first_delay_s=0.05, multiplier=2.0, max_delay_s=0.2)


class Hook(http.server.ThreadingHTTPServer):
    """Answers each POST with the next of ``answers`` (then 200), or waits
    ``hang`` first; keeps the bodies of the requests it answered 200."""

    def __init__(self, answers: list[int], hang: threading.Event | None = None) -> None:
        self.answers, self.hang, self.asked = list(answers), hang, 0
        self.taken: list[bytes] = []
        hook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if hook.hang is not None:
                    hook.hang.wait(30)
                hook.asked += 1
                code = hook.answers.pop(0) if hook.answers else 200
                if code == 200:
                    hook.taken.append(body)
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hook"


@pytest.fixture
def instruments() -> Iterator[Instruments]:
    yield Instruments()


def test_a_hook_that_answers_500_twice_then_200_gets_the_notice_once(instruments: Instruments) -> None:
    hook = Hook([500, 500])
    delivery = Delivery(instruments, retries=FAST)
    delivery.start()
    settled: list[str] = []
    try:
        sent = Request(hook.url, b'[{"uuid": "f1"}]', {})
        assert delivery.send("webhook", sent, lambda: settled.append("f1"))
        eventually(lambda: delivery.idle() and hook.taken == [b'[{"uuid": "f1"}]'])
        assert hook.asked == 3
        assert settled == ["f1"]  # once, when taken
        assert instruments.value("skyoap_alarm_sent_total", kind="webhook") == 1
        assert instruments.value("skyoap_alarm_retried_total", kind="webhook") == 2
    finally:
        delivery.close()
        hook.shutdown()


def test_a_refusal_is_not_sent_again_and_a_hook_always_down_is_given_up(instruments: Instruments) -> None:
    refusing, failing = Hook([400]), Hook([503] * 10)
    delivery = Delivery(instruments, retries=FAST)
    delivery.start()
    settled: list[str] = []
    try:
        delivery.send("webhook", Request(refusing.url, b"[]", {}), lambda: settled.append("refused"))
        delivery.send("slack", Request(failing.url, b"{}", {}), lambda: settled.append("gave up"))
        eventually(lambda: delivery.idle() and len(settled) == 2)
        assert (refusing.asked, failing.asked) == (1, 4)
        assert sorted(settled) == ["gave up", "refused"]
        assert instruments.value("skyoap_alarm_dropped_total", kind="webhook", reason="refused") == 1
        assert instruments.value("skyoap_alarm_dropped_total", kind="slack", reason="gave_up") == 1
    finally:
        delivery.close()
        refusing.shutdown()
        failing.shutdown()


def test_a_hung_hook_never_blocks_the_sender_and_a_full_queue_drops(instruments: Instruments) -> None:
    hang = threading.Event()
    hung, well = Hook([], hang), Hook([])
    delivery = Delivery(instruments, max_queued=3, threads=2, retries=FAST, timeout_s=30)
    delivery.start()
    try:
        assert delivery.send("webhook", Request(hung.url, b"1", {}))  # takes one thread
        assert delivery.send("webhook", Request(well.url, b"2", {}))  # the other sends it
        eventually(lambda: well.taken == [b"2"])
        assert delivery.send("webhook", Request(hung.url, b"3", {}))  # the second thread hangs too
        eventually(lambda: instruments.value("skyoap_alarm_queued") == 2)
        assert delivery.send("webhook", Request(well.url, b"4", {}))  # queued behind them
        settled: list[str] = []
        assert not delivery.send("webhook", Request(well.url, b"5", {}), lambda: settled.append("5"))
        assert instruments.value("skyoap_alarm_dropped_total", kind="webhook", reason="full") == 1
        assert settled == ["5"]  # 3 held: dropped at once, and done with
        hang.set()
        eventually(lambda: delivery.idle() and well.taken == [b"2", b"4"] and hung.taken == [b"1", b"3"])
    finally:
        hang.set()
        delivery.close()
        hung.shutdown()
        well.shutdown()


def test_what_closing_drops_is_not_settled(instruments: Instruments) -> None:
    """A notice dropped because the node closes stays in its bucket's outbox,
    for whichever node handles it next."""
    delivery = Delivery(instruments, retries=FAST)  # never started: nothing is sent
    settled: list[str] = []
    nowhere = "http://127.0.0.1:9/hook"
    assert delivery.send("webhook", Request(nowhere, b"1", {}), lambda: settled.append("1"))
    delivery.close(timeout_s=0)
    assert not delivery.send("webhook", Request(nowhere, b"2", {}), lambda: settled.append("2"))
    assert settled == []
    assert instruments.value("skyoap_alarm_dropped_total", kind="webhook", reason="closing") == 2
