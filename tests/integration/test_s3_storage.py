"""The S3 remote storage manager against a real S3-API server process (moto's server mode, tests/integration/
s3server.py): multipart upload of a segment larger than a part, ranged GETs, indexes, idempotent delete; and one
broker tiering to it, read back from offset 0 by confluent-kafka, kafka-python, aiokafka, kcat and Moldau's client,
with offsets for times, a group's lag and DeleteRecords across the local/remote boundary."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import moldau
from moldau.consumer import TopicPartition
from moldau.protocol.records import build_batch
from moldau.storage import Log, LogConfig
from moldau.storage.remote.api import IndexType, RemoteResourceNotFoundError, load_remote_storage_manager
from moldau.storage.remote.s3 import MIN_PART_SIZE, S3RemoteStorageManager
from moldau.storage.remote.segments import segment_data, segment_metadata

from .clients import ck_consume, kp_consume, make_records
from .harness import BrokerProcess, free_port, wait_until
from .s3server import S3Server, s3_server, start_s3_server  # noqa: F401 - the fixture
from .test_confluent import produce
from .test_kcat import kcat
from .test_tiered_storage import create

pytestmark = pytest.mark.integration


def tiered_s3_broker(broker_factory: Callable[..., BrokerProcess], config: dict[str, str]) -> BrokerProcess:
    return broker_factory({
        "remote.log.storage.system.enable": "true", "remote.log.storage.manager.class.name": "s3", **config,
        "remote.log.manager.task.interval.ms": "200",
        "rlmm.config.remote.log.metadata.topic.num.partitions": "2",
        "rlmm.config.remote.log.metadata.topic.replication.factor": "1"})


def manager(server: S3Server, bucket: str, **extra: str) -> S3RemoteStorageManager:
    configs = {k.removeprefix("rsm.config."): v for k, v in server.rsm_config(bucket).items()} | extra
    rsm = load_remote_storage_manager("s3", configs)
    assert isinstance(rsm, S3RemoteStorageManager)
    return rsm


def test_s3_contract_with_multipart_upload(s3_server: S3Server, tmp_path: Path) -> None:  # noqa: F811
    rsm = manager(s3_server, "contract", **{"s3.multipart.part.size": str(MIN_PART_SIZE)})
    log = Log(tmp_path / "big-0", LogConfig(segment_bytes=2 * MIN_PART_SIZE + MIN_PART_SIZE // 2))
    try:
        value = bytes(range(256)) * 2048  # 512 KiB records
        while len(log.segments) < 2:
            log.append_as_leader(build_batch([(None, value, [], 1000)]), 0)
        seg = log.segments[0]
        assert seg.size > 2 * MIN_PART_SIZE  # three parts
        meta = segment_metadata(log, seg, 1, 0)
        rsm.copy_log_segment_data(meta, segment_data(log, seg))
        local = seg.log_path.read_bytes()
        requests = s3_server.log_path.read_text(errors="replace")
        assert "?uploads" in requests and requests.count("partNumber=") == 3, requests[-3000:]
        assert rsm.fetch_log_segment(meta, 0, 99) == local[:100]
        middle = MIN_PART_SIZE - 10  # a range across the first part boundary
        assert rsm.fetch_log_segment(meta, middle, middle + 19) == local[middle:middle + 20]
        assert rsm.fetch_log_segment(meta, len(local) - 5) == local[-5:]
        assert rsm.fetch_index(meta, IndexType.OFFSET) == seg.index.path.read_bytes()
        assert rsm.fetch_index(meta, IndexType.TRANSACTION) == b""
        assert rsm.fetch_index(meta, IndexType.LEADER_EPOCH).startswith(b"0\n1\n0 0\n")
        rsm.delete_log_segment_data(meta)
        rsm.delete_log_segment_data(meta)
        with pytest.raises(RemoteResourceNotFoundError):
            rsm.fetch_log_segment(meta, 0, 10)
        with pytest.raises(RemoteResourceNotFoundError):
            rsm.fetch_index(meta, IndexType.OFFSET)
    finally:
        log.close()
        rsm.close()


def test_broker_tiers_to_s3_and_every_client_reads_across_the_boundary(
        s3_server: S3Server, broker_factory: Callable[..., BrokerProcess], topic: str) -> None:  # noqa: F811
    """Issue #20's first acceptance point on S3: written by confluent-kafka past many segments, the local disk keeps
    only the tail; kafka-python, aiokafka, confluent-kafka, kcat and Moldau's client each read every record from
    offset 0; offsets for times, a group's lag and DeleteRecords work across the local/remote boundary."""
    broker = tiered_s3_broker(broker_factory, s3_server.rsm_config("tiered"))
    create(broker.bootstrap, topic, {"remote.storage.enable": "true", "segment.bytes": "16384",
                                     "local.retention.bytes": "1"})
    n = 800
    records = make_records(n, tag="s3", with_nulls=False)
    base_ts = int(time.time() * 1000) - 3_600_000  # recent: older records would fall to log.retention.ms
    stamps = [base_ts + 10 * i for i in range(n)]
    assert produce(broker.bootstrap, topic, records, stamps, acks="all", **{"batch.num.messages": 10}) == \
        list(range(n))
    local_dir = broker.partition_dir(topic)
    rsm = manager(s3_server, "tiered")
    wait_until(lambda: len(list(local_dir.glob("*.log"))) <= 2, 60, "segments moved to S3 and deleted locally")
    rsm.close()
    first_local = min(int(p.name[:20]) for p in local_dir.glob("*.log"))
    assert 0 < first_local < n  # the boundary: below it only S3 holds the records
    want = [(i, r.value) for i, r in enumerate(records)]

    got = ck_consume(broker.bootstrap, topic, n, timeout=60)
    assert [(m.offset(), m.value()) for m in got] == want, "confluent-kafka"
    assert [(m.offset, m.value) for m in kp_consume(broker.bootstrap, topic, n, timeout=60)] == want, "kafka-python"
    assert asyncio.run(_aiokafka_read(broker.bootstrap, topic, n)) == want, "aiokafka"
    assert _moldau_read(broker.bootstrap, topic, n) == want, "Moldau's client"
    out = kcat("-b", broker.bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-f", "%o %s\n").stdout
    assert [tuple(line.split(" ", 1)) for line in out.decode().splitlines()] == \
        [(str(i), v.decode()) for i, v in want], "kcat"

    tp = TopicPartition(topic, 0)
    with moldau.AdminClient(bootstrap_servers=broker.bootstrap) as admin, \
            moldau.Consumer(bootstrap_servers=broker.bootstrap, group_id=f"lag-{topic}",
                            enable_auto_commit=False) as consumer:
        # Offsets for times on both sides of the boundary: the first record at or after the time.
        for offset in (3, first_local - 1, first_local, n - 1):
            found = consumer.offsets_for_times({tp: stamps[offset] - 5})[tp]
            assert found == (offset, stamps[offset]), (offset, found)
        # A group's lag: committed in the remote part, the end offset from the local one.
        consumer.commit({tp: 5})
        assert consumer.committed(tp) == 5 and consumer.end_offsets([tp])[tp] == n
        lag = n - admin.list_consumer_group_offsets(f"lag-{topic}")[tp].offset
        assert lag == n - 5
        # DeleteRecords below the boundary moves the log start into S3's part; past it, into the local one.
        assert admin.delete_records({tp: first_local - 2})[tp] == first_local - 2
        assert consumer.beginning_offsets([tp])[tp] == first_local - 2
        assert admin.delete_records({tp: first_local + 1})[tp] == first_local + 1
        assert consumer.beginning_offsets([tp])[tp] == first_local + 1
    tail = ck_consume(broker.bootstrap, topic, n - first_local - 1, timeout=60)
    assert [(m.offset(), m.value()) for m in tail] == want[first_local + 1:]


async def _aiokafka_read(bootstrap: str, topic: str, count: int) -> list[tuple[int, bytes]]:
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as AioTopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                auto_offset_reset="earliest")
    await asyncio.wait_for(consumer.start(), 20)
    try:
        tp = AioTopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        out: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 60
        while len(out) < count:
            assert time.monotonic() < deadline, f"aiokafka got {len(out)} of {count} records"
            for batch in (await consumer.getmany(timeout_ms=500)).values():
                out.extend((m.offset, m.value) for m in batch)
        return out
    finally:
        await consumer.stop()


