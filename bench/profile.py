"""Where the node's CPU goes under ``bench.telemetry``'s load: a sampling
profile (py-spy) of the node while it takes the segments, topics on, drawn
as a flame graph (``docs/images/node-profile.svg``) and summed by stage into
µs per segment (``bench/results/profile.json``, rendered into
docs/benchmarks.md by ``bench.report``, which this runs at the end).

    .venv/bin/python -m bench.profile [--segments 30000] [--rate 250]

py-spy samples the thread that holds the GIL (Python running); a sample is
charged to the stage of its innermost frame that belongs to one, so a stage
nested in another (serialising inside the bulk) is charged to the inner one.
The node's CPU that no sample accounts for (gRPC's own C threads, the
kernel's side of sockets and of threads handing the GIL on) is its own line.
The decode-only server (``bench.decode_server``, the ceiling the node's CPU
per segment is held to) is profiled first under the same load, into the
same stages: what the node spends beyond it is what the node's own work
costs."""

from __future__ import annotations

import argparse
import contextlib
import html
import re
import signal
import subprocess
import sys
import tempfile
import time
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bench import report
from bench.cpu import Usage, measuring
from bench.registration import stop
from bench.results import RESULTS, Figure, record
from bench.telemetry import decode_only, load, send, start_node, until_written, warm
from skyoap.deploy.servers import ElasticsearchServer, RedisServer

FLAME_GRAPH = RESULTS.parent.parent / "docs" / "images" / "node-profile.svg"

# (stage, what a frame of it looks like), a frame reading ``function (path)``;
# a frame of two stages belongs to the first.
STAGES: list[tuple[str, re.Pattern[str]]] = [
    (stage, re.compile("|".join(patterns)))
    for stage, patterns in [
        ("self-metrics (scrapes of /metrics)", [r"prometheus_client/", r"runtime/instruments\.py"]),
        (
            "memory accounting",
            [r"memory_size", r"size_hint", r"budget\.py", r"DecodeCost"],
        ),
        ("serialisation (JSON)", [r"orjson", r"json/", r"_serializer\.py", r"\bdumps\b", r"_chunk_actions"]),
        ("topics", [r"aggregator/topics\.py", r"storage/\w+/topics\.py", r"model/topics\.py"]),
        ("Elasticsearch client and HTTP", [r"elastic_transport/", r"elasticsearch/", r"urllib3/", r"http/"]),
        (
            "checks and guards",
            [r"^(check|_passes|_refuse|at_most_\w+) ", r"cardinality", r"checks\.py", r"limits\.py"],
        ),
        (
            "decoding",
            [r"^(segment_of|checked_segment)", r"searchable_tags", r"FromString", r"^Decoder"],
        ),
        ("record building", [r"^record_of", r"model/records\.py", r"model/stream\.py"]),
        ("measuring (spans to metrics)", [r"receiver/segments\.py", r"model/metrics\.py"]),
        (
            "name registration",
            [r"_register_names", r"NamesByService", r"(registration|services)\.py"],
        ),
        (
            "L1 (queues and workers)",
            [r"(buffer|batching|worker|pools)\.py", r"aggregate\.py", r"^Sinks"],
        ),
        ("remote (L1 to L2)", [r"skyoap/remote/"]),
        ("L2 merge and persist", [r"skyoap/aggregator/", r"skyoap/storage/"]),
        (
            "gRPC server and the handler's loop",
            [r"grpc/", r"skyoap/edge/", r"receiver/skywalking/", r"receiver/(intake|traces)\.py"],
        ),
    ]
]
ELSE = "anything else"
OUTSIDE = "outside Python threads (gRPC core, sockets)"


@dataclass
class Node:
    """A frame in the flame graph: its samples and the frames it called."""

    samples: int = 0
    children: dict[str, Node] = field(default_factory=dict)


def stage_of(frames: list[str]) -> str:
    """The stage of the innermost of ``frames`` (root first) that has one."""
    for frame in reversed(frames):
        for stage, pattern in STAGES:
            if pattern.search(frame):
                return stage
    return ELSE


def read_stacks(path: Path) -> Counter[tuple[str, ...]]:
    """py-spy's raw (collapsed) output: ``frame;frame;... count`` a line, root first."""
    stacks: Counter[tuple[str, ...]] = Counter()
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack:
            stacks[tuple(stack.split(";"))] += int(count)
    return stacks


