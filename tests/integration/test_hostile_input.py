"""Hostile bytes on raw sockets: the broker closes that connection, stays up, keeps serving others, bounded memory.

Also the ApiVersions fallback that real clients rely on: an unsupported version gets UNSUPPORTED_VERSION (35)
in the version-0 layout, and the connection stays usable.
"""

from __future__ import annotations

import random
import socket
import struct
from collections.abc import Iterator

import pytest
from kafka import KafkaProducer

from .clients import kp_consume
from .harness import BrokerProcess, RawConnection, frame, request_header_v1

pytestmark = pytest.mark.integration

DEFAULT_MAX_REQUEST = 104_857_600  # socket.request.max.bytes default (Kafka's and ours)
MIB = 1024 * 1024
API_VERSIONS = 18
METADATA = 3
PRODUCE = 0


@pytest.fixture
def healthy_client(fresh_broker: BrokerProcess) -> Iterator[KafkaProducer]:
    """A normal client connected before the abuse starts, used again after it."""
    producer = KafkaProducer(bootstrap_servers=fresh_broker.bootstrap, acks=1, enable_idempotence=False)
    try:
        producer.send("health", value=b"before", partition=0).get(timeout=20)
        yield producer
    finally:
        producer.close(timeout=10)


def assert_healthy(broker: BrokerProcess, producer: KafkaProducer) -> None:
    assert broker.is_running(), f"broker died:\n{broker.stderr_tail()}"
    meta = producer.send("health", value=b"after", partition=0).get(timeout=20)
    got = kp_consume(broker.bootstrap, "health", 1, start_offset=meta.offset, timeout=20)
    assert got[0].value == b"after"


def assert_closed_by_broker(conn: RawConnection, timeout: float = 10.0) -> None:
    # wait_closed raises TimeoutError if the broker keeps the connection open.
    conn.wait_closed(timeout)


def test_random_bytes_close_the_connection(fresh_broker: BrokerProcess, healthy_client: KafkaProducer) -> None:
    rng = random.Random(1234)
    for _ in range(8):
        with RawConnection(fresh_broker.port) as conn:
            conn.send_then_eof(rng.randbytes(64 * 1024))  # the broker may close it first: what we want
            assert_closed_by_broker(conn)
    assert_healthy(fresh_broker, healthy_client)


def test_random_frames_do_not_hurt(fresh_broker: BrokerProcess, healthy_client: KafkaProducer) -> None:
    """Well-framed random payloads, some with a real API key and version in front: no crash, no hang."""
    rng = random.Random(99)
    for i in range(200):
        body = rng.randbytes(rng.randrange(0, 300))
        if i % 2:
            # No Fetch or JoinGroup: a random but valid one may legitimately park for its (random) max wait.
            api_key = rng.choice([0, 2, 3, 8, 9, 10, 18, 19, 20])
            body = struct.pack(">hhi", api_key, rng.randrange(0, 8), i) + body
        with RawConnection(fresh_broker.port, timeout=5) as conn:
            conn.send_then_eof(frame(body))
            conn.wait_closed(10)  # a response, if any, then the close (we sent EOF)
    assert_healthy(fresh_broker, healthy_client)


def test_truncated_frames_close_the_connection(fresh_broker: BrokerProcess, healthy_client: KafkaProducer) -> None:
    # 1. The stream ends in the middle of a frame.
    with RawConnection(fresh_broker.port) as conn:
        conn.send(struct.pack(">i", 100) + b"\x00\x03\x00\x01")
        conn.sock.shutdown(socket.SHUT_WR)
        assert_closed_by_broker(conn)
    # 2. A complete frame whose request header is cut short.
    with RawConnection(fresh_broker.port) as conn:
        conn.send(frame(b"\x00\x03\x00"))
        assert_closed_by_broker(conn)
    # 3. A complete frame with a good header and a body cut short (Metadata v1: topic count 2, one topic).
    with RawConnection(fresh_broker.port) as conn:
        conn.send(frame(request_header_v1(METADATA, 1, 1) + struct.pack(">ih", 2, 3) + b"abc"))
        assert_closed_by_broker(conn)
    assert_healthy(fresh_broker, healthy_client)


@pytest.mark.parametrize("size", [DEFAULT_MAX_REQUEST + 1, 0x7FFFFFFF, -1, -0x80000000])
def test_frame_size_over_the_limit_or_negative_closes(
    fresh_broker: BrokerProcess, healthy_client: KafkaProducer, size: int
) -> None:
    rss_before = fresh_broker.rss_bytes()
    with RawConnection(fresh_broker.port) as conn:
        conn.send(struct.pack(">i", size) + b"\x00" * 1024)
        assert_closed_by_broker(conn)  # without waiting for the announced bytes
    assert fresh_broker.rss_bytes() < rss_before + 64 * MIB, "the announced size must not be allocated"
    assert_healthy(fresh_broker, healthy_client)


