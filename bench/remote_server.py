"""The receiving end of the remote-hop benchmark: the real RemoteService handing
items to buffered workers (as L2 takes them, minus storage) behind a node's
default memory budget, or, as the ceiling, a handler that only counts the
messages it is sent."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import grpc

from bench.serving import serve_until_terminated
from skyoap.edge.server import GrpcServer
from skyoap.model.inventory import INVENTORY_TYPES, Inventory
from skyoap.model.stream import Stage, StreamTypes, worker_id
from skyoap.proto import remote_pb2
from skyoap.receiver.config import LimitsConfig
from skyoap.remote.service import RemoteService
from skyoap.runtime.budget import MemoryBudget
from skyoap.runtime.buffer import BufferSpec, BufferStrategy
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.pools import DrainPool
from skyoap.runtime.worker import BufferedWorker, Workers


class Discard(BufferedWorker[Inventory]):
    """Takes items like an L2 worker (its own queue, a shared pool) and drops them."""

    def process(self, batch: list[Inventory]) -> None:
        pass


class CountOnly:
    def call(self, requests: Iterator[object], context: grpc.ServicerContext) -> remote_pb2.RemoteAck:
        return remote_pb2.RemoteAck(received=sum(1 for _ in requests))

    def callBatched(
        self, requests: Iterator[remote_pb2.RemoteBatch], context: grpc.ServicerContext
    ) -> remote_pb2.RemoteAck:
        return remote_pb2.RemoteAck(received=sum(len(b.nextWorkerIds) for b in requests))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["service", "empty"], required=True)
    args = parser.parse_args()
    instruments = Instruments()
    servicer: object = CountOnly()
    if args.mode == "service":
        workers = Workers()
        pool = DrainPool("REGISTER_L2", 2, instruments)
        for model in INVENTORY_TYPES:
            spec = BufferSpec(1, 10_000, BufferStrategy.BLOCKING)
            workers.register(
                Discard(worker_id(model, Stage.L2), f"{model.MODEL}_l2", pool, instruments, spec)
            )
        pool.start()
        limits = LimitsConfig()
        budget = MemoryBudget(limits.memory_limit_mb * 1024 * 1024, instruments)
        servicer = RemoteService(
            workers,
            StreamTypes(INVENTORY_TYPES),
            instruments,
            budget,
            limits.call_deadline_s,
            limits=limits.items(),
        )
    server = GrpcServer("127.0.0.1", 0, max_message_bytes=64 * 1024 * 1024)
    server.add(remote_pb2.DESCRIPTOR.services_by_name["RemoteService"], servicer, keep_undecodable=True)
    serve_until_terminated(server, "remote server")


if __name__ == "__main__":
    main()
