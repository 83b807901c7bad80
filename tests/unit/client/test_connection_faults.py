"""BrokerConnection against an in-process asyncio server that misbehaves on purpose.

The fake peer decodes requests with our own codec (the codec has its own golden-byte tests) and writes whatever
bytes a test wants back: truncated or oversized frames, wrong correlation ids, answers one byte at a time.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from moldau.connection import MAX_CORRELATION_ID, BrokerConnection
from moldau.errors import (
    ConnectFailedError,
    ConnectionLostError,
    CorruptResponseError,
    NotConnectedError,
    ProtocolViolationError,
    UnsupportedVersionError,
)
from moldau.protocol.api import REGISTRY, ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.header import (
    decode_request_header,
    encode_response_header,
    request_header_version,
    response_header_version,
)
from moldau.protocol.schema import Api

METADATA = REGISTRY[ApiKey.METADATA]
API_VERSIONS = REGISTRY[ApiKey.API_VERSIONS]
PRODUCE = REGISTRY[ApiKey.PRODUCE]


@dataclass
class Req:
    api: Api
    version: int
    correlation_id: int
    client_id: str | None
    body: dict[str, Any]


class Peer:
    """The server side of one accepted connection."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    async def read_request(self) -> Req:
        size = struct.unpack(">i", await self.reader.readexactly(4))[0]
        frame = memoryview(await self.reader.readexactly(size))
        api_key, version = struct.unpack_from(">hh", frame)
        api = REGISTRY[api_key]
        header, pos = decode_request_header(frame, request_header_version(api_key, api.is_flexible(version),
                                                                          version))
        body, end = api.request_decoder(version)(frame, pos)
        assert end == len(frame)
        return Req(api, version, header.correlation_id, header.client_id, body)

    def response_bytes(self, req: Req, body: dict[str, Any], version: int | None = None) -> bytes:
        version = req.version if version is None else version
        out = bytearray(4)
        encode_response_header(out, req.correlation_id,
                               response_header_version(req.api.key, req.api.is_flexible(version)))
        out += req.api.encode_response(version, body)
        struct.pack_into(">i", out, 0, len(out) - 4)
        return bytes(out)

    def respond(self, req: Req, body: dict[str, Any]) -> None:
        self.writer.write(self.response_bytes(req, body))

    async def handshake(self, ranges: dict[int, tuple[int, int]] | None = None) -> Req:
        req = await self.read_request()
        assert req.api is API_VERSIONS
        ranges = ranges if ranges is not None else {k: a.versions for k, a in REGISTRY.items()}
        self.respond(req, {"error_code": 0, "api_keys": [
            {"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in ranges.items()]})
        return req


Script = Callable[[Peer], Awaitable[None]]


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Script], Awaitable[int]]]:
    """serve(script) -> port: runs ``script(peer)`` for each accepted connection."""
    servers: list[asyncio.Server] = []
    errors: list[BaseException] = []

    async def start(script: Script) -> int:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                await script(Peer(reader, writer))
            except (asyncio.IncompleteReadError, ConnectionError):
                pass  # the client went away; fine for these tests
            except BaseException as exc:  # a failing assertion in the fake peer must fail the test
                errors.append(exc)
            finally:
                writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        servers.append(server)
        return int(server.sockets[0].getsockname()[1])

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()
    assert not errors, errors


async def linger(peer: Peer) -> None:
    """Keep the connection open until the client closes it."""
    await peer.reader.read()


def metadata_request(name: str) -> dict[str, Any]:
    return {"topics": [{"name": name}], "allow_auto_topic_creation": False}


def metadata_response(name: str) -> dict[str, Any]:
    return {"brokers": [], "topics": [{"error_code": 3, "name": name, "partitions": []}]}


async def client(port: int, **kwargs: Any) -> BrokerConnection:
    conn = BrokerConnection("127.0.0.1", port, **kwargs)
    await conn.connect(timeout_s=5)
    return conn


async def test_handshake_sends_api_versions_v3_and_client_id(serve: Any) -> None:
    seen: list[Req] = []

    async def script(peer: Peer) -> None:
        seen.append(await peer.handshake({18: (0, 3), 3: (1, 5)}))
        await linger(peer)

    conn = await client(await serve(script), client_id="me")
    try:
        (req,) = seen
        assert (req.version, req.client_id) == (3, "me")
        assert req.body == {"client_software_name": "moldau", "client_software_version": "0.1.0"}
        assert conn.api_versions == {18: (0, 3), 3: (1, 5)}
        assert conn.version_for(METADATA) == 5
        with pytest.raises(UnsupportedVersionError):
            conn.version_for(PRODUCE)
    finally:
        await conn.close()


async def test_api_versions_fallback_when_peer_rejects_v3(serve: Any) -> None:
    versions: list[int] = []

    async def script(peer: Peer) -> None:
        req = await peer.read_request()
        versions.append(req.version)
        # KIP-511: an unknown ApiVersions version gets error 35 in the v0 layout, listing what the peer knows.
        peer.writer.write(peer.response_bytes(req, {"error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": [
            {"api_key": 18, "min_version": 0, "max_version": 2}]}, version=0))
        req = await peer.read_request()
        versions.append(req.version)
        peer.respond(req, {"error_code": 0, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 2},
                                                         {"api_key": 3, "min_version": 0, "max_version": 8}]})
        await linger(peer)

    conn = await client(await serve(script))
    try:
        assert versions == [3, 2]
        assert conn.api_versions == {18: (0, 2), 3: (0, 8)}
    finally:
        await conn.close()