def flame_graph(stacks: Counter[tuple[str, ...]], title: str, width: int = 1200, row: int = 17) -> str:
    """An SVG flame graph: each frame a box as wide as its samples, callers below callees."""
    root = Node()
    for stack, count in stacks.items():
        node = root
        node.samples += count
        for frame in stack:
            node = node.children.setdefault(frame, Node())
            node.samples += count

    boxes: list[tuple[int, float, float, str, int]] = []  # depth, x, width, frame, samples

    def place(node: Node, depth: int, x: float) -> int:
        deepest = depth
        for frame, child in sorted(node.children.items(), key=lambda c: -c[1].samples):
            w = child.samples / root.samples * width
            if w >= 0.5:
                boxes.append((depth, x, w, frame, child.samples))
                deepest = max(deepest, place(child, depth + 1, x))
            x += w
        return deepest

    depth = place(root, 0, 0.0) + 1
    height = (depth + 2) * row
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="monospace" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="#fafafa"/>',
        f'<text x="4" y="{row - 4}">{html.escape(title)}</text>',
    ]
    for d, x, w, frame, samples in boxes:
        y = height - (d + 1) * row
        name = frame.split(" (")[0]
        hue = 20 + zlib.crc32(name.encode()) % 40
        label = name[: int(w / 7)] if w > 21 else ""
        share = samples / root.samples
        out.append(
            f"<g><title>{html.escape(frame)}: {samples} samples, {share:.1%}</title>"
            f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row - 1}" fill="hsl({hue},90%,62%)"/>'
            f'<text x="{x + 2:.1f}" y="{y + row - 5}">{html.escape(label)}</text></g>'
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"


@contextlib.contextmanager
def sampling(pid: int, rate: int, raw: Path) -> Iterator[None]:
    """py-spy samples process ``pid`` into ``raw`` while the block runs."""
    spy = subprocess.Popen(
        [str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(pid), "--gil",
         "--rate", str(rate), "--format", "raw", "--output", str(raw), "--nonblocking", "--nolineno"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    time.sleep(1)  # py-spy attaches
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)
        _, errors = spy.communicate(timeout=60)
    if not raw.exists():
        raise RuntimeError(f"py-spy wrote no profile: {errors}")


def by_stage(
    stacks: Counter[tuple[str, ...]], cpu_s: float, segments: int, rate: int
) -> list[tuple[str, float]]:
    """µs per segment by stage, most first, and last what no sample covers of ``cpu_s``."""
    samples: Counter[str] = Counter()
    for stack, count in stacks.items():
        samples[stage_of(list(stack))] += count
    us_per_sample = 1e6 / rate / segments
    rows = [(stage, n * us_per_sample) for stage, n in samples.most_common()]
    return [*rows, (OUTSIDE, max(0.0, cpu_s / segments * 1e6 - sum(us for _, us in rows)))]


def show(what: str, rows: list[tuple[str, float]]) -> float:
    """Prints ``rows`` under ``what``; returns their total."""
    total = sum(us for _, us in rows)
    print(f"{what}: {total:.0f} us per segment")
    for stage, us in rows:
        print(f"  {stage:45s} {us:7.1f} us  {us / total:6.1%}")
    return total


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--segments", type=int, default=30_000)
    parser.add_argument("--streams", type=int, default=4)
    parser.add_argument("--rate", type=int, default=250, help="samples a second [default: 250]")
    args = parser.parse_args()

    segments, warmup = load(args.segments)
    raw = Path(tempfile.mkdtemp())
    decode_usage = decode_only(
        segments, warmup, args.streams, lambda pid: sampling(pid, args.rate, raw / "decode.txt")
    )
    usage = Usage()
    es, rs = ElasticsearchServer().start(), RedisServer().start()
    try:
        node, address, admin, _ = start_node(es.url, rs.url, 3.0)
        try:
            warm(address, admin, warmup, args.streams)
            with sampling(node.pid, args.rate, raw / "node.txt"), measuring(usage, node_pid=node.pid):
                send(address, segments, args.streams)
                until_written(admin, len(warmup) + args.segments)
        finally:
            stop(node)
    finally:
        es.stop()
        rs.stop()

    stacks = read_stacks(raw / "node.txt")
    FLAME_GRAPH.write_text(
        flame_graph(stacks, f"skyoap node under bench.telemetry, {args.segments} segments, topics on")
    )
    decode_rows = by_stage(read_stacks(raw / "decode.txt"), decode_usage.node_s, args.segments, args.rate)
    decode_us = show("the decode-only server's CPU", decode_rows)
    rows = by_stage(stacks, usage.node_s, args.segments, args.rate)
    node_us = show("the node's CPU", rows)
    record("profile", [
        *(Figure(f"stage: {stage}", us, "µs", node_us, "the node's CPU per segment") for stage, us in rows),
        *(Figure(f"decode-only server, stage: {stage}", us, "µs", decode_us, "its CPU per segment")
          for stage, us in decode_rows),
    ])  # fmt: skip
    report.main()
    print(f"flame graph written to {FLAME_GRAPH.relative_to(RESULTS.parent.parent)}", file=sys.stderr)


if __name__ == "__main__":
    main()
