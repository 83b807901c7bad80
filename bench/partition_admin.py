"""Partition admin on four brokers: how long a reassignment takes to copy a partition to a new replica, and the
latency of CreatePartitions, DeleteRecords and ElectLeaders as an admin client sees it.

    .venv/bin/python bench/partition_admin.py            # 100 MB partition
    .venv/bin/python bench/partition_admin.py --mb 20

Starts ZooKeeper and four brokers, writes ``--mb`` of 1 KiB records (acks=all) into one partition on brokers
[1, 2, 3], then moves it to [2, 3, 4] (kafka-python's AlterPartitionReassignments) and times it until the
controller has finished (the topic znode shows [2, 3, 4] and the ISR is [2, 3, 4]): broker 4 copies the whole
partition. Then CreatePartitions 1 -> 8 (confluent-kafka, waiting for leaders), DeleteRecords of half the
partition (waiting for the in-sync followers) and a preferred ElectLeaders of every partition, each timed end to
end. Not part of the tests.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kazoo.client import KazooClient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench._cluster import cluster  # noqa: E402
from tests.integration.harness import wait_until  # noqa: E402


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=100)
    args = parser.parse_args()
    with cluster(4, prefix="moldau-bench-padmin-") as c:
        bootstrap = c.bootstrap
        kz = KazooClient(c.zk_connect)
        kz.start(timeout=10)
        wait_until(lambda: len(kz.get_children("/brokers/ids")) == 4, 30, "four brokers")
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("moved", num_partitions=1, replica_assignment=[[1, 2, 3]])])["moved"].result(30)

        def state() -> dict[str, object]:
            return json.loads(kz.get("/brokers/topics/moved/partitions/0/state")[0])  # type: ignore[no-any-return]

        wait_until(lambda: sorted(state()["isr"]) == [1, 2, 3], 30, "ISR [1, 2, 3]")  # type: ignore[type-var]
        records = args.mb * 1024
        log(f"writing {args.mb} MB ({records:,} x 1 KiB, acks=all) into moved-0 on [1, 2, 3] ...")
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20, "batch.size": 1048576,
                      "queue.buffering.max.kbytes": 2097151, "queue.buffering.max.messages": records + 1000})
        value = b"x" * 1024
        for _ in range(records):
            p.produce("moved", value, partition=0)
            p.poll(0)
        assert p.flush(300) == 0

        from kafka import TopicPartition as KpTopicPartition
        from kafka.admin import KafkaAdminClient

        kp = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
        log("moving moved-0 from [1, 2, 3] to [2, 3, 4] ...")
        t0 = time.monotonic()
        kp.alter_partition_reassignments({KpTopicPartition("moved", 0): [2, 3, 4]})
        wait_until(lambda: json.loads(kz.get("/brokers/topics/moved")[0])["partitions"]["0"] == [2, 3, 4]
                   and sorted(state()["isr"]) == [2, 3, 4], 600, "the move", interval=0.05)  # type: ignore[type-var]
        move_s = time.monotonic() - t0

        t0 = time.monotonic()
        admin.create_partitions([NewPartitions("moved", 8)], operation_timeout=30)["moved"].result(60)
        create_s = time.monotonic() - t0
        t0 = time.monotonic()
        next(iter(admin.delete_records([TopicPartition("moved", 0, records // 2)]).values())).result(60)
        delete_s = time.monotonic() - t0
        t0 = time.monotonic()
        kp.elect_leaders(0, None, raise_errors=False)
        elect_s = time.monotonic() - t0
        kp.close()
        kz.stop()
        print(f"reassignment of a {args.mb} MB partition [1,2,3] -> [2,3,4]: {move_s:.1f} s "
              f"({args.mb / move_s:.1f} MB/s copied to the new replica)")
        print(f"CreatePartitions 1 -> 8 (until leaders): {create_s * 1000:.0f} ms; DeleteRecords (until the "
              f"followers followed): {delete_s * 1000:.0f} ms; ElectLeaders preferred, all partitions: "
              f"{elect_s * 1000:.0f} ms")


if __name__ == "__main__":
    main()
