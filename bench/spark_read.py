"""Batch read through the moldau Spark data source vs Moldau's own consumer, side by side in one run.

    .venv/bin/python bench/spark_read.py                    # 1,000,000 x 100 B, 2 partitions, local[2]
    .venv/bin/python bench/spark_read.py --records 200000

One broker (started here, temporary log dir). The topic is written once; then
  * consumer: moldau.aio.Consumer assigned both partitions reads every record (one process);
  * spark-arrow: spark.read.format("moldau") ... write.format("noop") (every column materialised in the JVM),
    rows crossing as Arrow record batches (what the source does);
  * spark-tuples: the same reader yielding plain tuples (the alternative, for comparison).
Spark figures exclude session start-up; each is the best of --repeat runs (the formats interleaved) after one
warm-up query each.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.integration.harness import BrokerProcess  # noqa: E402
from tests.integration.spark_session import SPARK_CONF, spark_env  # noqa: E402


async def _produce(bootstrap: str, topic: str, n: int, size: int) -> None:
    from moldau.aio import AdminClient, NewTopic, Producer

    async with AdminClient(bootstrap_servers=bootstrap) as admin:
        await admin.create_topics([NewTopic(topic, 2, 1)])
    value = b"x" * size
    async with Producer(bootstrap_servers=bootstrap, linger_ms=5, batch_size=1 << 20, acks="1") as p:
        for part in range(2):
            await (await p.send_many(topic, (value for _ in range(n // 2)), partition=part))


async def _consume(bootstrap: str, topic: str, n: int) -> float:
    from moldau.aio import Consumer, TopicPartition

    start = time.perf_counter()
    async with Consumer(bootstrap_servers=bootstrap, enable_auto_commit=False) as c:
        c.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        c.seek_to_beginning(TopicPartition(topic, 0), TopicPartition(topic, 1))
        seen = 0
        while seen < n:
            got = await c.getmany(timeout_ms=1000, max_records=100000)
            seen += sum(len(v) for v in got.values())
    return time.perf_counter() - start


def _tuple_source() -> Any:
    from moldau.spark import MoldauDataSource
    from moldau.spark import options as opts
    from moldau.spark.reader import MoldauBatchReader, RangePartition, read_range

    class TupleReader(MoldauBatchReader):
        def read(self, partition: Any) -> Iterator[Any]:
            assert isinstance(partition, RangePartition)
            return read_range(self.options, partition.range, arrow=False)

    class TupleSource(MoldauDataSource):
        @classmethod
        def name(cls) -> str:
            return "moldau_tuples"

        def reader(self, schema: Any) -> Any:
            return TupleReader(opts.parse(self.options, streaming=False))

    return TupleSource


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--option wants KEY=VALUE, got {text!r}")
    return key, value


def _spark_read(spark: Any, fmt: str, bootstrap: str, topic: str, options: dict[str, str]) -> float:
    start = time.perf_counter()
    (spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
     .options(**options).load().write.format("noop").mode("overwrite").save())
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--skip-tuples", action="store_true")
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", type=_key_value,
                    help="a source option for the Spark reads, e.g. kafka.max.partition.fetch.bytes=8388608")
    args = ap.parse_args()
    options = dict(args.option)
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp) / "broker").start()
        try:
            topic = "spark-bench"
            t = time.perf_counter()
            asyncio.run(_produce(broker.bootstrap, topic, args.records, args.size))
            print(f"produced {args.records:,} x {args.size} B in {time.perf_counter() - t:.1f}s", flush=True)
            consumer_s = min(asyncio.run(_consume(broker.bootstrap, topic, args.records))
                             for _ in range(args.repeat))
            print(f"consumer: {args.records / consumer_s:,.0f} rows/s ({consumer_s:.2f}s)", flush=True)
            os.environ.update(spark_env())
            from pyspark.sql import SparkSession

            builder = SparkSession.builder.master("local[2]").appName("moldau-bench")
            for key, value in SPARK_CONF.items():
                builder = builder.config(key, value)
            spark = builder.getOrCreate()
            spark.sparkContext.setLogLevel("ERROR")
            spark.dataSource.register(_tuple_source())
            formats = ["moldau"] + ([] if args.skip_tuples else ["moldau_tuples"])
            for fmt in formats:
                _spark_read(spark, fmt, broker.bootstrap, topic, options)  # warm-up: Python workers, JIT
            best = dict.fromkeys(formats, float("inf"))
            for _ in range(args.repeat):  # interleaved, so a change in machine load hits both alike
                for fmt in formats:
                    best[fmt] = min(best[fmt], _spark_read(spark, fmt, broker.bootstrap, topic, options))
            for fmt in formats:
                print(f"spark {fmt}: {args.records / best[fmt]:,.0f} rows/s ({best[fmt]:.2f}s); "
                      f"{consumer_s / best[fmt]:.2f}x the consumer's rate", flush=True)
            spark.stop()
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
