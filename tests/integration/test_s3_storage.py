"""The S3 remote storage manager against a real S3-API server process (moto's server mode, tests/integration/
s3server.py): multipart upload of a segment larger than a part, ranged GETs, indexes, idempotent delete; and one
broker tiering to it, read back from offset 0 by confluent-kafka."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from moldau.protocol.records import build_batch
from moldau.storage import Log, LogConfig
from moldau.storage.remote.api import IndexType, RemoteResourceNotFoundError, load_remote_storage_manager
from moldau.storage.remote.s3 import MIN_PART_SIZE, S3RemoteStorageManager
from moldau.storage.remote.segments import segment_data, segment_metadata

from .clients import ck_consume, make_records
from .harness import BrokerProcess, free_port, wait_until
from .s3server import S3Server, s3_server, start_s3_server  # noqa: F401 - the fixture
from .test_confluent import produce
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


def test_broker_tiers_to_s3(s3_server: S3Server, broker_factory: Callable[..., BrokerProcess],  # noqa: F811
                            topic: str) -> None:
    broker = tiered_s3_broker(broker_factory, s3_server.rsm_config("tiered"))
    create(broker.bootstrap, topic, {"remote.storage.enable": "true", "segment.bytes": "16384",
                                     "local.retention.bytes": "1"})
    records = make_records(800, tag="s3", with_nulls=False)
    assert produce(broker.bootstrap, topic, records, acks="all", **{"batch.num.messages": 10}) == list(range(800))
    local_dir = broker.partition_dir(topic)
    rsm = manager(s3_server, "tiered")
    wait_until(lambda: len(list(local_dir.glob("*.log"))) <= 2, 60, "segments moved to S3 and deleted locally")
    rsm.close()
    got = ck_consume(broker.bootstrap, topic, len(records), timeout=60)
    assert [(m.offset(), m.value()) for m in got] == [(i, r.value) for i, r in enumerate(records)]


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