def _moldau_read(bootstrap: str, topic: str, count: int) -> list[tuple[int, bytes]]:
    with moldau.Consumer(bootstrap_servers=bootstrap, enable_auto_commit=False) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        out: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 60
        while len(out) < count:
            assert time.monotonic() < deadline, f"Moldau's consumer got {len(out)} of {count} records"
            out.extend((r.offset, r.value) for r in consumer.poll(timeout_ms=500))
        return out


def copy_errors(broker: BrokerProcess) -> float:
    lines = [x for x in broker.fetch_metrics().splitlines() if x.startswith("moldau_remote_copy_errors_total ")]
    return float(lines[0].split()[1]) if lines else 0.0


def test_store_down_then_back(broker_factory: Callable[..., BrokerProcess], topic: str, tmp_path: Path) -> None:
    """The object store is unreachable from the start: copies fail and back off, no local segment is deleted,
    consumers read locally; once the store is up, copies resume, local segments go, reads from 0 use it."""
    port = free_port()
    offline = S3Server(port, None, tmp_path / "moto.log")  # not started: its settings only
    broker = tiered_s3_broker(broker_factory, offline.rsm_config("outage"))
    create(broker.bootstrap, topic, {"remote.storage.enable": "true", "segment.bytes": "16384",
                                     "local.retention.bytes": "1"})
    records = make_records(800, tag="outage", with_nulls=False)
    assert produce(broker.bootstrap, topic, records, acks="all", **{"batch.num.messages": 10}) == list(range(800))
    local_dir = broker.partition_dir(topic)
    segments = len(list(local_dir.glob("*.log")))
    assert segments >= 5
    wait_until(lambda: copy_errors(broker) >= 2, 30, "copies to fail while the store is down")
    assert len(list(local_dir.glob("*.log"))) == segments  # nothing deleted while uncopied
    got = ck_consume(broker.bootstrap, topic, len(records), timeout=60)
    assert [m.value() for m in got] == [r.value for r in records]
    server = start_s3_server(tmp_path / "moto.log", port)
    try:
        wait_until(lambda: len(list(local_dir.glob("*.log"))) <= 2, 60, "copies to resume and local segments to go")
        got = ck_consume(broker.bootstrap, topic, len(records), timeout=60)
        assert [(m.offset(), m.value()) for m in got] == [(i, r.value) for i, r in enumerate(records)]
    finally:
        server.stop()
