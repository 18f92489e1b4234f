"""Alarm notices sent to real HTTP servers in the test, on loopback ports:
taken once after failures, never blocking the sender, dropped (and counted)
when refused or when a queue is full; each send bounded as a whole, in time
and in what is read of the answer; redirects refused; and a hook that is
slow delaying only its own notices."""

from __future__ import annotations

import http.server
import logging
import socketserver
import threading
from collections.abc import Callable, Iterator

import pytest

from skyoap.alarm.delivery import Delivery
from skyoap.alarm.messages import Request
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.retry import RetryPolicy
from tests.integration.helpers import eventually

FAST = RetryPolicy(attempts=4, first_delay_s=0.05, multiplier=2.0, max_delay_s=0.2)


class Hook(http.server.ThreadingHTTPServer):
    """Answers each POST with the next of ``answers`` (then 200), or waits
    ``hang`` first; keeps the bodies of the requests it answered 200, and
    the method and headers of every request (a GET too)."""

    def __init__(
        self, answers: list[int], hang: threading.Event | None = None, redirect_to: str = ""
    ) -> None:
        self.answers, self.hang, self.asked = list(answers), hang, 0
        self.taken: list[bytes] = []
        self.seen: list[tuple[str, dict[str, str]]] = []
        hook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                hook.seen.append(("POST", dict(self.headers)))
                if hook.hang is not None:
                    hook.hang.wait(30)
                hook.asked += 1
                code = hook.answers.pop(0) if hook.answers else 200
                if code == 200:
                    hook.taken.append(body)
                self.send_response(code)
                if redirect_to:
                    self.send_header("Location", redirect_to)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                hook.seen.append(("GET", dict(self.headers)))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hook"


class RawHook(socketserver.ThreadingTCPServer):
    """Reads each request whole, then answers it with ``answer(write)``, the
    answer written in pieces by ``write`` (False once the client has gone).
    Counts the requests, the answers the client cut short and the bytes the
    client was sent; ``stop`` ends every answer under way."""

    daemon_threads = True

    def __init__(self, answer: Callable[[RawHook, Callable[[bytes], bool]], None]) -> None:
        self.asked = self.cut = self.written = 0
        self.answering = 0
        self.stopped = threading.Event()
        self._lock = threading.Lock()
        hook = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                length = 0
                while (line := self.rfile.readline(65536)) not in (b"\r\n", b""):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                self.rfile.read(length)
                hook.count(asked=1, answering=1)
                answer(hook, self.write)
                hook.count(answering=-1)

            def write(self, data: bytes) -> bool:
                try:
                    self.connection.sendall(data)
                except OSError:  # reset or closed by the client
                    hook.count(cut=1)
                    return False
                hook.count(written=len(data))
                return True

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def count(self, **by: int) -> None:
        with self._lock:
            for name, n in by.items():
                setattr(self, name, getattr(self, name) + n)

    def stop(self) -> None:
        self.stopped.set()
        self.shutdown()
        self.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hook"


def trickle(pause_s: float, length: int = 600) -> Callable[[RawHook, Callable[[bytes], bool]], None]:
    """A 200 answer padded to ``length`` bytes, a byte every ``pause_s``."""
    whole = b"HTTP/1.1 200 OK\r\nX-Padding: " + b"." * length + b"\r\nContent-Length: 0\r\n\r\n"

    def answer(hook: RawHook, write: Callable[[bytes], bool]) -> None:
        for i in range(len(whole)):
            if not write(whole[i : i + 1]) or hook.stopped.wait(pause_s):
                return

    return answer


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


def test_a_hung_hook_blocks_neither_the_sender_nor_another_hook_and_its_full_queue_drops(
    instruments: Instruments,
) -> None:
    hang = threading.Event()
    hung, well = Hook([], hang), Hook([])
    delivery = Delivery(instruments, max_queued=2, retries=FAST, timeout_s=30)
    delivery.start()
    try:
        assert delivery.send("webhook", Request(hung.url, b"1", {}))  # sent, and held
        eventually(lambda: len(hung.seen) == 1)
        assert delivery.send("webhook", Request(hung.url, b"2", {}))  # queued behind it
        settled: list[str] = []
        assert not delivery.send("webhook", Request(hung.url, b"3", {}), lambda: settled.append("3"))
        assert instruments.value("skyoap_alarm_dropped_total", kind="webhook", reason="full") == 1
        assert settled == ["3"]  # 2 held for that hook: dropped at once, and done with
        assert delivery.send("webhook", Request(well.url, b"4", {}))  # another hook's queue
        eventually(lambda: well.taken == [b"4"])
        assert (hung.taken, instruments.value("skyoap_alarm_queued")) == ([], 2)
        hang.set()
        eventually(lambda: delivery.idle() and hung.taken == [b"1", b"2"])
    finally:
        hang.set()
        delivery.close()
        hung.shutdown()
        well.shutdown()


