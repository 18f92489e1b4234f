"""The embedded storage's reads: on connections of their own, so that a long
search never holds the writer's lock, and interrupted once the deadline of
the call they serve has passed."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from skyoap.runtime import deadline
from skyoap.storage.api import StorageUnavailable
from skyoap.storage.embedded.db import Database

SLOW_READ = "SELECT count(*) FROM n a, n b, n c WHERE a.v + b.v + c.v = -1"
"""A read of some 10^9 rows' combinations: minutes, if nothing stops it."""


@pytest.fixture
def db(tmp_path: Path) -> Database:
    db = Database(tmp_path / "s.db")
    db.execute("CREATE TABLE n (v INTEGER)")
    with db.transaction() as conn:
        conn.executemany("INSERT INTO n VALUES (?)", [(i,) for i in range(1000)])
    return db


def test_writes_go_on_while_a_long_read_runs_and_the_read_stops_at_its_deadline(db: Database) -> None:
    outcome: list[BaseException] = []
    reading = threading.Event()

    def search() -> None:
        with deadline.call():
            deadline.start(5.0)
            reading.set()
            try:
                db.fetch(SLOW_READ)
            except BaseException as e:  # what the read ended with is the result
                outcome.append(e)

    reader = threading.Thread(target=search, name="test-search")
    reader.start()
    assert reading.wait(30)
    for i in range(20):  # each a transaction of the writer, taken while the read runs
        db.execute("INSERT INTO n VALUES (?)", (1000 + i,))
    still_reading = reader.is_alive()
    reader.join(60)
    assert still_reading  # the writes did not wait for the read
    assert not reader.is_alive()
    (error,) = outcome
    assert isinstance(error, StorageUnavailable)
    assert str(error) == "SQLite could not run the statement: interrupted"
    assert db.fetch("SELECT count(*) FROM n") == [(1020,)]
    db.close()


def test_a_read_outside_a_call_is_not_interrupted(db: Database) -> None:
    assert db.fetch("SELECT count(*) FROM n a, n b WHERE a.v = b.v") == [(1000,)]
    db.close()
