"""How an agent's stream ends: whole, with undecodable messages, or broken."""

from __future__ import annotations

from collections.abc import Iterator

import grpc

from skyoap.edge.binding import Undecodable
from skyoap.model.checks import Reason
from skyoap.receiver.checks import Refusals
from skyoap.receiver.skywalking.streams import taking
from skyoap.runtime.instruments import Instruments


class Context:
    """The one part of grpc.ServicerContext that ``_taking`` reads."""

    def __init__(self, active: bool) -> None:
        self.active = active

    def is_active(self) -> bool:
        return self.active


class Broken(grpc.RpcError):
    pass


def stream(*items: object, breaks: bool = False) -> Iterator[object]:
    yield from items
    if breaks:
        raise Broken()


def take(items: Iterator[object], active: bool = True) -> tuple[list[object], dict[Reason, int]]:
    tally = Refusals("segments", Instruments()).tally()
    taken = list(taking(items, tally, Context(active)))
    return taken, tally.refused


def test_a_whole_stream_is_taken_and_nothing_refused() -> None:
    assert take(stream("a", "b")) == (["a", "b"], {})


def test_undecodable_messages_are_refused_and_the_stream_goes_on() -> None:
    bad = Undecodable("skywalking.v3.SegmentObject", "bad")
    assert take(stream("a", bad, "b")) == (["a", "b"], {Reason.UNDECODABLE: 1})


def test_a_stream_that_breaks_keeps_what_came_before() -> None:
    assert take(stream("a", breaks=True)) == (["a"], {Reason.BROKEN_STREAM: 1})


def test_a_cancelled_call_whose_end_overtook_the_cancellation_is_counted_broken() -> None:
    assert take(stream("a"), active=False) == (["a"], {Reason.BROKEN_STREAM: 1})
