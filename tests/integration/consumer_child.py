"""A consumer in its own process, for the tests that kill one: it reads its
group's partitions, writes every offset it processed, every commit and every
partition it was given or had taken away to stdout (one line each, flushed),
and commits after every ``--commit-every`` records (at the end of a batch).
With ``--group-instance-id`` it is a static member."""

from __future__ import annotations

import argparse
import time

from skyoap.consumer.client import Consumer, TopicPartition
from skyoap.consumer.group import CommitRefused
from skyoap.storage.config import StorageConfig, StorageKind


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--storage", required=True)
    parser.add_argument("--embedded-path", default="")
    parser.add_argument("--es-hosts", default="")
    parser.add_argument("--prefix", default="")
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--commit-every", type=int, default=10)
    parser.add_argument("--session-timeout-s", type=float, default=3.0)
    parser.add_argument("--pause-s", type=float, default=0.05, help="processing time of one batch")
    parser.add_argument("--group-instance-id", default=None)
    args = parser.parse_args()
    config = StorageConfig(
        kind=StorageKind(args.storage),
        embedded_path=args.embedded_path,
        es_hosts=args.es_hosts,
        es_index_prefix=args.prefix,
    )

    def given(partitions: list[TopicPartition]) -> None:
        print("assigned", *sorted(tp.partition for tp in partitions), flush=True)

    def hand_back(partitions: list[TopicPartition]) -> None:
        """Commits what was processed of the partitions the group takes away."""
        print("revoked", *sorted(tp.partition for tp in partitions), flush=True)
        try:
            consumer.commit({tp: consumer.position(tp) - 1 for tp in partitions if consumer.position(tp) > 0})
            print("committed", flush=True)
        except CommitRefused:  # lost rather than revoked: another member has them already
            pass

    consumer = Consumer.open(
        config,
        args.group,
        enable_auto_commit=False,
        session_timeout_s=args.session_timeout_s,
        heartbeat_interval_s=0.5,
        fetch_size=5,
        group_instance_id=args.group_instance_id,
        on_assigned=given,
        on_revoked=hand_back,
    )
    consumer.subscribe([args.topic])
    since_commit = 0
    while True:
        batch = consumer.poll(timeout_s=0.5, max_records=5)
        for r in batch:
            print(f"seen {r.partition} {r.offset}", flush=True)
        since_commit += len(batch)
        time.sleep(args.pause_s)
        # Only whole batches are committed: commit() takes everything poll returned.
        if since_commit >= args.commit_every:
            consumer.commit()
            print("committed", flush=True)
            since_commit = 0


if __name__ == "__main__":
    main()
