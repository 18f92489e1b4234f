from __future__ import annotations

import gc
import threading

import pytest

from skyoap.runtime.retry import RetryPolicy, is_retriable
from skyoap.storage.api import StorageError, StorageUnavailable


class Flaky:
    """Fails with ``errors`` in turn, then answers how many calls it took."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return self.calls


FAST = RetryPolicy(attempts=3, first_delay_s=0.001, max_delay_s=0.002)


def test_retriable_errors_are_tried_again_up_to_the_bound() -> None:
    assert FAST.call(Flaky(StorageUnavailable("busy"), StorageUnavailable("busy"))) == 3
    flaky = Flaky(*(StorageUnavailable(f"busy {i}") for i in range(3)))
    with pytest.raises(StorageUnavailable, match="busy 2"):
        FAST.call(flaky)
    assert flaky.calls == 3


def test_other_errors_are_not_tried_again() -> None:
    flaky = Flaky(StorageError("mapping conflict"), ValueError("bad"))
    with pytest.raises(StorageError, match="mapping conflict"):
        FAST.call(flaky)
    assert flaky.calls == 1
    assert (is_retriable(StorageUnavailable("x")), is_retriable(StorageError("x"))) == (True, False)
    assert is_retriable(ValueError("x")) is False


def test_closing_interrupts_the_pause_and_ends_the_tries() -> None:
    closing = threading.Event()
    slow = RetryPolicy(attempts=5, first_delay_s=3600, max_delay_s=3600)
    flaky = Flaky(*(StorageUnavailable("down") for _ in range(5)))
    threading.Timer(0.05, closing.set).start()
    with pytest.raises(StorageUnavailable, match="down"):
        slow.call(flaky, closing)  # would wait an hour without the interrupt
    assert flaky.calls == 1


def test_pauses_grow_exponentially_to_their_bound_with_jitter() -> None:
    policy = RetryPolicy(first_delay_s=0.2, multiplier=5.0, max_delay_s=3.0)
    for failures, full in ((1, 0.2), (2, 1.0), (3, 3.0), (9, 3.0)):
        delays = [policy.delay_s(failures) for _ in range(200)]
        assert all(full / 2 <= d <= full for d in delays), (failures, min(delays), max(delays))


class Body:
    """What a try builds (a bulk body); says when it is freed."""

    def __init__(self, freed: list[int], n: int) -> None:
        self.freed, self.n = freed, n

    def __del__(self) -> None:
        self.freed.append(self.n)


def test_what_a_failed_try_built_is_freed_before_the_next_try_without_the_collector() -> None:
    # A client that keeps its error in a frame of the error's own traceback
    # (urllib3 does) makes a cycle only the cyclic collector would free.
    freed: list[int] = []
    tries: list[int] = []

    def send() -> int:
        n = len(tries)
        tries.append(n)
        body = Body(freed, n)
        if n < 2:
            try:
                raise StorageUnavailable("timed out")
            except StorageUnavailable as e:
                error = e  # a local of a frame on the error's own traceback: a cycle
            raise error
        assert freed == list(range(n))  # every earlier try's body is gone already
        return body.n

    gc.disable()
    try:
        assert FAST.call(send) == 2
    finally:
        gc.enable()
    assert tries == [0, 1, 2]
