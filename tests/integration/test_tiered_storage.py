"""Tiered storage (KIP-405) on one broker with the filesystem backend: segments move to remote storage, local
files go, and unmodified clients read every record from offset 0 through the broker."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .clients import ck_consume, ck_consumer, kp_consume, make_records
from .harness import BrokerProcess, wait_until
from .test_confluent import produce

pytestmark = pytest.mark.integration


def tiered_broker(broker_factory: Callable[..., BrokerProcess], remote: Path) -> BrokerProcess:
    return broker_factory({
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": "filesystem",
        "rsm.config.dir": str(remote),
        "remote.log.manager.task.interval.ms": "200",
        "rlmm.config.remote.log.metadata.topic.num.partitions": "2",
        "rlmm.config.remote.log.metadata.topic.replication.factor": "1",
    })


def create(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(30)


def test_segments_move_to_remote_storage_and_clients_read_from_offset_0(
        broker_factory: Callable[..., BrokerProcess], topic: str, tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    broker = tiered_broker(broker_factory, remote)
    with pytest.raises(KafkaException, match="compacted"):
        create(broker.bootstrap, topic + "-compacted", {"remote.storage.enable": "true", "cleanup.policy": "compact"})
    create(broker.bootstrap, topic, {"remote.storage.enable": "true", "segment.bytes": "16384",
                                     "local.retention.bytes": "1"})
    records = make_records(1500, tag="tiered", with_nulls=False)
    # Small batches: a segment rolls only between batches.
    offsets = produce(broker.bootstrap, topic, records, acks="all", **{"batch.num.messages": 10})
    assert offsets == list(range(len(records)))
    local_dir = broker.partition_dir(topic)

    def moved() -> bool:
        return len(list(local_dir.glob("*.log"))) <= 2 and len(list(remote.rglob("*.log"))) >= 10

    wait_until(moved, 60, "segments copied to remote storage and deleted locally")
    first_local = min(int(p.name[:20]) for p in local_dir.glob("*.log"))
    assert first_local > 0

    got = ck_consume(broker.bootstrap, topic, len(records), timeout=60)
    assert [m.offset() for m in got] == list(range(len(records)))
    assert [(m.key(), m.value()) for m in got] == [(r.key, r.value) for r in records]
    kp = kp_consume(broker.bootstrap, topic, len(records), timeout=60)
    assert [(m.offset, m.value) for m in kp] == [(i, r.value) for i, r in enumerate(records)]

    consumer = ck_consumer(broker.bootstrap)
    try:  # ListOffsets earliest is the remote log start, not the first local segment
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=20) == (0, len(records))
    finally:
        consumer.close()
    assert not (local_dir / f"{0:020d}.log").exists()
    metrics = broker.fetch_metrics()
    copied = [line for line in metrics.splitlines() if line.startswith("moldau_remote_copy_segments_total ")]
    assert copied and float(copied[0].split()[1]) >= 10, metrics
    assert "moldau_remote_fetch_bytes_total 0.0" not in metrics
