"""Replicated produce throughput and end-to-end latency, next to the single-broker acks=1 baseline of the same run.

    .venv/bin/python bench/produce_consume.py --replicated               # 500,000 x 100 B, 10 s latency runs
    .venv/bin/python bench/replicated.py --records 200000 --latency-s 5

Starts ZooKeeper (Debian's package, as the tests do) and three brokers, plus one standalone broker for the
baseline. Measures with confluent-kafka:
  * baseline: one broker, replication factor 1, acks=1;
  * replicated: three brokers, replication factor 3, min.insync.replicas=2, acks=all;
both 100-byte records into one partition (linger.ms=5, batch.size=1 MiB), records/s until all are acknowledged;
then end-to-end latency (produce() call to the consumer receiving the record) at a fixed 10,000 records/s.

The latency runs keep linger.ms=5 (librdkafka's default). linger.ms=0 with unbounded in-flight requests, where a
request carries a handful of records, is measured by bench/latency_matrix.py and bench/small_requests.py (issue
#21).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench._cluster import cluster, create_topic  # noqa: E402


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def producer(bootstrap: str, acks: int, records: int, linger_ms: int = 5) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": linger_ms, "batch.size": 1048576,
                     "batch.num.messages": 1000000, "queue.buffering.max.messages": max(records + 1000, 100000),
                     "queue.buffering.max.kbytes": 2097151, "compression.type": "none",
                     "message.timeout.ms": 300000, "delivery.report.only.error": True})


def throughput(bootstrap: str, topic: str, acks: int, records: int) -> float:
    errors: list[Any] = []
    p = producer(bootstrap, acks, records)
    p.list_topics(topic, timeout=10)
    value = b"x" * 100
    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                p.produce(topic, value, partition=0, on_delivery=lambda err, _m: err and errors.append(err))
                break
            except BufferError:
                p.poll(0.001)
        if i & 0x3FFF == 0:
            p.poll(0)
    remaining = p.flush(300)
    elapsed = time.perf_counter() - start
    if remaining or errors:
        raise RuntimeError(f"{remaining} undelivered, errors {errors[:3]}")
    return records / elapsed


def latency(bootstrap: str, topic: str, acks: int, rate: int, seconds: float,
            linger_ms: int = 5) -> tuple[float, float, int]:
    """(p50 ms, p99 ms, records) of produce-to-consume latency at ``rate`` records/s."""
    total = int(rate * seconds)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"lat-{time.time_ns()}",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100, "fetch.min.bytes": 1})
    consumer.assign([TopicPartition(topic, 0, OFFSET_END)])
    consumer.consume(1, 2.0)  # connected and positioned before the clock starts
    samples: list[float] = []
    done = threading.Event()

    def consume() -> None:
        deadline = time.monotonic() + seconds + 30
        while len(samples) < total and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.002):
                if msg.error() is None:
                    samples.append((time.time_ns() - int(msg.value()[:20])) / 1e6)
        done.set()

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    p = producer(bootstrap, acks, total, linger_ms=linger_ms)
    p.list_topics(topic, timeout=10)
    start = time.perf_counter()
    sent = 0
    while sent < total:
        due = min(total, int((time.perf_counter() - start) * rate) + 1)
        while sent < due:
            p.produce(topic, str(time.time_ns()).rjust(20, "0").encode() + b"y" * 80, partition=0)
            sent += 1
        p.poll(0)
        time.sleep(0.0005)
    p.flush(60)
    done.wait(seconds + 40)
    consumer.close()
    if len(samples) < total:
        raise RuntimeError(f"consumed {len(samples)} of {total}")
    q = statistics.quantiles(samples, n=100)
    return q[49], q[98], len(samples)


def run(records: int, latency_s: float, rate: int) -> str:
    with cluster(single=True) as c:
        assert c.single is not None
        single, bootstrap = c.single, c.bootstrap
        create_topic(single.bootstrap, "base", rf=1)
        create_topic(bootstrap, "repl", rf=3)
        log(f"baseline: {records:,} x 100 B, one broker, acks=1 ...")
        base = throughput(single.bootstrap, "base", 1, records)
        log(f"replicated: {records:,} x 100 B, RF 3, min.insync.replicas=2, acks=all ...")
        repl = throughput(bootstrap, "repl", -1, records)
        log(f"latency at {rate:,} records/s for {latency_s:.0f} s, one broker acks=1 and RF 3 acks=all ...")
        create_topic(single.bootstrap, "base-lat", rf=1)
        create_topic(bootstrap, "repl-lat", rf=3)
        b50, b99, _ = latency(single.bootstrap, "base-lat", 1, rate, latency_s)
        r50, r99, _ = latency(bootstrap, "repl-lat", -1, rate, latency_s)
    return "\n".join([
        f"{'setup':<44} {'produce rec/s':>13} {'ratio':>6} | {'e2e p50 ms':>10} {'e2e p99 ms':>10} @ {rate:,}/s",
        f"{'1 broker, RF 1, acks=1':<44} {base:>13,.0f} {1:>6.2f} | {b50:>10.1f} {b99:>10.1f}",
        f"{'3 brokers, RF 3, min.insync=2, acks=all':<44} {repl:>13,.0f} {repl / base:>6.2f} | {r50:>10.1f} "
        f"{r99:>10.1f}",
        f"{records:,} records of 100 B, one partition, confluent-kafka, linger.ms=5 (librdkafka's default, also in "
        "the latency runs)"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--latency-s", type=float, default=10.0)
    parser.add_argument("--rate", type=int, default=10_000)
    args = parser.parse_args(argv)
    print(run(args.records, args.latency_s, args.rate))
    return 0


if __name__ == "__main__":
    sys.exit(main())
