"""Tiered storage elasticity: reassigning a mostly tiered partition to a new broker against the same partition
untiered, in one run.

    .venv/bin/python bench/tiered_elasticity.py              # 1024 MB per partition, 90% of it tiered
    .venv/bin/python bench/tiered_elasticity.py --mb 256

Starts ZooKeeper and two brokers sharing a filesystem store (``rsm.config.dir``). Two single-replica topics on
broker 1 get the same ``--mb`` of 1 KiB records: ``plain`` (untiered) and ``tiered`` (``remote.storage.enable``,
``local.retention.bytes`` = (1 - ``--tiered-fraction``) of the partition less one segment, so the
local tail, whole segments, is at most that share). Once the tiered partition's local log is
down to its retention, each partition is moved from [1] to [2] (kafka-python's AlterPartitionReassignments), one
after the other, timed until the controller finished (the topic znode shows [2], the ISR is [2], broker 1 deleted its replica). Bytes moved:
what broker 2 fetched as a follower (its partition directory's .log bytes when the move finished). The issue's
acceptance: the tiered move copies >= 10x fewer bytes and finishes >= 5x sooner. Not part of the tests.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.integration.harness import BrokerProcess, wait_until  # noqa: E402
from tests.integration.zookeeper import ZooKeeperProcess  # noqa: E402

SEGMENT_BYTES = 4 * 1024 * 1024


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def fill(bootstrap: str, topic: str, records: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20, "batch.size": 1048576,
                  "queue.buffering.max.kbytes": 1048576, "queue.buffering.max.messages": 1000000,
                  "message.timeout.ms": 600000})
    value = b"x" * 1024
    for _ in range(records):
        while True:
            try:
                p.produce(topic, value, partition=0)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(600) == 0


def log_bytes(directory: Path) -> int:
    return sum(f.stat().st_size for f in directory.glob("*.log")) if directory.exists() else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=1024, help="MiB per partition (1024)")
    parser.add_argument("--tiered-fraction", type=float, default=0.9, help="share of the partition tiered (0.9)")
    args = parser.parse_args()
    size = args.mb * 1024 * 1024
    records = size // 1024
    # Local retention keeps whole segments, at least local.retention.bytes: one segment under the untiered share
    # keeps the local tail at most that share.
    local_retention = int(size * (1 - args.tiered_fraction)) - SEGMENT_BYTES
    root = Path(tempfile.mkdtemp(prefix="moldau-bench-elastic-"))
    zk = ZooKeeperProcess(root / "zk")
    brokers: dict[int, BrokerProcess] = {}
    try:
        zk.start()
        for i in (1, 2):
            brokers[i] = BrokerProcess(root / f"b{i}", broker_id=i, overrides={
                "zookeeper.connect": zk.connect + "/bench", "zookeeper.session.timeout.ms": "6000",
                "auto.leader.rebalance.enable": "false", "remote.log.storage.system.enable": "true",
                "remote.log.storage.manager.class.name": "filesystem", "rsm.config.dir": str(root / "remote"),
                "remote.log.manager.task.interval.ms": "1000",
                "rlmm.config.remote.log.metadata.topic.num.partitions": "2",
                "rlmm.config.remote.log.metadata.topic.replication.factor": "2"}).start()
        bootstrap = ",".join(b.bootstrap for b in brokers.values())
        kz = KazooClient(zk.connect + "/bench")
        kz.start(timeout=10)
        wait_until(lambda: len(kz.get_children("/brokers/ids")) == 2, 30, "two brokers")
        admin = AdminClient({"bootstrap.servers": bootstrap})
        segment = {"segment.bytes": str(SEGMENT_BYTES)}
        for name, configs in (("plain", segment), ("tiered", {**segment, "remote.storage.enable": "true",
                                                              "local.retention.bytes": str(local_retention)})):
            admin.create_topics([NewTopic(name, num_partitions=1, replica_assignment=[[1]], config=configs)])[
                name].result(30)
        for name in ("plain", "tiered"):
            log(f"writing {args.mb} MiB ({records:,} x 1 KiB, acks=all) into {name}-0 on broker 1 ...")
            t0 = time.monotonic()
            fill(bootstrap, name, records)
            log(f"  {time.monotonic() - t0:.1f} s")
        tiered_dir = brokers[1].partition_dir("tiered")
        t0 = time.monotonic()
        wait_until(lambda: log_bytes(tiered_dir) <= local_retention + SEGMENT_BYTES, 1800,
                   "the tiered partition's segments copied and deleted locally", interval=0.5)
        remote_bytes = sum(f.stat().st_size for f in (root / "remote").rglob("*.log"))
        local_bytes = log_bytes(tiered_dir)
        total = log_bytes(brokers[1].partition_dir("plain"))
        log(f"copied to remote storage in {time.monotonic() - t0:.1f} s more: local {local_bytes:,} B, "
            f"remote {remote_bytes:,} B")

        from kafka import TopicPartition as KpTopicPartition
        from kafka.admin import KafkaAdminClient

        kp = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
        results: dict[str, tuple[float, int]] = {}
        for name in ("plain", "tiered"):
            def done(topic: str = name) -> bool:
                replicas = json.loads(kz.get(f"/brokers/topics/{topic}")[0])["partitions"]["0"]
                state = json.loads(kz.get(f"/brokers/topics/{topic}/partitions/0/state")[0])
                # ... and the old replica stopped and deleted: the next move starts on an idle controller.
                return bool(replicas == [2] and state["isr"] == [2] and state["leader"] == 2
                            and not (brokers[1].log_dir / f"{topic}-0").exists()
                            and not kz.exists("/admin/reassign_partitions"))

            log(f"moving {name}-0 from [1] to [2] ...")
            t0 = time.monotonic()
            kp.alter_partition_reassignments({KpTopicPartition(name, 0): [2]})
            wait_until(done, 1800, f"the move of {name}-0", interval=0.05)
            seconds = time.monotonic() - t0
            moved = log_bytes(brokers[2].partition_dir(name))
            results[name] = (seconds, moved)
            log(f"  {seconds:.2f} s, {moved:,} B on broker 2")
        kp.close()
        kz.stop()
        (plain_s, plain_b), (tiered_s, tiered_b) = results["plain"], results["tiered"]
        print(f"partition {args.mb} MiB ({total:,} B of log), {1 - local_bytes / total:.1%} only in remote storage "
              f"(local tail {local_bytes:,} B; local.retention.bytes {local_retention:,}, segment.bytes "
              f"{SEGMENT_BYTES:,}; remote {remote_bytes:,} B)")
        print("| partition | bytes moved | move time s |")
        print("|---|---|---|")
        print(f"| untiered | {plain_b:,} | {plain_s:.2f} |")
        print(f"| tiered | {tiered_b:,} | {tiered_s:.2f} |")
        print(f"| ratio | {plain_b / max(tiered_b, 1):.1f}x fewer bytes | {plain_s / tiered_s:.1f}x sooner |")
    finally:
        for b in brokers.values():
            b.kill()
        zk.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