async def test_pipelined_requests_use_consecutive_ids_and_wrap(serve: Any) -> None:
    ids: list[int] = []

    async def script(peer: Peer) -> None:
        await peer.handshake()
        requests = [await peer.read_request() for _ in range(100)]  # all written before any answer
        ids.extend(r.correlation_id for r in requests)
        # All answers in one write, so the client must split and match them.
        peer.writer.write(b"".join(peer.response_bytes(r, metadata_response(r.body["topics"][0]["name"]))
                                   for r in requests))
        await linger(peer)

    conn = await client(await serve(script))
    try:
        conn._next_correlation_id = MAX_CORRELATION_ID - 49  # wrap in the middle of the burst
        responses = await asyncio.wait_for(asyncio.gather(
            *(conn.send(METADATA, metadata_request(f"t{i}")) for i in range(100))), 5)
        assert [r["topics"][0]["name"] for r in responses] == [f"t{i}" for i in range(100)]
        assert ids == list(range(MAX_CORRELATION_ID - 49, MAX_CORRELATION_ID + 1)) + list(range(50))
    finally:
        await conn.close()


async def test_response_arriving_one_byte_at_a_time(serve: Any) -> None:
    async def script(peer: Peer) -> None:
        await peer.handshake()
        req = await peer.read_request()
        for b in peer.response_bytes(req, metadata_response("slow")):
            peer.writer.write(bytes([b]))
            await peer.writer.drain()
            await asyncio.sleep(0)
        await linger(peer)

    conn = await client(await serve(script))
    try:
        response = await conn.send(METADATA, metadata_request("slow"))
        assert response["topics"][0]["name"] == "slow"
    finally:
        await conn.close()


async def test_truncated_frame_then_close_fails_all_pending(serve: Any) -> None:
    async def script(peer: Peer) -> None:
        await peer.handshake()
        await peer.read_request()
        await peer.read_request()
        peer.writer.write(struct.pack(">i", 100) + b"\x00" * 10)  # promises 100 bytes, sends 10
        await peer.writer.drain()

    conn = await client(await serve(script))
    results = await asyncio.wait_for(asyncio.gather(
        conn.send(METADATA, metadata_request("a")), conn.send(METADATA, metadata_request("b")),
        return_exceptions=True), 5)
    assert all(isinstance(r, ConnectionLostError) for r in results), results
    assert conn.closed
    with pytest.raises(NotConnectedError):
        await conn.send(METADATA, metadata_request("c"))


