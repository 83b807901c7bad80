"""Batch write through the moldau Spark sink: rows as Arrow record batches (what the sink does) vs pickled Rows.

    .venv/bin/python bench/spark_write.py                     # 300,000 x 100 B into a 2-partition topic

One broker (started here). spark.range(n) -> key (string), value (100 B binary) -> write.format(...); each format
is timed after one warm-up write, best of --repeat, the formats interleaved; session start-up not counted.
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


async def _create(bootstrap: str, topic: str) -> None:
    from moldau.aio import AdminClient, NewTopic

    async with AdminClient(bootstrap_servers=bootstrap) as admin:
        await admin.create_topics([NewTopic(topic, 2, 1)])


def _row_sink() -> Any:
    from pyspark.sql.datasource import DataSourceWriter, WriterCommitMessage

    from moldau.spark import MoldauDataSource
    from moldau.spark import options as opts
    from moldau.spark.writer import write_rows

    class RowWriter(DataSourceWriter):
        def __init__(self, options: opts.SinkOptions) -> None:
            self.options = options

        def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
            write_rows(self.options, iterator)
            return WriterCommitMessage()

    class RowSink(MoldauDataSource):
        @classmethod
        def name(cls) -> str:
            return "moldau_rows"

        def writer(self, schema: Any, overwrite: bool) -> Any:
            return RowWriter(opts.parse_sink(self.options))

    return RowSink


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp) / "broker").start()
        try:
            topic = "spark-write-bench"
            asyncio.run(_create(broker.bootstrap, topic))
            os.environ.update(spark_env())
            from pyspark.sql import SparkSession

            builder = SparkSession.builder.master("local[2]").appName("moldau-write-bench")
            for key, value in SPARK_CONF.items():
                builder = builder.config(key, value)
            spark = builder.getOrCreate()
            spark.sparkContext.setLogLevel("ERROR")
            spark.dataSource.register(_row_sink())
            df = spark.range(0, args.records, 1, 2).selectExpr(
                "CAST(id AS STRING) AS key", f"CAST(repeat('x', {args.size}) AS BINARY) AS value").cache()
            df.count()

            def write(fmt: str) -> float:
                start = time.perf_counter()
                df.write.format(fmt).option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic) \
                    .mode("append").save()
                return time.perf_counter() - start

            formats = ["moldau", "moldau_rows"]
            for fmt in formats:
                write(fmt)  # warm-up
            best = dict.fromkeys(formats, float("inf"))
            for _ in range(args.repeat):
                for fmt in formats:
                    best[fmt] = min(best[fmt], write(fmt))
            for fmt in formats:
                print(f"spark write {fmt}: {args.records / best[fmt]:,.0f} rows/s ({best[fmt]:.2f}s)", flush=True)
            spark.stop()
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
