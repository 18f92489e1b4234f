"""Storage-side trace sampling: SkyWalking's settings file read as is, and
which segments its policies keep."""

from __future__ import annotations

import binascii
import os
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from skyoap.model.profiling import ProfileTask
from skyoap.model.records import SegmentRecord
from skyoap.model.stream import Text
from skyoap.receiver import sampling
from skyoap.receiver.sampling import Policies, Policy, Sampler, Why, decide, draw, parse
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.watched import WatchedFile

SKYWALKING_FILE = """\
default:
  # Default sampling rate that replaces the 'agent-analyzer.default.sampleRate'
  # The sample rate precision is 1/10000. 10000 means 100% sample in default.
  rate: 10000
  # Default trace latency time that replaces the 'agent-analyzer.default.slowTraceSegmentThreshold'
  # Setting this threshold about the latency would make the slow trace segments sampled if they cost
  # more time, even the sampling mechanism activated. The default value is `-1`, which means would not
  # sample slow traces. Unit, millisecond.
  duration: -1
#services:
#  - name: serverName
#    rate: 1000 # Sampling rate of this specific service
#    duration: 10000 # Trace latency threshold for trace sampling for this specific service
"""

RATE = "f: default: rate must be a whole number of 1/10000 from 0 to 10000"
SERVICES = """\
default:
  rate: 1000
  duration: 3000
services:
  - name: shop
    rate: 5000
  - name: stock
    duration: 200
"""


def segment(trace_id: str, service: str = "web", latency_ms: int = 10, error: bool = False) -> SegmentRecord:
    return SegmentRecord(
        time_bucket=202611281200, segment_id=f"{trace_id}.{service}", trace_id=trace_id, service=service,
        instance="i", endpoint="/", start_time=0, end_time=latency_ms, latency_ms=latency_ms,
        is_error=error, spans=1, data=Text(""),
    )  # fmt: skip


def test_skywalkings_own_file_keeps_everything() -> None:
    policies = parse(SKYWALKING_FILE, "f")
    assert policies == Policies(Policy(10_000, -1), {})
    assert policies.keeps_all()
    assert parse("", "f") == Policies()


def test_a_service_takes_what_it_leaves_out_from_the_default() -> None:
    policies = parse(SERVICES, "f")
    assert policies.default == Policy(1000, 3000)
    assert policies.of("shop") == Policy(5000, 3000)
    assert policies.of("stock") == Policy(1000, 200)
    assert policies.of("billing") == Policy(1000, 3000)
    assert not policies.keeps_all()


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("default:\n  sampleRate: 10", "f: default: unknown key 'sampleRate' (SkyWalking 8's"),
        ("default:\n  rate: 10001", f"{RATE}, not 10001"),
        ("default:\n  rate: 0.5", f"{RATE}, not 0.5"),
        ("default:\n  duration: -2", "f: default: duration must be a whole number of ms, or -1 for none"),
        ("services:\n  - rate: 10", "f: services[0] has no name"),
        ("services:\n  - {name: a}\n  - {name: a}", "f: service 'a' is given twice"),
        ("rules: {}", "f: the file has a default and services, nothing else"),
        ("default: [1", "f: not YAML"),
    ],
)  # fmt: skip
def test_a_bad_file_is_refused_saying_what_is_wrong(text: str, error: str) -> None:
    with pytest.raises(ValueError) as refused:
        parse(text, "f")
    assert str(refused.value).startswith(error)


def test_a_trace_is_drawn_by_the_crc_of_its_id_alike_everywhere() -> None:
    assert draw("a1b2c3") == binascii.crc32(b"a1b2c3") % 10_000
    ids = [uuid.UUID(int=i * 7919 + 13).hex for i in range(20_000)]
    kept = sum(decide(Policies(Policy(1000)), segment(t))[0] for t in ids)
    assert 1800 <= kept <= 2200  # 10 % of 20,000, give or take one point


def test_errors_and_slow_segments_are_kept_whatever_their_draw() -> None:
    policies = parse(SERVICES, "f")
    dropped = next(t for t in (f"t{i}" for i in range(1000)) if draw(t) >= 5000)
    assert decide(policies, segment(dropped, "shop")) == (False, Why.RATE)
    assert decide(policies, segment(dropped, "shop", error=True)) == (True, Why.ERROR)
    assert decide(policies, segment(dropped, "shop", latency_ms=2999)) == (False, Why.RATE)
    assert decide(policies, segment(dropped, "shop", latency_ms=3000)) == (True, Why.SLOW)
    assert decide(policies, segment(dropped, "stock", latency_ms=200)) == (True, Why.SLOW)
    kept = next(t for t in (f"t{i}" for i in range(1000)) if draw(t) < 1000)
    assert decide(policies, segment(kept, "billing")) == (True, Why.RATE)


def test_the_sampler_counts_what_it_keeps_and_drops_by_why() -> None:
    instruments = Instruments()
    sampler = Sampler(lambda: Policies(Policy(0, 100)), instruments)
    segments = [segment("a"), segment("b", error=True), segment("c", latency_ms=100), segment("d")]
    assert [s.trace_id for s in sampler.kept(segments)] == ["b", "c"]

    def counted(outcome: str, reason: str) -> float:
        return instruments.value("skyoap_trace_sampling_segments_total", outcome=outcome, reason=reason)

    assert (counted("kept", "error"), counted("kept", "duration"), counted("dropped", "rate")) == (1, 1, 2)


def test_a_changed_file_is_read_again_and_a_bad_one_keeps_the_policies(tmp_path: Path) -> None:
    path = tmp_path / "trace-sampling-policy-settings.yml"
    path.write_text("default:\n  rate: 1000\n")
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    errors = ("skyoap_sampling_errors_total", "refused")
    instruments = Instruments()
    policies = WatchedFile(path, sampling.load, instruments, 10.0, errors, Policies.describe)
    assert policies().default.rate == 1000
    path.write_text("default:\n  rate: 500\n")
    os.utime(path, ns=(2_000_000_000, 2_000_000_000))
    assert policies.refresh() is True
    assert policies().default.rate == 500
    path.write_text("default:\n  rate: 50000\n")
    os.utime(path, ns=(3_000_000_000, 3_000_000_000))
    assert policies.refresh() is False
    assert policies().default.rate == 500
    assert instruments.value("skyoap_sampling_errors_total") == 1


def test_a_segment_a_profiling_task_may_have_dumped_is_kept() -> None:
    task = ProfileTask("1_c2hvcA==.1", "shop", "/price", 1000, 1, 100, 10, 5, 900)
    instruments = Instruments()
    sampler = Sampler(
        lambda: Policies(Policy(0)), instruments, lambda service: [task] if service == "shop" else []
    )

    def at(start: int, latency: int, service: str = "shop", endpoint: str = "/price") -> SegmentRecord:
        return replace(segment("t", service, latency), endpoint=endpoint, start_time=start)

    segments = [
        at(1000, 100),  # kept: it started while the task ran and lasted past its threshold
        at(61_000, 150),  # the task's last moment
        at(999, 150),  # before the task
        at(61_001, 150),  # after it
        at(2000, 99),  # too short to be dumped
        at(2000, 150, endpoint="/buy"),
        at(2000, 150, service="stock"),
    ]
    assert [(s.start_time, s.latency_ms) for s in sampler.kept(segments)] == [(1000, 100), (61_000, 150)]
    assert instruments.value("skyoap_trace_sampling_segments_total", outcome="kept", reason="profiling") == 2