@pytest.mark.parametrize(("raw", "what"), [
    (struct.pack(">i", 10_000), "exceeds the limit"),            # larger than max_frame_bytes
    (struct.pack(">i", -5), "negative frame size"),
    (struct.pack(">i", 2) + b"\x00\x00", "2-byte response frame"),  # no room for a correlation id
    (struct.pack(">ii", 4, 12345), "correlation id 12345"),        # nobody asked for 12345
])
async def test_framing_violations_close_the_connection(serve: Any, raw: bytes, what: str) -> None:
    async def script(peer: Peer) -> None:
        await peer.handshake()
        await peer.read_request()
        await peer.read_request()
        peer.writer.write(raw)
        await linger(peer)

    conn = await client(await serve(script), max_frame_bytes=4096)
    results = await asyncio.wait_for(asyncio.gather(
        conn.send(METADATA, metadata_request("a")), conn.send(METADATA, metadata_request("b")),
        return_exceptions=True), 5)
    assert all(isinstance(r, ProtocolViolationError) and what in str(r) for r in results), results
    assert all(isinstance(r, ConnectionError) for r in results)
    assert conn.closed


async def test_out_of_order_response_is_a_violation(serve: Any) -> None:
    async def script(peer: Peer) -> None:
        await peer.handshake()
        first = await peer.read_request()
        second = await peer.read_request()
        peer.respond(second, metadata_response("b"))
        peer.respond(first, metadata_response("a"))
        await linger(peer)

    conn = await client(await serve(script))
    results = await asyncio.wait_for(asyncio.gather(
        conn.send(METADATA, metadata_request("a")), conn.send(METADATA, metadata_request("b")),
        return_exceptions=True), 5)
    assert all(isinstance(r, ProtocolViolationError) for r in results), results


async def test_undecodable_body_fails_only_that_request(serve: Any) -> None:
    async def script(peer: Peer) -> None:
        await peer.handshake()
        bad = await peer.read_request()
        good = await peer.read_request()
        full = peer.response_bytes(bad, metadata_response("bad"))
        cut = full[:-7]  # a well-framed response whose body stops short
        peer.writer.write(struct.pack(">i", len(cut) - 4) + cut[4:])
        peer.respond(good, metadata_response("good"))
        await linger(peer)

    conn = await client(await serve(script))
    try:
        bad, good = await asyncio.wait_for(asyncio.gather(
            conn.send(METADATA, metadata_request("bad")), conn.send(METADATA, metadata_request("good")),
            return_exceptions=True), 5)
        assert isinstance(bad, CorruptResponseError), bad
        assert isinstance(good, dict) and good["topics"][0]["name"] == "good"
        assert conn.connected
    finally:
        await conn.close()


async def test_bare_unsupported_version_answer(serve: Any) -> None:
    async def script(peer: Peer) -> None:
        await peer.handshake()
        req = await peer.read_request()
        # What Moldau's network layer sends for a (key, version) it does not serve: header v0 + error 35.
        peer.writer.write(struct.pack(">iih", 6, req.correlation_id, ErrorCode.UNSUPPORTED_VERSION))
        await linger(peer)

    conn = await client(await serve(script))
    try:
        with pytest.raises(UnsupportedVersionError):
            await conn.send(METADATA, metadata_request("x"), version=12)
        assert conn.connected
    finally:
        await conn.close()


async def test_send_no_response_registers_nothing(serve: Any) -> None:
    got: list[Req] = []

    async def script(peer: Peer) -> None:
        await peer.handshake()
        got.append(await peer.read_request())
        req = await peer.read_request()
        got.append(req)
        peer.respond(req, metadata_response("after"))
        await linger(peer)

    conn = await client(await serve(script))
    try:
        await conn.send_no_response(PRODUCE, {"acks": 0, "timeout_ms": 100, "topic_data": []})
        assert conn.in_flight == 0
        response = await asyncio.wait_for(conn.send(METADATA, metadata_request("after")), 5)
        assert response["topics"][0]["name"] == "after"
        assert [r.api.key for r in got] == [ApiKey.PRODUCE, ApiKey.METADATA]
        assert got[1].correlation_id == got[0].correlation_id + 1
    finally:
        await conn.close()


async def test_close_fails_pending_requests(serve: Any) -> None:
    async def script(peer: Peer) -> None:
        await peer.handshake()
        await linger(peer)

    conn = await client(await serve(script))
    pending = asyncio.ensure_future(conn.send(METADATA, metadata_request("never")))
    await asyncio.sleep(0.05)
    await conn.close()
    with pytest.raises(NotConnectedError):
        await pending
    await conn.close()  # idempotent


