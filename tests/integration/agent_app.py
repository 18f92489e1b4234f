"""A service instrumented by SkyWalking's own Python agent, run by the query
tests in the agent's virtualenv (``.venv-agent``): it imports nothing of
skyoap. The agent is configured by its environment (``SW_AGENT_NAME``, …).

``shop`` serves ``GET /buy``, which reserves at ``stock`` (``$STOCK_URL``),
``GET /buy-fail``, which logs a warning and fails with 500 at once, and
``GET /price``, which spends 300 ms in ``price_the_basket_slowly`` (what a
profiling task finds).
``stock`` serves ``GET /reserve``, which counts the reservation in Redis
(``$REDIS_HOST:$REDIS_PORT``), a peer nobody reports from; and ``GET
/report``, which queries PostgreSQL (``$DATABASE_DSN``) once quickly and
once slowly (250 ms), and calls Redis four times: a small write and read,
then a write of 20 MB and a read of 100,000 keys, whose commands take
milliseconds to send (SkyWalking's agent times a Redis command's sending).

Prints the port it serves on. Each line on stdin lets one ``/buy`` answer,
once ``stock`` has answered it: so the caller decides when shop's segment
ends, after ``stock``'s. At the end of stdin it waits for the agent to
report, then exits.
"""

from __future__ import annotations

import logging
import os
import queue
import sys
import threading
import time
import urllib.request

from skywalking import agent

agent.start()

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer  # noqa: E402 (after the agent)

import redis  # noqa: E402

releases: queue.Queue[str] = queue.Queue()


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        status = 200
        if self.path == "/buy":
            urllib.request.urlopen(os.environ["STOCK_URL"] + "/reserve").read()
            releases.get()
        elif self.path == "/buy-fail":
            logging.getLogger("shop").warning("buying failed")
            status = 500
        elif self.path == "/price":
            price_the_basket_slowly()
        elif self.path == "/reserve":
            store = redis.Redis(host=os.environ["REDIS_HOST"], port=int(os.environ["REDIS_PORT"]))
            store.incr("reserved")
        elif self.path == "/report":
            report()
        else:
            status = 404
        self.send_response(status)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: object) -> None:
        pass


def price_the_basket_slowly() -> None:
    time.sleep(0.3)


def report() -> None:
    import psycopg

    with psycopg.connect(os.environ["DATABASE_DSN"]) as connection, connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.execute("SELECT pg_sleep(0.25)")
    store = redis.Redis(host=os.environ["REDIS_HOST"], port=int(os.environ["REDIS_PORT"]))
    store.set("report", "ready")
    store.get("report")
    store.set("big", "x" * 20_000_000)
    store.mget([f"key-{i:06d}" for i in range(100_000)])


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.server_address[1], flush=True)
    for line in sys.stdin:
        releases.put(line)
    time.sleep(3)  # the agent reports every second
    server.shutdown()


if __name__ == "__main__":
    main()
