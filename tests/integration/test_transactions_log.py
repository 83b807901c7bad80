"""Transactions, the partition side, on a real broker: transactional batches and WriteTxnMarkers sent with
Moldau's own connection layer (standing in for a transaction coordinator), then read by confluent-kafka,
kafka-python, aiokafka and kcat at isolation level read_committed (exactly the committed records, none past the LSO) and
read_uncommitted (everything)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from moldau.connection import BrokerConnection, api_for
from moldau.protocol.api import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.records import build_batch

from .clients import ck_consume, kp_consume
from .harness import BrokerProcess, wait_until

pytestmark = pytest.mark.integration

A, B, C = 9101, 9102, 9103  # producer ids (as a coordinator's InitProducerId would hand out)
UNCOMMITTED = [b"a0", b"b0", b"p0", b"a1", b"a2", b"b1", b"c0"]
COMMITTED = [b"a0", b"p0", b"a1", b"a2", b"c0"]  # B aborted


async def _send(broker: BrokerProcess, key: ApiKey, body: dict[str, Any]) -> dict[str, Any]:
    async with BrokerConnection("127.0.0.1", broker.port, client_id="txn-log-test") as conn:
        return await conn.send(api_for(key), body)


def send(broker: BrokerProcess, key: ApiKey, body: dict[str, Any]) -> dict[str, Any]:
    return asyncio.run(asyncio.wait_for(_send(broker, key, body), 30))


def produce(broker: BrokerProcess, topic: str, values: list[bytes], pid: int = -1, seq: int = -1) -> int:
    records = build_batch([(b"k", v, None, None) for v in values], producer_id=pid, producer_epoch=0 if pid >= 0
                          else -1, base_sequence=seq, is_transactional=pid >= 0)
    answer = send(broker, ApiKey.PRODUCE, {
        "transactional_id": f"txn-{pid}" if pid >= 0 else None, "acks": -1, "timeout_ms": 10000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]})
    part = answer["responses"][0]["partition_responses"][0]
    assert part["error_code"] == ErrorCode.NONE, part
    return int(part["base_offset"])


def end_txn(broker: BrokerProcess, topic: str, pid: int, committed: bool) -> None:
    answer = send(broker, ApiKey.WRITE_TXN_MARKERS, {"markers": [{
        "producer_id": pid, "producer_epoch": 0, "transaction_result": committed, "coordinator_epoch": 0,
        "topics": [{"name": topic, "partition_indexes": [0]}]}]})
    assert answer["markers"][0]["topics"][0]["partitions"][0]["error_code"] == ErrorCode.NONE, answer


def latest(broker: BrokerProcess, topic: str, isolation: int) -> int:
    answer = send(broker, ApiKey.LIST_OFFSETS, {"replica_id": -1, "isolation_level": isolation, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
    return int(answer["topics"][0]["partitions"][0]["offset"])


def kcat(*args: str) -> bytes:
    exe = shutil.which("kcat")
    assert exe, "kcat is not installed (apt-get install kcat)"
    proc = subprocess.run([exe, *args], capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


async def aio_consume(bootstrap: str, topic: str, count: int, isolation_level: str) -> list[bytes]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                auto_offset_reset="earliest", isolation_level=isolation_level)
    await asyncio.wait_for(consumer.start(), 20)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        out: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(out) < count and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                out += [r.value for r in records]
        return out
    finally:
        await asyncio.wait_for(consumer.stop(), 20)


def test_read_committed_sees_exactly_the_committed_records(broker: BrokerProcess, topic: str) -> None:
    created = send(broker, ApiKey.CREATE_TOPICS, {"topics": [{"name": topic, "num_partitions": 1,
                                                              "replication_factor": 1}], "timeout_ms": 10000})
    assert created["topics"][0]["error_code"] == ErrorCode.NONE
    assert produce(broker, topic, [b"a0"], A, 0) == 0
    produce(broker, topic, [b"b0"], B, 0)
    produce(broker, topic, [b"p0"])  # not transactional
    produce(broker, topic, [b"a1", b"a2"], A, 1)
    produce(broker, topic, [b"b1"], B, 1)
    end_txn(broker, topic, B, committed=False)  # offset 6
    end_txn(broker, topic, A, committed=True)  # offset 7
    c_first = produce(broker, topic, [b"c0"], C, 0)  # open: the LSO stays at its first offset
    assert (c_first, latest(broker, topic, 1), latest(broker, topic, 0)) == (8, 8, 9)
    lag_line = f'moldau_last_stable_offset_lag{{partition="0",topic="{topic}"}} 1.0'
    assert lag_line in broker.fetch_metrics().splitlines()  # HW 9 - LSO 8: C's open transaction

    # librdkafka's read_committed end of partition is the LSO: kcat -e stops before C's open transaction.
    out = kcat("-b", broker.bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q",
               "-X", "isolation.level=read_committed", "-f", "%s\n")
    assert out.split() == [b"a0", b"p0", b"a1", b"a2"]

    end_txn(broker, topic, C, committed=True)
    assert latest(broker, topic, 1) == latest(broker, topic, 0) == 10

    got = ck_consume(broker.bootstrap, topic, len(COMMITTED), start_offset=0, **{"isolation.level": "read_committed"})
    assert [m.value() for m in got] == COMMITTED and [m.offset() for m in got] == [0, 2, 3, 4, 8]
    got = ck_consume(broker.bootstrap, topic, len(UNCOMMITTED), start_offset=0,
                     **{"isolation.level": "read_uncommitted"})
    assert [m.value() for m in got] == UNCOMMITTED
    got = kp_consume(broker.bootstrap, topic, len(COMMITTED), isolation_level="read_committed")
    assert [r.value for r in got] == COMMITTED
    got = kp_consume(broker.bootstrap, topic, len(UNCOMMITTED), isolation_level="read_uncommitted")
    assert [r.value for r in got] == UNCOMMITTED
    assert asyncio.run(aio_consume(broker.bootstrap, topic, len(COMMITTED), "read_committed")) == COMMITTED
    assert asyncio.run(aio_consume(broker.bootstrap, topic, len(UNCOMMITTED), "read_uncommitted")) == UNCOMMITTED


def test_open_and_aborted_transactions_survive_kill_9(fresh_broker: BrokerProcess, topic: str) -> None:
    """Producer state and the aborted transaction index are rebuilt from the log after a crash: the open
    transaction still holds the LSO, the aborted one stays invisible, and the commit still works."""
    broker = fresh_broker
    created = send(broker, ApiKey.CREATE_TOPICS, {"topics": [{"name": topic, "num_partitions": 1,
                                                              "replication_factor": 1}], "timeout_ms": 10000})
    assert created["topics"][0]["error_code"] == ErrorCode.NONE
    produce(broker, topic, [b"a0"], A, 0)  # 0
    produce(broker, topic, [b"b0"], B, 0)  # 1: stays open across the crash
    end_txn(broker, topic, A, committed=False)  # 2
    produce(broker, topic, [b"p0"])  # 3
    broker.kill()
    broker.start()
    wait_until(lambda: latest(broker, topic, 0) == 4, 30, "the restarted broker to lead the partition again")
    assert latest(broker, topic, 1) == 1
    end_txn(broker, topic, B, committed=True)  # 4
    assert latest(broker, topic, 1) == 5
    got = ck_consume(broker.bootstrap, topic, 2, start_offset=0, **{"isolation.level": "read_committed"})
    assert [m.value() for m in got] == [b"b0", b"p0"]