def test_a_hook_answering_a_byte_at_a_time_is_cut_at_the_send_s_deadline(instruments: Instruments) -> None:
    """A byte every 0.5 s never trips a timeout per read of 2 s; the send's
    deadline of 2 s, all of it, ends each try."""
    trickling = RawHook(trickle(0.5))
    delivery = Delivery(instruments, retries=RetryPolicy(attempts=2, first_delay_s=0.05), timeout_s=2)
    delivery.start()
    settled: list[str] = []
    try:
        delivery.send("webhook", Request(trickling.url, b"[]", {}), lambda: settled.append("given up"))
        eventually(lambda: settled == ["given up"], timeout_s=60)
        assert instruments.value("skyoap_alarm_dropped_total", kind="webhook", reason="gave_up") == 1
        assert instruments.value("skyoap_alarm_retried_total", kind="webhook") == 1
        assert instruments.value("skyoap_alarm_sent_total", kind="webhook") == 0
        eventually(lambda: (trickling.asked, trickling.cut) == (2, 2))  # both tries cut by the client
    finally:
        trickling.stop()
        delivery.close()


def test_a_trickling_hook_delays_only_its_own_notices(instruments: Instruments) -> None:
    """Two notices to a hook that answers a byte a second (its send's
    deadline far off) and one to a healthy hook: the healthy one takes its
    notice while the first answer still trickles."""
    trickling, well = RawHook(trickle(1.0)), Hook([])
    delivery = Delivery(instruments, retries=FAST, timeout_s=300)
    delivery.start()
    try:
        for body in (b"1", b"2"):
            assert delivery.send("webhook", Request(trickling.url, body, {}))
        eventually(lambda: trickling.answering == 1)
        assert delivery.send("slack", Request(well.url, b"3", {}))
        eventually(lambda: well.taken == [b"3"], timeout_s=60)
        assert (trickling.asked, trickling.answering, trickling.cut) == (1, 1, 0)  # still answering the first
        assert instruments.value("skyoap_alarm_sent_total", kind="slack") == 1
    finally:
        trickling.stop()
        delivery.close()
        well.shutdown()


HUGE = 300 * 1024 * 1024


def huge(status: int) -> Callable[[RawHook, Callable[[bytes], bool]], None]:
    """An answer whose body is 300 MiB of zeros."""

    def answer(hook: RawHook, write: Callable[[bytes], bool]) -> None:
        head = f"HTTP/1.1 {status} X\r\nContent-Length: {HUGE}\r\n\r\n".encode()
        chunk = bytes(1024 * 1024)
        if write(head):
            for _ in range(HUGE // len(chunk)):
                if hook.stopped.is_set() or not write(chunk):
                    return

    return answer


@pytest.mark.parametrize(("status", "counted"), [(200, "sent"), (503, "gave_up")])
def test_a_huge_answer_is_left_unread(instruments: Instruments, status: int, counted: str) -> None:
    """Nothing of a 2xx answer's body is read, at most 64 KiB of another's:
    the hook can write only what the sockets' buffers hold before the client
    closes (a few MiB at most), not its 300 MiB."""
    hook = RawHook(huge(status))
    delivery = Delivery(instruments, retries=RetryPolicy(attempts=2, first_delay_s=0.05), timeout_s=30)
    delivery.start()
    try:
        delivery.send("webhook", Request(hook.url, b"[]", {}))
        eventually(lambda: delivery.idle() and hook.cut == hook.asked, timeout_s=60)
        if counted == "sent":
            assert instruments.value("skyoap_alarm_sent_total", kind="webhook") == 1
        else:
            assert instruments.value("skyoap_alarm_dropped_total", kind="webhook", reason=counted) == 1
        assert hook.asked == (1 if status == 200 else 2)
        assert hook.written < 32 * 1024 * 1024 * hook.asked
    finally:
        hook.stop()
        delivery.close()


def test_a_redirect_is_not_followed_and_the_hook_s_secret_goes_nowhere_else(
    instruments: Instruments, caplog: pytest.LogCaptureFixture
) -> None:
    elsewhere = Hook([])
    redirecting = Hook([302], redirect_to=elsewhere.url)
    delivery = Delivery(instruments, retries=FAST)
    delivery.start()
    settled: list[str] = []
    try:
        with caplog.at_level(logging.WARNING, logger="skyoap.alarm.delivery"):
            sent = Request(redirecting.url, b"[]", {"Authorization": "Bearer s3cret"})
            delivery.send("webhook", sent, lambda: settled.append("refused"))
            eventually(lambda: delivery.idle() and settled == ["refused"])
        assert instruments.value("skyoap_alarm_dropped_total", kind="webhook", reason="redirected") == 1
        assert instruments.value("skyoap_alarm_sent_total", kind="webhook") == 0
        assert redirecting.asked == 1  # not tried again: a resend is redirected again
        assert redirecting.seen[0][1]["Authorization"] == "Bearer s3cret"
        assert elsewhere.seen == []  # the secret never reached the other port
        hook, port = redirecting.server_address[1], elsewhere.server_address[1]
        assert caplog.messages == [
            f"an alarm notice was dropped (redirected, 1 try): http://127.0.0.1:{hook} answered 302 "
            f"to http://127.0.0.1:{port}: redirects are not followed"
        ]
    finally:
        delivery.close()
        redirecting.shutdown()
        elsewhere.shutdown()


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
