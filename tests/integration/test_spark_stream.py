"""The moldau Spark data source, streaming: maxOffsetsPerTrigger over several micro-batches into parquet, a
kill -9 of the driver and a restart from the checkpoint with no record lost or duplicated (startingOffsets=latest,
the batch-0 trap), new topics matching subscribePattern and new partitions, a streaming write, and
commitOffsetsToGroup."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions

from .harness import REPO_ROOT, BrokerProcess, wait_until
from .spark_session import (
    spark_env,
    spark_session,  # noqa: F401  (the session-wide Spark fixture, `spark`)
)
from .test_spark_batch import consume_all, create_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DRIVER_START_TIMEOUT_S = 180  # a cold JVM on a loaded two-core machine


def produce_values(bootstrap: str, topic: str, values: range, partitions: int = 2) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in values:
        p.produce(topic, value=b"%d" % i, partition=i % partitions)
    assert p.flush(30) == 0


def batch_files(checkpoint: Path, kind: str) -> list[int]:
    d = checkpoint / kind
    return sorted(int(f.name) for f in d.iterdir() if f.name.isdigit()) if d.is_dir() else []


def offsets_of(checkpoint: Path, batch: int) -> dict[str, dict[str, int]]:
    """The moldau source's end offsets recorded for ``batch`` (Spark's offset log: last line is the source's)."""
    return json.loads((checkpoint / "offsets" / str(batch)).read_text().splitlines()[-1])


def test_restart_from_checkpoint_after_kill_loses_and_duplicates_nothing(
        spark: Any, broker: BrokerProcess, topic: str, tmp_path: Path) -> None:
    create_topic(broker.bootstrap, topic, 2)
    produce_values(broker.bootstrap, topic, range(0, 100))  # before the query: startingOffsets=latest skips them
    checkpoint, output = tmp_path / "checkpoint", tmp_path / "out"
    driver = subprocess.Popen(
        [sys.executable, str(REPO_ROOT / "tests/integration/spark_stream_driver.py"), broker.bootstrap, topic,
         str(checkpoint), str(output), "30"],
        env={**os.environ, **spark_env()}, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "driver.stderr", "wb"), start_new_session=True)
    try:
        wait_until(lambda: 0 in batch_files(checkpoint, "commits"), DRIVER_START_TIMEOUT_S,
                   "batch 0 (it pins the start offsets)")
        assert offsets_of(checkpoint, 0) == {topic: {"0": 50, "1": 50}}
        produce_values(broker.bootstrap, topic, range(100, 400))
        wait_until(lambda: len(batch_files(checkpoint, "commits")) >= 4, 120, "three micro-batches with data")
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(30)
    done = batch_files(checkpoint, "commits")
    produce_values(broker.bootstrap, topic, range(400, 500))
    query = (spark.readStream.format("moldau").option("kafka.bootstrap.servers", broker.bootstrap)
             .option("subscribe", topic).option("maxOffsetsPerTrigger", "30").load()
             .select("partition", "offset", "value").writeStream.format("parquet")
             .option("checkpointLocation", str(checkpoint)).option("path", str(output))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(240), "the restarted query did not finish"
    assert query.exception() is None
    got = [int(bytes(r.value)) for r in spark.read.parquet(str(output)).collect()]
    assert sorted(got) == list(range(100, 500)), "lost or duplicated records"
    batches = batch_files(checkpoint, "offsets")
    assert len(batches) >= len(done) + 400 // 30 - 3
    for prev, cur in zip(batches, batches[1:]):
        a, b = offsets_of(checkpoint, prev)[topic], offsets_of(checkpoint, cur)[topic]
        assert 0 <= sum(b[p] - a[p] for p in b) <= 30  # maxOffsetsPerTrigger held in every micro-batch
    assert offsets_of(checkpoint, batches[-1]) == {topic: {"0": 250, "1": 250}}


def test_streaming_write_group_commit_and_new_pattern_topics(
        spark: Any, broker: BrokerProcess, topic: str, tmp_path: Path) -> None:
    first, second, out = f"{topic}-in-a", f"{topic}-in-b", f"{topic}-out"
    group = f"{topic}-group"
    create_topic(broker.bootstrap, first, 2)
    create_topic(broker.bootstrap, out, 1)
    produce_values(broker.bootstrap, first, range(0, 40))
    query = (spark.readStream.format("moldau").option("kafka.bootstrap.servers", broker.bootstrap)
             .option("subscribePattern", f"{topic}-in-.*").option("startingOffsets", "earliest")
             .option("commitOffsetsToGroup", group).load()
             .selectExpr("value", "CAST(topic AS BINARY) AS key").writeStream.format("moldau")
             .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", out)
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(processingTime="500 milliseconds").start())
    try:
        create_topic(broker.bootstrap, second, 1)  # appears while the query runs: a later batch picks it up
        produce_values(broker.bootstrap, second, range(40, 60), partitions=1)
        add_partition(broker.bootstrap, first, 3)  # CreatePartitions while the query runs: read from offset 0
        p = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(60, 70):
            p.produce(first, value=b"%d" % i, partition=2)
        assert p.flush(30) == 0
        wanted = {(first, "0"): 20, (first, "1"): 20, (first, "2"): 10, (second, "0"): 20}
        wait_until(lambda: committed(broker.bootstrap, group) == wanted or None, 180,
                   "the group to show the end offsets of the last micro-batch")
    finally:
        query.stop()
    assert query.exception() is None
    got = consume_all(broker.bootstrap, out, 70)
    assert sorted(int(v) for _, _, v, _ in got) == list(range(70))
    assert {k.decode() for _, k, _, _ in got} == {first, second}


def add_partition(bootstrap: str, topic: str, total: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_partitions([NewPartitions(topic, total)])[topic].result(30)


def committed(bootstrap: str, group: str) -> dict[tuple[str, str], int]:
    """The group's committed offsets as moldau-consumer-groups --describe --json shows them."""
    proc = subprocess.run([str(Path(sys.executable).with_name("moldau-consumer-groups")), "--bootstrap-server",
                           bootstrap, "--describe", "--group", group, "--json"],
                          capture_output=True, timeout=60, text=True)
    if proc.returncode != 0:
        return {}
    out: dict[tuple[str, str], int] = {}
    for g in json.loads(proc.stdout):
        for row in g["partitions"]:
            out[(row["topic"], str(row["partition"]))] = row["current_offset"]
    return out
