"""Running a benchmark's server process until the benchmark ends it."""

from __future__ import annotations

import signal
import threading

from skyoap.edge.server import GrpcServer


def serve_until_terminated(server: GrpcServer, what: str) -> None:
    """Starts ``server``, prints the line the benchmark waits for, and serves until SIGTERM."""
    server.start()
    print(f"{what} listening on 127.0.0.1:{server.port}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    server.close(1)
