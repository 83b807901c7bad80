"""BrokerConnection against a real Moldau broker process (started by conftest.py)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from moldau.broker.apis import ADVERTISED
from moldau.connection import BrokerConnection
from moldau.errors import (
    ConnectFailedError,
    ConnectionLostError,
    NotConnectedError,
    RequestTimeoutError,
    UnsupportedVersionError,
)
from moldau.protocol.api import REGISTRY, ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.records import build_batch, iter_records
from tests.integration.harness import BrokerProcess, closed_port

# These start a real broker process (tests/unit/client/conftest.py): `-m 'not integration'` must skip them.
pytestmark = pytest.mark.integration

METADATA = REGISTRY[ApiKey.METADATA]
CREATE_TOPICS = REGISTRY[ApiKey.CREATE_TOPICS]
PRODUCE = REGISTRY[ApiKey.PRODUCE]
FETCH = REGISTRY[ApiKey.FETCH]
API_VERSIONS = REGISTRY[ApiKey.API_VERSIONS]


async def connect(broker: BrokerProcess, **kwargs: Any) -> BrokerConnection:
    conn = BrokerConnection("127.0.0.1", broker.port, client_id="conn-test", **kwargs)
    await conn.connect(timeout_s=10)
    return conn


async def create_topic(conn: BrokerConnection, name: str, partitions: int = 1) -> None:
    response = await conn.send(CREATE_TOPICS, {"topics": [
        {"name": name, "num_partitions": partitions, "replication_factor": 1}], "timeout_ms": 10000})
    assert response["topics"][0]["error_code"] == ErrorCode.NONE, response


def fetch_body(topic: str, offset: int, max_wait_ms: int = 0, min_bytes: int = 0) -> dict[str, Any]:
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": 1 << 20,
            "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}]}]}


async def test_connect_learns_the_advertised_api_versions(broker: BrokerProcess) -> None:
    conn = await connect(broker)
    try:
        assert conn.connected and not conn.closed
        expected = {key: REGISTRY[key].versions for key in ADVERTISED}
        assert conn.api_versions == expected
        assert conn.api_versions[ApiKey.API_VERSIONS] == (0, 3)
        assert conn.version_for(METADATA) == METADATA.versions[1]
        assert conn.version_for(METADATA, max_version=4) == 4
        for key in set(REGISTRY) - ADVERTISED:  # registered, not served: nothing to agree on
            with pytest.raises(UnsupportedVersionError):
                conn.version_for(REGISTRY[key])
        with pytest.raises(UnsupportedVersionError):
            conn.version_for(FETCH, max_version=FETCH.versions[0] - 1)
        # An explicit old version is sent as asked (ApiVersions v0 has no software name fields).
        v0 = await conn.send(API_VERSIONS, {}, version=0)
        assert v0["error_code"] == 0 and {k["api_key"] for k in v0["api_keys"]} == set(ADVERTISED)
    finally:
        await conn.close()
    assert conn.closed and not conn.connected


async def test_metadata_create_produce_fetch(broker: BrokerProcess) -> None:
    conn = await connect(broker)
    try:
        metadata = await conn.send(METADATA, {"topics": None})
        assert [b["port"] for b in metadata["brokers"]] == [broker.port]

        await create_topic(conn, "conn-produce")
        metadata = await conn.send(METADATA, {"topics": [{"name": "conn-produce"}]})
        (topic,) = metadata["topics"]
        assert topic["error_code"] == 0 and len(topic["partitions"]) == 1

        batch = build_batch([(b"k1", b"v1", [], 1_700_000_000_000), (None, b"v2", [("h", b"x")], None)])
        produced = await conn.send(PRODUCE, {"acks": -1, "timeout_ms": 5000, "topic_data": [
            {"name": "conn-produce", "partition_data": [{"index": 0, "records": batch}]}]})
        (partition,) = produced["responses"][0]["partition_responses"]
        assert partition["error_code"] == 0 and partition["base_offset"] == 0

        fetched = await conn.send(FETCH, fetch_body("conn-produce", 0))
        (part,) = fetched["responses"][0]["partitions"]
        assert part["error_code"] == 0 and part["high_watermark"] == 2
        records = part["records"]
        assert isinstance(records, memoryview)
        # More traffic on the connection must not disturb the records view of an earlier response.
        await asyncio.gather(*(conn.send(FETCH, fetch_body("conn-produce", 1)) for _ in range(5)))
        got = [(r.offset, r.key, r.value, r.headers) for r in iter_records(records)]
        assert got == [(0, b"k1", b"v1", []), (1, None, b"v2", [("h", b"x")])]
    finally:
        await conn.close()


async def test_send_no_response_produce_acks_0(broker: BrokerProcess) -> None:
    conn = await connect(broker)
    try:
        await create_topic(conn, "conn-acks0")
        for i in range(3):
            batch = build_batch([(None, f"m{i}".encode(), [], None)])
            await conn.send_no_response(PRODUCE, {"acks": 0, "timeout_ms": 5000, "topic_data": [
                {"name": "conn-acks0", "partition_data": [{"index": 0, "records": batch}]}]})
        assert conn.in_flight == 0
        # The next answered request is matched correctly after the unanswered ones.
        fetched = await conn.send(FETCH, fetch_body("conn-acks0", 0, max_wait_ms=2000, min_bytes=1))
        values = [r.value for r in iter_records(fetched["responses"][0]["partitions"][0]["records"])]
        assert values and values[0] == b"m0"
    finally:
        await conn.close()


async def test_pipelines_100_requests(broker: BrokerProcess) -> None:
    conn = await connect(broker)
    try:
        peak = 0

        async def one(i: int) -> dict[str, Any]:
            nonlocal peak
            task = conn.send(METADATA, {"topics": [{"name": f"no-such-topic-{i}"}],
                                        "allow_auto_topic_creation": False})
            coro = asyncio.ensure_future(task)
            await asyncio.sleep(0)
            peak = max(peak, conn.in_flight)
            return await coro

        responses = await asyncio.gather(*(one(i) for i in range(100)))
        # Each response belongs to its own request (responses matched by correlation id, in order).
        assert [r["topics"][0]["name"] for r in responses] == [f"no-such-topic-{i}" for i in range(100)]
        assert all(r["topics"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for r in responses)
        assert peak > 1, "requests were not pipelined"
        assert conn.in_flight == 0
    finally:
        await conn.close()


async def test_request_timeout_keeps_the_connection_usable(broker: BrokerProcess) -> None:
    conn = await connect(broker, request_timeout_ms=300)
    try:
        await create_topic(conn, "conn-timeout")
        t0 = time.monotonic()
        with pytest.raises(RequestTimeoutError) as info:
            await conn.send(FETCH, fetch_body("conn-timeout", 0, max_wait_ms=1500, min_bytes=1))
        assert 0.25 < time.monotonic() - t0 < 1.2
        assert isinstance(info.value, TimeoutError)
        assert conn.connected and conn.in_flight == 1  # the late answer is still expected
        conn.request_timeout_ms = 10000
        metadata = await conn.send(METADATA, {"topics": [{"name": "conn-timeout"}]})
        assert metadata["topics"][0]["name"] == "conn-timeout"
        assert conn.late_responses == 1 and conn.in_flight == 0
    finally:
        await conn.close()


async def test_broker_death_fails_pending_requests(fresh_broker: BrokerProcess) -> None:
    conn = await connect(fresh_broker)
    try:
        await create_topic(conn, "conn-kill")
        pending = [asyncio.ensure_future(conn.send(FETCH, fetch_body("conn-kill", 0, max_wait_ms=20000,
                                                                      min_bytes=1)))
                   for _ in range(3)]
        await asyncio.sleep(0.3)
        assert conn.in_flight == 3 and not any(p.done() for p in pending)
        t0 = time.monotonic()
        fresh_broker.kill()
        results = await asyncio.wait_for(asyncio.gather(*pending, return_exceptions=True), 5)
        assert time.monotonic() - t0 < 5
        assert all(isinstance(r, ConnectionLostError) for r in results), results
        assert all(isinstance(r, ConnectionError) for r in results)
        assert conn.closed and not conn.connected and conn.in_flight == 0
        with pytest.raises(NotConnectedError):
            await conn.send(METADATA, {"topics": None})
    finally:
        await conn.close()


async def test_connection_refused() -> None:
    conn = BrokerConnection("127.0.0.1", closed_port())
    t0 = time.monotonic()
    with pytest.raises(ConnectFailedError) as info:
        await conn.connect(timeout_s=5)
    assert time.monotonic() - t0 < 2
    assert isinstance(info.value, ConnectionError)
    assert isinstance(info.value.__cause__, ConnectionRefusedError)
    assert conn.closed and not conn.connected
    with pytest.raises(NotConnectedError):
        await conn.send(METADATA, {"topics": None})
    with pytest.raises(NotConnectedError):
        await conn.connect()


async def test_send_before_connect() -> None:
    conn = BrokerConnection("127.0.0.1", closed_port())
    with pytest.raises(NotConnectedError):
        await conn.send(METADATA, {"topics": None}, version=1)
    await conn.close()
