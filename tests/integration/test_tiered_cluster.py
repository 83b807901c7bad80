"""Tiered storage on two ZooKeeper-mode brokers sharing a filesystem store: a replica added to a tiered partition
copies only the leader's local tail (OFFSET_MOVED_TO_TIERED_STORAGE, then ListOffsets earliest-local), and after
the leader dies the new leader serves the remote part from the metadata it replayed from __remote_log_metadata."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from . import test_cluster as tc
from .clients import ck_consume, make_records
from .harness import wait_until
from .test_cluster import Cluster
from .test_confluent import produce

zookeeper = tc.zookeeper
cluster = tc.cluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def segment_bases(directory: Path) -> list[int]:
    return sorted(int(p.name[:20]) for p in directory.glob("*.log"))


def test_new_replica_copies_only_the_local_tail_and_takes_over(cluster: Cluster, tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient

    remote = tmp_path / "remote"
    cluster.start([1, 2], lambda _: {
        "remote.log.storage.system.enable": "true", "remote.log.storage.manager.class.name": "filesystem",
        "rsm.config.dir": str(remote), "remote.log.manager.task.interval.ms": "200",
        "rlmm.config.remote.log.metadata.topic.num.partitions": "2",
        "rlmm.config.remote.log.metadata.topic.replication.factor": "2"})
    bootstrap = cluster.bootstrap()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("tiered", num_partitions=1, replica_assignment=[[1]], config={
        "remote.storage.enable": "true", "segment.bytes": "16384", "local.retention.bytes": "1"})])["tiered"].result(20)
    records = make_records(800, tag="cluster", with_nulls=False)
    assert produce(bootstrap, "tiered", records, acks="all", **{"batch.num.messages": 10}) == list(range(800))
    leader_dir = cluster.brokers[1].partition_dir("tiered")
    wait_until(lambda: len(segment_bases(leader_dir)) <= 2, 60, "segments moved to remote storage on broker 1")
    local_start = segment_bases(leader_dir)[0]
    assert local_start > 0

    kp = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    try:
        tp = TopicPartition("tiered", 0)
        assert kp.alter_partition_reassignments({tp: [1, 2]}) == {tp: None}
    finally:
        kp.close()
    wait_until(lambda: sorted(cluster.states("tiered")[0]["isr"]) == [1, 2], 60, "broker 2 in the ISR")
    follower_bases = segment_bases(cluster.brokers[2].partition_dir("tiered"))
    assert follower_bases and follower_bases[0] >= local_start  # only the tail was copied

    cluster.brokers[1].stop(signal.SIGKILL)
    wait_until(lambda: cluster.states("tiered")[0]["leader"] == 2, 60, "broker 2 leading")
    got = ck_consume(cluster.bootstrap(), "tiered", len(records), timeout=60)
    assert [(m.offset(), m.value()) for m in got] == [(i, r.value) for i, r in enumerate(records)]
