"""An HTTP proxy that can lose the answers to bulk writes of stored rows: the
writes still reach Elasticsearch and take effect, but the client never hears
back and times out (a network that fails one way, or a server too slow to
answer in time). Reads are answered, so the writer can find out what landed.
Appends to topics are answered too: publishing is not promised under faults,
and its retries would hold the metrics writer's thread for the whole fault."""

from __future__ import annotations

import contextlib
import socket
import threading

from skyoap.deploy.servers import free_port


class AnswerLosingProxy:
    def __init__(self, upstream_port: int) -> None:
        self.port = free_port()
        self._upstream = ("127.0.0.1", upstream_port)
        self.losing = threading.Event()
        """While set, the answers to ``_bulk`` requests (but appends to topics) are dropped."""
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._closed = threading.Event()

        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self._upstream)
            self._sockets += [client, server]
            bulk = threading.Event()  # the connection's latest request writes rows in bulk
            threading.Thread(target=self._requests, args=(client, server, bulk), daemon=True).start()
            threading.Thread(target=self._answers, args=(server, client, bulk), daemon=True).start()

    def _requests(self, source: socket.socket, sink: socket.socket, bulk: threading.Event) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if data[:8].split(b" ")[0] in (b"GET", b"POST", b"PUT", b"DELETE", b"HEAD"):
                    # A new request (one at a time per connection): is it a bulk write?
                    (bulk.set if b"/_bulk" in data.split(b"\r\n", 1)[0] else bulk.clear)()
                if b"_topic_" in data:  # every line of an append names its topic's index
                    bulk.clear()
                sink.sendall(data)
        self._end(source, sink)

    def _answers(self, source: socket.socket, sink: socket.socket, bulk: threading.Event) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if not (bulk.is_set() and self.losing.is_set()):
                    sink.sendall(data)
        self._end(source, sink)

    @staticmethod
    def _end(source: socket.socket, sink: socket.socket) -> None:
        for s in (source, sink):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        for s in self._sockets:
            with contextlib.suppress(OSError):
                s.close()
