"""End-to-end latency of a streaming job on the moldau data source: produce -> visible in the sink.

    .venv/bin/python bench/spark_stream_latency.py                  # 10,000 rows/s for 30 s, 1 s trigger

One broker (started here). A producer writes 100 B records to a 2-partition topic at --rate rows/s; a Structured
Streaming query (local[2], processingTime trigger) reads it with format("moldau") and writes each row, keyed by
its input timestamp, to an output topic through format("moldau"). The output topic has
message.timestamp.type=LogAppendTime, so each output record carries the moment the broker appended it: the row
became visible in the sink. Latency = that append time - the input record's CreateTime (one machine, one clock).
A warm-up query of the same shape runs first (AvailableNow over a small topic); the first --warmup seconds of the
measured run are still reported apart.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.integration.harness import BrokerProcess  # noqa: E402
from tests.integration.spark_session import SPARK_CONF, spark_env  # noqa: E402


async def _create(bootstrap: str, src: str, out: str) -> None:
    from moldau.aio import AdminClient, NewTopic

    async with AdminClient(bootstrap_servers=bootstrap) as admin:
        await admin.create_topics([NewTopic(src, 2, 1),
                                   NewTopic(out, 2, 1, config={"message.timestamp.type": "LogAppendTime"})])


async def _produce(bootstrap: str, topic: str, rate: int, seconds: float, size: int) -> int:
    """``rate`` rows/s in steps of 10 ms (rate/100 rows each); returns the number produced."""
    from moldau.aio import Producer

    value = b"x" * size
    step = max(1, rate // 100)
    sent = 0
    async with Producer(bootstrap_servers=bootstrap, linger_ms=1, acks="1") as p:
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            for _ in range(step):
                if p.send_nowait(topic, value, partition=sent % 2) is None:
                    await p.send(topic, value, partition=sent % 2)
                sent += 1
            ahead = start + sent / rate - time.monotonic()
            if ahead > 0:
                await asyncio.sleep(ahead)
        await p.flush()
    return sent


async def _latencies(bootstrap: str, out: str, n: int, timeout_s: float) -> list[tuple[int, int]]:
    """(input CreateTime ms, latency ms) of the first ``n`` output records."""
    from moldau.aio import Consumer, TopicPartition

    tps = [TopicPartition(out, 0), TopicPartition(out, 1)]
    got: list[tuple[int, int]] = []
    deadline = time.monotonic() + timeout_s
    async with Consumer(bootstrap_servers=bootstrap, enable_auto_commit=False) as c:
        c.assign(tps)
        c.seek_to_beginning(*tps)
        while len(got) < n and time.monotonic() < deadline:
            for records in (await c.getmany(timeout_ms=1000, max_records=100000)).values():
                got.extend((int(r.key), r.timestamp - int(r.key)) for r in records)
    return got


def _pct(values: list[int], q: float) -> int:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=int, default=10_000, help="rows per second")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--trigger", default="1 second")
    ap.add_argument("--warmup", type=float, default=5.0, help="seconds at the start reported apart")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp) / "broker").start()
        try:
            src, out = "latency-in", "latency-out"
            asyncio.run(_create(broker.bootstrap, src, out))
            os.environ.update(spark_env())
            from pyspark.sql import SparkSession

            builder = SparkSession.builder.master("local[2]").appName("moldau-latency-bench")
            for key, value in SPARK_CONF.items():
                builder = builder.config(key, value)
            spark = builder.getOrCreate()
            spark.sparkContext.setLogLevel("ERROR")
            # Warm-up: the session's first streaming query pays for JVM code paths and Python workers (~10 s
            # here); run the same shape once over a small topic so the measured query starts warm.
            asyncio.run(_create(broker.bootstrap, "warm-in", "warm-out"))
            asyncio.run(_produce(broker.bootstrap, "warm-in", args.rate, 1.0, args.size))
            _start(spark, broker.bootstrap, "warm-in", "warm-out", Path(tmp) / "warm", None).awaitTermination()
            query = _start(spark, broker.bootstrap, src, out, Path(tmp) / "checkpoint", args.trigger)
            while query.lastProgress is None:  # batch 0 pins the start (startingOffsets=latest)
                time.sleep(0.1)
            t0 = time.time() * 1000
            sent = asyncio.run(_produce(broker.bootstrap, src, args.rate, args.seconds, args.size))
            print(f"produced {sent:,} rows at {args.rate:,} rows/s", flush=True)
            got = asyncio.run(_latencies(broker.bootstrap, out, sent, 120))
            progress = [json.loads(p.json) for p in query.recentProgress]
            durations = [p["durationMs"]["triggerExecution"] for p in progress if p["numInputRows"]]
            for p in progress:  # where each micro-batch's time goes
                if p["numInputRows"]:
                    print(f"batch {p['batchId']}: {p['numInputRows']:,} rows, durationMs {p['durationMs']}",
                          flush=True)
            query.stop()
            spark.stop()
            _report(got, sent, t0 + args.warmup * 1000, durations)
        finally:
            broker.stop()


def _start(spark: Any, bootstrap: str, src: str, out: str, checkpoint: Path, trigger: str | None) -> Any:
    """The measured query (``trigger``: processingTime) or, with None, the warm-up (earliest, AvailableNow)."""
    writer = (spark.readStream.format("moldau").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", src).option("startingOffsets", "latest" if trigger else "earliest").load()
              .selectExpr("CAST(unix_millis(timestamp) AS STRING) AS key", "value")
              .writeStream.format("moldau").option("kafka.bootstrap.servers", bootstrap).option("topic", out)
              .option("checkpointLocation", str(checkpoint)))
    return writer.trigger(processingTime=trigger).start() if trigger else writer.trigger(availableNow=True).start()


def _report(got: list[tuple[int, int]], sent: int, steady_from_ms: float, durations: list[int]) -> None:
    print(f"sink holds {len(got):,} of {sent:,} rows", flush=True)
    warm = [lat for ts, lat in got if ts < steady_from_ms]
    steady = [lat for ts, lat in got if ts >= steady_from_ms]
    for name, lats in (("warm-up", warm), ("steady", steady)):
        if lats:
            print(f"{name}: {len(lats):,} rows; latency ms p50 {_pct(lats, 0.5)}, p95 {_pct(lats, 0.95)}, "
                  f"p99 {_pct(lats, 0.99)}, max {max(lats)}, mean {statistics.fmean(lats):.0f}", flush=True)
    if durations:
        print(f"micro-batches with data: {len(durations)}; duration ms p50 {_pct(durations, 0.5)}, "
              f"max {max(durations)}", flush=True)


if __name__ == "__main__":
    main()