async def test_silent_peer_makes_connect_time_out(serve: Any) -> None:
    port = await serve(linger)  # accepts, never answers ApiVersions
    conn = BrokerConnection("127.0.0.1", port)
    with pytest.raises(ConnectFailedError, match="timed out"):
        await conn.connect(timeout_s=0.3)
    assert conn.closed


async def test_peer_closing_during_handshake(serve: Any) -> None:
    async def script(peer: Peer) -> None:
        await peer.read_request()  # and hang up

    conn = BrokerConnection("127.0.0.1", await serve(script))
    with pytest.raises(ConnectFailedError) as info:
        await conn.connect(timeout_s=5)
    assert isinstance(info.value.__cause__, ConnectionLostError)


async def test_a_throttled_response_holds_the_next_request_back(serve: Any) -> None:
    """KIP-219: the client waits out throttle_time_ms before its next request to that broker; the peer measures
    the gap between the answer and the next request on its own clock."""
    gaps: list[float] = []

    async def script(peer: Peer) -> None:
        await peer.handshake()
        req = await peer.read_request()
        peer.respond(req, {**metadata_response("a"), "throttle_time_ms": 400})
        answered = asyncio.get_running_loop().time()
        req = await peer.read_request()
        gaps.append(asyncio.get_running_loop().time() - answered)
        peer.respond(req, metadata_response("b"))
        await linger(peer)

    conn = await client(await serve(script))
    try:
        await conn.send(METADATA, metadata_request("a"))
        assert conn.throttle_time_ms_total == 400
        await conn.send(METADATA, metadata_request("b"))
        assert gaps and gaps[0] >= 0.35
    finally:
        await conn.close()


async def test_requests_held_back_by_a_throttle_go_out_in_order(serve: Any) -> None:
    """Twenty requests sent while a throttle time runs leave the wait in the order they were sent (an idempotent
    producer's batches must: out of order, the broker answers OUT_OF_ORDER_SEQUENCE_NUMBER)."""
    names = [f"t{i}" for i in range(20)]
    seen: list[str] = []

    async def script(peer: Peer) -> None:
        await peer.handshake()
        req = await peer.read_request()
        peer.respond(req, {**metadata_response("a"), "throttle_time_ms": 200})
        for _ in names:
            req = await peer.read_request()
            seen.append(req.body["topics"][0]["name"])
            peer.respond(req, metadata_response(seen[-1]))
        await linger(peer)

    conn = await client(await serve(script))
    try:
        await conn.send(METADATA, metadata_request("a"))
        await asyncio.gather(*(conn.send(METADATA, metadata_request(n)) for n in names))
        assert seen == names
    finally:
        await conn.close()


async def test_a_cancelled_connection_attempt_fails_its_sharers_with_a_connection_error() -> None:
    """Callers asking for a broker's connection while one attempt is under way share it. When the caller that
    started it is cancelled (the loser of the staggered race to the first broker that answers), the others heard
    CancelledError, though nobody cancelled them: a consumer's poll under a broker kill ended its task (found by
    moldau-verify --workload txn). They hear a connection error now, which every caller retries."""
    from moldau.cluster import BOOTSTRAP_NODE_BASE, Cluster
    from moldau.config import consumer_config
    from moldau.errors import KafkaConnectionError

    accepted = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.set()  # never answers ApiVersions: the attempt hangs until cancelled
        await reader.read()
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    cluster = Cluster(consumer_config(None, bootstrap_servers=f"127.0.0.1:{port}"))
    try:
        first = asyncio.create_task(cluster.connection(BOOTSTRAP_NODE_BASE))
        await asyncio.wait_for(accepted.wait(), 10)
        second = asyncio.create_task(cluster.connection(BOOTSTRAP_NODE_BASE))
        await asyncio.sleep(0)  # second now waits on the shared attempt
        first.cancel()
        with pytest.raises(KafkaConnectionError, match="abandoned"):
            await asyncio.wait_for(second, 10)
        assert first.cancelled() and not second.cancelled()
    finally:
        await cluster.close()
        server.close()
        await server.wait_closed()
