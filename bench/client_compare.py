"""Client comparison: Moldau's client (async and sync) vs confluent-kafka, aiokafka and kafka-python.

    .venv/bin/python bench/client_compare.py                       # 1,000,000 x 100 B
    .venv/bin/python bench/client_compare.py --records 200000 --clients moldau-async,confluent

One broker (started here, temporary log dir); acks=1, linger 5 ms, 1 MiB batches, one partition, no compression.
Every client runs in its own process (so its RSS is its own): it produces N records into a fresh topic, then
consumes them back from the beginning. Produce time: first send until every record is acknowledged. Consume time:
from the consumer's creation to the last record handed to Python with key and value available; the rate after the
first record is reported too. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BATCH = 1024 * 1024
CLIENTS = ["moldau-async", "moldau-async-many", "moldau-sync", "confluent", "aiokafka", "kafka-python"]


def _value(n: int, size: int) -> bytes:
    return (b"%010d" % n).ljust(size, b"x")


# ---------------------------------------------------------------------------------------------- producers
async def _moldau_async(bs: str, topic: str, n: int, size: int, many: bool) -> None:
    from moldau.aio import Producer

    async with Producer(bootstrap_servers=bs, acks=1, linger_ms=5, batch_size=BATCH, buffer_memory=256 << 20,
                        max_request_size=8 << 20) as p:
        payload = _value(0, size)
        if many:
            chunk = 10_000
            futs = [await p.send_many(topic, [payload] * min(chunk, n - i), partition=0) for i in range(0, n, chunk)]
            for f in futs:
                await f
        else:
            last = None
            for _ in range(n):
                last = await p.send(topic, payload, partition=0)
            await p.flush()
            assert last is not None and (await last).offset >= 0


def produce(client: str, bs: str, topic: str, n: int, size: int) -> float:
    payload = _value(0, size)
    t0 = time.perf_counter()
    if client in ("moldau-async", "moldau-async-many"):
        asyncio.run(_moldau_async(bs, topic, n, size, client.endswith("many")))
    elif client == "moldau-sync":
        from moldau import Producer

        with Producer(bootstrap_servers=bs, acks=1, linger_ms=5, batch_size=BATCH, buffer_memory=256 << 20,
                      max_request_size=8 << 20) as p:
            for _ in range(n):
                p.produce(topic, payload, partition=0)
            p.flush()
    elif client == "confluent":
        from confluent_kafka import Producer as CK

        ck = CK({"bootstrap.servers": bs, "acks": 1, "linger.ms": 5, "batch.size": BATCH,
                 "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 1 << 21})
        for _ in range(n):
            ck.produce(topic, payload, partition=0)
            ck.poll(0) if _ % 10000 == 0 else None
        ck.flush(120)
    elif client == "aiokafka":
        async def go() -> None:
            from aiokafka import AIOKafkaProducer

            p = AIOKafkaProducer(bootstrap_servers=bs, acks=1, linger_ms=5, max_batch_size=BATCH,
                                 max_request_size=8 << 20)
            await p.start()
            try:
                last = None
                for _ in range(n):
                    last = await p.send(topic, payload, partition=0)
                await p.flush()
                assert last is not None
                await last
            finally:
                await p.stop()
        asyncio.run(go())
    elif client == "kafka-python":
        from kafka import KafkaProducer

        kp = KafkaProducer(bootstrap_servers=bs, acks=1, linger_ms=5, batch_size=BATCH, max_request_size=8 << 20)
        for _ in range(n):
            kp.send(topic, payload, partition=0)
        kp.flush()
        kp.close()
    return time.perf_counter() - t0


# ---------------------------------------------------------------------------------------------- consumers
def consume(client: str, bs: str, topic: str, n: int) -> tuple[float, float]:
    """(seconds from creation to the last record, seconds from the first record to the last)."""
    t0 = time.perf_counter()
    first = None
    got = 0
    if client.startswith("moldau"):
        async def go() -> float:
            from moldau.aio import Consumer, TopicPartition

            nonlocal got
            c = Consumer(bootstrap_servers=bs, enable_auto_commit=False, auto_offset_reset="earliest",
                         max_partition_fetch_bytes=4 << 20, fetch_max_bytes=16 << 20, max_poll_records=100_000)
            await c.start()
            c.assign([TopicPartition(topic, 0)])
            t_first = 0.0
            try:
                while got < n:
                    batches = await c.getmany(timeout_ms=1000)
                    for records in batches.values():
                        if records and not t_first:
                            t_first = time.perf_counter()
                        for r in records:
                            r.key, r.value  # noqa: B018  (handed to Python)
                        got += len(records)
            finally:
                await c.close()
            return t_first
        first = asyncio.run(go())
    elif client == "confluent":
        from confluent_kafka import Consumer as CK
        from confluent_kafka import TopicPartition as TP

        c = CK({"bootstrap.servers": bs, "group.id": "bench", "enable.auto.commit": False,
                "auto.offset.reset": "earliest"})
        c.assign([TP(topic, 0, 0)])
        while got < n:
            msgs = c.consume(10000, 1.0)
            if msgs and first is None:
                first = time.perf_counter()
            for m in msgs:
                m.key(), m.value()
            got += len(msgs)
        c.close()
    elif client == "aiokafka":
        async def go2() -> float:
            from aiokafka import AIOKafkaConsumer, TopicPartition

            nonlocal got
            c = AIOKafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, auto_offset_reset="earliest",
                                 max_partition_fetch_bytes=4 << 20, fetch_max_bytes=16 << 20)
            await c.start()
            c.assign([TopicPartition(topic, 0)])
            t_first = 0.0
            try:
                while got < n:
                    batches = await c.getmany(timeout_ms=1000, max_records=100_000)
                    for records in batches.values():
                        if records and not t_first:
                            t_first = time.perf_counter()
                        for r in records:
                            r.key, r.value  # noqa: B018
                        got += len(records)
            finally:
                await c.stop()
            return t_first
        first = asyncio.run(go2())
    elif client == "kafka-python":
        from kafka import KafkaConsumer, TopicPartition

        c = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, auto_offset_reset="earliest",
                          max_partition_fetch_bytes=4 << 20, fetch_max_bytes=16 << 20)
        c.assign([TopicPartition(topic, 0)])
        while got < n:
            batches = c.poll(timeout_ms=1000, max_records=100_000)
            for records in batches.values():
                if records and first is None:
                    first = time.perf_counter()
                for r in records:
                    r.key, r.value  # noqa: B018
                got += len(records)
        c.close()
    end = time.perf_counter()
    return end - t0, end - (first or t0)


def child(args: argparse.Namespace) -> None:
    topic = f"bench-{args.child}-{int(time.time() * 1000)}"
    p_s = produce(args.child, args.bootstrap, topic, args.records, args.record_size)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    consume_client = "moldau" if args.child.startswith("moldau") else args.child
    c_s, c_after_first = consume(consume_client, args.bootstrap, topic, args.records)
    print(json.dumps({"client": args.child, "produce_rps": args.records / p_s, "produce_rss_mb": rss_mb,
                      "consume_rps": args.records / c_s, "consume_rps_after_first": args.records / c_after_first}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--record-size", type=int, default=100)
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    from tests.integration.harness import BrokerProcess

    work = Path(tempfile.mkdtemp(prefix="moldau-bench-"))
    broker = BrokerProcess(work / "broker", overrides={"message.max.bytes": str(16 << 20)})
    broker.start()
    try:
        print(f"{args.records:,} x {args.record_size} B, acks=1, linger 5 ms, 1 MiB batches, one partition")
        print(f"{'client':<18} {'produce rec/s':>14} {'RSS MB':>8} {'consume rec/s':>14} {'after 1st':>12}")
        for client in args.clients.split(","):
            out = subprocess.run([sys.executable, __file__, "--child", client, "--bootstrap", broker.bootstrap,
                                  "--records", str(args.records), "--record-size", str(args.record_size)],
                                 capture_output=True, text=True, timeout=900)
            if out.returncode != 0:
                print(f"{client:<18} failed: {out.stderr.strip().splitlines()[-1:]}")
                continue
            r: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"{client:<18} {r['produce_rps']:>14,.0f} {r['produce_rss_mb']:>8.0f} {r['consume_rps']:>14,.0f} "
                  f"{r['consume_rps_after_first']:>12,.0f}", flush=True)
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
