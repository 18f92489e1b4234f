"""The HTTP admin endpoint of a node or a consumer: /metrics (Prometheus text) and /healthz."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from runtime.instruments import Instruments


class AdminServer:
    def __init__(self, host: str, port: int, instruments: Instruments) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/metrics":
                    body, status = instruments.exposition(), 200
                elif self.path == "/healthz":
                    body, status = b"ok\n", 200
                else:
                    body, status = b"try /metrics or /healthz\n", 404
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._httpd = ThreadingHTTPServer((host, port), Handler)  # bound now: the port is known at once
        self.host, self.port = str(self._httpd.server_address[0]), int(self._httpd.server_address[1])
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="admin-http", daemon=True)
        self._thread.start()

    def close(self, timeout_s: float = 5.0) -> None:
        """Stops serving; idempotent."""
        thread, self._thread = self._thread, None
        if thread is not None:  # shutdown() waits for serve_forever, which must be running
            self._httpd.shutdown()
            thread.join(timeout_s)
        self._httpd.server_close()
