from __future__ import annotations

import logging
import threading

import pytest

from skyoap.runtime.jobs import BackgroundJobs
from skyoap.runtime.lifecycle import Lifecycle, OnClose


class Part:
    def __init__(self, name: str, log: list[str], fail_start: bool = False) -> None:
        self.name, self.log, self.fail_start = name, log, fail_start
        self.budgets: list[float] = []

    def start(self) -> None:
        if self.fail_start:
            raise OSError(f"{self.name} cannot start")
        self.log.append(f"start {self.name}")

    def close(self, timeout_s: float) -> None:
        self.budgets.append(timeout_s)
        self.log.append(f"close {self.name}")


def test_components_close_in_the_reverse_order_of_starting_each_within_the_timeout() -> None:
    log: list[str] = []
    life = Lifecycle()
    storage, server = Part("storage", log), Part("server", log)
    life.start(storage)
    life.start(OnClose(lambda: log.append("interrupt retries")))
    life.start(server)
    life.close(30)
    assert log == ["start storage", "start server", "close server", "interrupt retries", "close storage"]
    assert storage.budgets == server.budgets == [30]


def test_a_failed_start_closes_what_had_started() -> None:
    log: list[str] = []
    life = Lifecycle()
    life.start(Part("storage", log))
    with pytest.raises(OSError, match="server cannot start"):
        life.start(Part("server", log, fail_start=True))
    life.close(5)
    assert log == ["start storage", "close storage"]


def test_background_jobs_run_in_order_survive_a_failing_one_and_are_joined(
    caplog: pytest.LogCaptureFixture,
) -> None:
    done: list[int] = []
    jobs = BackgroundJobs("test-jobs")
    jobs.submit("first", lambda: done.append(1))
    jobs.start()

    def fail() -> None:
        raise RuntimeError("boom")

    with caplog.at_level(logging.ERROR):
        jobs.submit("the failing one", fail)
        jobs.submit("third", lambda: done.append(3))
        jobs.close(5)
    assert done == [1, 3]
    assert "test-jobs: the failing one failed" in caplog.text
    assert not any(t.name == "test-jobs" for t in threading.enumerate())
    jobs.close(5)  # idempotent
