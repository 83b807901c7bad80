"""A consume-transform-produce worker for tests/integration/test_transactions_worker_kill.py, run as its own
process (so the test can kill -9 it): reads ``source`` as a member of ``group`` (static membership, so a restarted
worker takes its place at once), writes ``out-<value>`` to the same partition of ``sink`` and commits the input
offsets with the output in one transaction (send_offsets_to_transaction), ``--batch`` records per transaction,
read_committed. Prints ``open <n>`` once a transaction's output is written (flushed, not committed) and
``committed <n>`` after each commit; runs until killed.

    python tests/integration/txn_worker.py {moldau,confluent} BOOTSTRAP SOURCE SINK GROUP TRANSACTIONAL_ID
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any


def confluent(args: argparse.Namespace) -> None:
    from confluent_kafka import Consumer, Producer

    producer = Producer({"bootstrap.servers": args.bootstrap, "transactional.id": args.tid, "linger.ms": 5})
    producer.init_transactions(60)  # fences a predecessor and aborts its open transaction
    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": args.group, "group.instance.id": args.tid,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed", "session.timeout.ms": 10000})
    consumer.subscribe([args.source])
    while True:
        records = [m for m in consumer.consume(num_messages=args.batch, timeout=1.0) if m.error() is None]
        if not records:
            continue
        producer.begin_transaction()
        for m in records:
            producer.produce(args.sink, b"out-" + m.value(), partition=m.partition())
        producer.flush(60)
        print("open", len(records), flush=True)  # the output is in the log, the transaction open
        time.sleep(args.pause_ms / 1000)
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(), 60)
        producer.commit_transaction(60)
        print("committed", len(records), flush=True)


async def moldau(args: argparse.Namespace) -> None:
    from moldau.aio import Consumer, Producer

    async with Producer(bootstrap_servers=args.bootstrap, transactional_id=args.tid, linger_ms=5) as producer:
        await producer.init_transactions()
        async with Consumer(bootstrap_servers=args.bootstrap, group_id=args.group, group_instance_id=args.tid,
                            enable_auto_commit=False, auto_offset_reset="earliest",
                            isolation_level="read_committed", session_timeout_ms=10000) as consumer:
            consumer.subscribe([args.source])
            while True:
                batches: dict[Any, list[Any]] = await consumer.getmany(timeout_ms=1000, max_records=args.batch)
                if not any(batches.values()):
                    continue
                producer.begin_transaction()
                for tp, records in batches.items():
                    for r in records:
                        await producer.send(args.sink, b"out-" + r.value, partition=tp.partition)
                await producer.flush()
                print("open", sum(len(r) for r in batches.values()), flush=True)
                await asyncio.sleep(args.pause_ms / 1000)
                await producer.send_offsets_to_transaction(
                    {tp: await consumer.position(tp) for tp in batches}, consumer.group_metadata())
                await producer.commit_transaction()
                print("committed", sum(len(r) for r in batches.values()), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("client", choices=["moldau", "confluent"])
    ap.add_argument("bootstrap")
    ap.add_argument("source")
    ap.add_argument("sink")
    ap.add_argument("group")
    ap.add_argument("tid")
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--pause-ms", type=int, default=100)
    args = ap.parse_args()
    if args.client == "confluent":
        confluent(args)
    else:
        asyncio.run(moldau(args))


if __name__ == "__main__":
    main()