def test_huge_array_counts_close_the_connection(fresh_broker: BrokerProcess, healthy_client: KafkaProducer) -> None:
    rss_before = fresh_broker.rss_bytes()
    # Metadata v1: topics array of 2^31-1 entries, no entries sent.
    with RawConnection(fresh_broker.port) as conn:
        conn.send(frame(request_header_v1(METADATA, 1, 1) + struct.pack(">i", 0x7FFFFFFF)))
        assert_closed_by_broker(conn)
    # Produce v3: one topic whose partition array claims 2^31-1 entries.
    with RawConnection(fresh_broker.port) as conn:
        body = struct.pack(">hhi", -1, 1, 1000) + struct.pack(">i", 1) + struct.pack(">h", 1) + b"t"
        body += struct.pack(">i", 0x7FFFFFFF)
        conn.send(frame(request_header_v1(PRODUCE, 3, 2) + body))
        assert_closed_by_broker(conn)
    # Metadata v9 (flexible): compact array length as a huge unsigned varint.
    with RawConnection(fresh_broker.port) as conn:
        header = request_header_v1(METADATA, 9, 3) + b"\x00"  # header v2: + empty tagged fields
        conn.send(frame(header + b"\xff\xff\xff\xff\x07"))
        assert_closed_by_broker(conn)
    assert fresh_broker.rss_bytes() < rss_before + 64 * MIB
    assert_healthy(fresh_broker, healthy_client)


def test_unknown_api_key_gets_unsupported_version(fresh_broker: BrokerProcess, healthy_client: KafkaProducer) -> None:
    """An unknown API key is answered with UNSUPPORTED_VERSION (35) after the correlation id; the connection
    stays usable (a later ApiVersions on it is answered)."""
    with RawConnection(fresh_broker.port) as conn:
        conn.send(frame(request_header_v1(9999, 0, 41)))
        answer = conn.recv_frame()
        assert struct.unpack(">ih", answer) == (41, 35)
        conn.send(frame(request_header_v1(18, 0, 42)))
        correlation_id, error = struct.unpack(">ih", conn.recv_frame()[:6])
        assert (correlation_id, error) == (42, 0)
    assert_healthy(fresh_broker, healthy_client)


@pytest.mark.slow
def test_many_partial_large_frames_keep_memory_bounded(
    fresh_broker: BrokerProcess, healthy_client: KafkaProducer
) -> None:
    """Connections that announce ~100 MB requests and trickle a little: memory follows what was sent."""
    rss_before = fresh_broker.rss_bytes()
    conns = [RawConnection(fresh_broker.port) for _ in range(16)]
    try:
        for conn in conns:
            conn.send(struct.pack(">i", DEFAULT_MAX_REQUEST - 1) + request_header_v1(PRODUCE, 3, 1))
            conn.send(b"\x00" * MIB)
        assert_healthy(fresh_broker, healthy_client)  # others are served while these hang
        grown = fresh_broker.rss_bytes() - rss_before
        assert grown < 200 * MIB, f"RSS grew by {grown / MIB:.0f} MiB for 16 MiB received"
    finally:
        for conn in conns:
            conn.close()
    assert_healthy(fresh_broker, healthy_client)


def test_api_versions_unsupported_version_gets_v0_error_response(broker: BrokerProcess) -> None:
    with RawConnection(broker.port) as conn:
        # ApiVersions v99 would use request header v2 (flexible): header v1 fields + empty tagged fields.
        body = b"\x05raw\x00" + b"\x041.0" + b"\x00"  # v3-style body: software name, version, tags
        conn.send(frame(request_header_v1(API_VERSIONS, 99, 42) + b"\x00" + body))
        resp = conn.recv_frame()
        corr, error, count = struct.unpack_from(">ihi", resp, 0)
        assert corr == 42
        assert error == 35, f"expected UNSUPPORTED_VERSION (35), got {error}"
        assert len(resp) == 4 + 2 + 4 + 6 * count, "response must use the v0 layout (no throttle, no tags)"
        versions = {k: (lo, hi) for k, lo, hi in struct.iter_unpack(">hhh", resp[10:])}
        assert API_VERSIONS in versions
        lo, hi = versions[API_VERSIONS]
        assert lo == 0 and hi >= 3

        # The connection stays usable: the client retries with a version the broker supports.
        conn.send(frame(request_header_v1(API_VERSIONS, 0, 43)))
        resp = conn.recv_frame()
        corr, error, count = struct.unpack_from(">ihi", resp, 0)
        assert (corr, error) == (43, 0)
        assert len(resp) == 10 + 6 * count
        versions = {k: (lo, hi) for k, lo, hi in struct.iter_unpack(">hhh", resp[10:])}
        for api in (0, 1, 2, 3, 18, 19, 20):  # Produce Fetch ListOffsets Metadata ApiVersions Create/DeleteTopics
            assert api in versions, f"api key {api} missing from ApiVersions: {sorted(versions)}"
