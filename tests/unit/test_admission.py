"""The admission engine's deadline: work admitted with one reads within it;
work admitted without one (the admin port's scrapes) keeps every wait's own
limit and is answered however long it takes."""

from __future__ import annotations

import threading

from skyoap.runtime import deadline
from skyoap.runtime.admission import Admission


def test_work_admitted_with_a_deadline_waits_at_most_what_is_left_of_it() -> None:
    admission = Admission(1, 0, 30.0)
    admission.start()
    try:
        left = admission.submit(lambda: deadline.remaining(60.0)).result(10)
        assert left is not None and 29.0 < left <= 30.0
    finally:
        admission.close(5)


def test_work_admitted_without_a_deadline_keeps_its_own_limits_and_is_answered_past_any() -> None:
    admission = Admission(1, 0, None)
    admission.start()
    release = threading.Event()
    try:
        running = admission.submit(lambda: (release.wait(60), deadline.remaining(60.0))[1])
        assert not running.done()
        release.set()
        assert running.result(10) == 60.0
    finally:
        release.set()
        admission.close(5)
