"""Pipelined Produce requests on one connection (broker/network.py): the real socket server, request channel,
worker pool and produce handler in-process over a raw client socket. Appends happen in request order while the
first request still waits for replication, every answer goes back in request order with its own offsets and
errors, and the idempotence sequence rules hold for pipelined batches."""

from __future__ import annotations

import asyncio
import random
import socket
import struct
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from moldau.broker.apis import GROUP_ROUTES, ROUTES
from moldau.broker.handler_pool import HandlerPool
from moldau.broker.metadata import PartitionState
from moldau.broker.metrics import BrokerMetrics
from moldau.broker.network import MAX_PIPELINED_PRODUCES, SocketServer
from moldau.broker.request_channel import RequestChannel
from moldau.protocol.api import REGISTRY, ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.frame import DIRECT_AT
from moldau.protocol.records import build_batch
from moldau.protocol.types import INT32
from tests.unit.broker.apis.handler_env import Env, make_env, request_frame


def _frame(api_key: int, version: int, correlation_id: int, body: dict[str, Any]) -> bytes:
    return request_frame(api_key, version, correlation_id, body, "pipeline-test")


def _produce(correlation_id: int, acks: int, batch: bytes) -> bytes:
    return _frame(ApiKey.PRODUCE, 7, correlation_id, {"transactional_id": None, "acks": acks, "timeout_ms": 30000,
                                                      "topic_data": [{"name": "t", "partition_data": [
                                                          {"index": 0, "records": batch}]}]})


def _record() -> bytes:
    return build_batch([(None, b"v", [], None)])


async def _answer(reader: asyncio.StreamReader, api_key: int, version: int) -> tuple[int, dict[str, Any]]:
    size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 5))[0]
    frame = await asyncio.wait_for(reader.readexactly(size), 5)
    body, _ = REGISTRY[api_key].response_decoder(version)(memoryview(frame), 4)
    return struct.unpack_from(">i", frame)[0], body


def _partition(answer: dict[str, Any]) -> tuple[int, int]:
    p = answer["responses"][0]["partition_responses"][0]
    return int(p["error_code"]), int(p["base_offset"])


async def _until(condition: Callable[[], bool]) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


@asynccontextmanager
async def serving(env: Env, workers: int = 2, metrics: BrokerMetrics | None = None
                  ) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    """A real socket server and handler pool over ``env``, and one client connection to it."""
    metrics = metrics if metrics is not None else BrokerMetrics()
    channel = RequestChannel(500)
    pool = HandlerPool(channel, ROUTES, env.ctx, workers, metrics, GROUP_ROUTES)
    server = SocketServer([("PLAINTEXT", "127.0.0.1", 0)], channel, 1 << 20, metrics)
    await server.start()
    pool.start()
    reader, writer = await asyncio.open_connection(*server.bound["PLAINTEXT"])
    try:
        yield reader, writer
    finally:
        writer.close()
        await server.close_all()
        await pool.stop()


def _replicated(env: Env) -> None:
    """Partition t-0 led here with follower 1 in the ISR: acks=all waits until follower 1 reports its offset."""
    env.replica_manager.become_leader_or_follower("t", PartitionState(0, 0, 1, [0, 1], [0, 1]), {})


async def test_pipelined_produces_append_in_order_and_answer_in_order(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    await env.create_topic("t")
    _replicated(env)
    partition = env.replica_manager.partitions[("t", 0)]
    async with serving(env) as (reader, writer):
        writer.write(_produce(1, -1, _record()) + _produce(2, 1, _record()) + _produce(3, -1, _record())
                     + _frame(ApiKey.METADATA, 1, 4, {"topics": [{"name": "t"}]}))
        # The second and third requests were appended while the first waits for follower 1: pipelined.
        await _until(lambda: partition.log.log_end_offset == 3)
        assert env.ctx.replicas.produce_purgatory.num_delayed == 2
        # The acks=1 answer is ready but stays behind the first request's.
        early = asyncio.ensure_future(reader.readexactly(4))
        await asyncio.sleep(0.2)
        assert not early.done()
        early.cancel()
        env.replica_manager.update_follower("t", 0, 1, 3)  # follower 1 has everything: HW 3
        answers = [await _answer(reader, ApiKey.PRODUCE, 7) for _ in range(3)]
        assert [cid for cid, _ in answers] == [1, 2, 3]
        assert [_partition(a) for _, a in answers] == [(0, 0), (0, 1), (0, 2)]
        cid, metadata = await _answer(reader, ApiKey.METADATA, 1)
        assert cid == 4 and metadata["topics"][0]["name"] == "t"


async def test_pipelined_idempotent_batches_keep_the_sequence_rules(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    await env.create_topic("t")
    _replicated(env)
    init = await env.call(ApiKey.INIT_PRODUCER_ID, 2, {"transactional_id": None, "transaction_timeout_ms": 60000})
    pid, epoch = init["producer_id"], init["producer_epoch"]

    def batch(seq: int) -> bytes:
        return build_batch([(None, b"v", [], None)], producer_id=pid, producer_epoch=epoch, base_sequence=seq)

    # In order; a retried duplicate of 7 (among the last five batches, which the broker remembers); a gap (11
    # missing); then 10.
    sequences = [*range(10), 7, 12, 10]
    async with serving(env) as (reader, writer):
        writer.write(b"".join(_produce(cid, -1, batch(seq)) for cid, seq in enumerate(sequences)))
        partition = env.replica_manager.partitions[("t", 0)]
        await _until(lambda: partition.log.log_end_offset == 11)
        env.replica_manager.update_follower("t", 0, 1, 11)
        answers = [await _answer(reader, ApiKey.PRODUCE, 7) for _ in sequences]
    assert [cid for cid, _ in answers] == list(range(len(sequences)))
    results = [_partition(a) for _, a in answers]
    assert results[:10] == [(0, offset) for offset in range(10)]
    assert results[10] == (0, 7)  # the duplicate answers the original batch's offset, appended once
    assert results[11][0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert results[12] == (0, 10)


async def test_an_unsupported_produce_version_is_answered_after_the_pipelined_ones(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    await env.create_topic("t")
    _replicated(env)
    unsupported = bytearray(_produce(2, 1, _record()))
    struct.pack_into(">h", unsupported, 6, 99)  # the request's api_version
    async with serving(env) as (reader, writer):
        writer.write(_produce(1, -1, _record()) + bytes(unsupported))
        partition = env.replica_manager.partitions[("t", 0)]
        await _until(lambda: partition.log.log_end_offset == 1)
        await asyncio.sleep(0.1)
        env.replica_manager.update_follower("t", 0, 1, 1)
        cid, answer = await _answer(reader, ApiKey.PRODUCE, 7)
        assert cid == 1 and _partition(answer) == (0, 0)
        size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 5))[0]
        frame = await asyncio.wait_for(reader.readexactly(size), 5)
        assert struct.unpack_from(">ih", frame) == (2, ErrorCode.UNSUPPORTED_VERSION)


async def test_pipelined_produces_read_together_are_written_with_one_append(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    await env.create_topic("t")
    appends = env.record_appends("t", 0)
    async with serving(env) as (reader, writer):
        # One write: the server reads the five frames at once (the client's bytes are sent before its loop turn).
        writer.write(b"".join(_produce(cid, 1, _record()) for cid in range(5)))
        answers = [await _answer(reader, ApiKey.PRODUCE, 7) for _ in range(5)]
    assert [cid for cid, _ in answers] == list(range(5))
    assert [_partition(a) for _, a in answers] == [(0, offset) for offset in range(5)]
    assert len(appends) == 1 and appends[0] == 5 * len(_record())


async def test_a_malformed_request_ends_the_group_and_nothing_after_it_is_appended(tmp_path: Path) -> None:
    """As one at a time: a malformed Produce closes the connection, and the pipelined requests after it in the
    same read are not written (their client never hears of them and would send them again)."""
    env = make_env(tmp_path)
    await env.create_topic("t")
    partition = env.replica_manager.partitions[("t", 0)]
    malformed = bytearray(_produce(2, 1, _record()))
    del malformed[-len(_record()) - 20:]  # the body cut short: the header decodes, the body does not
    INT32.pack_into(malformed, 0, len(malformed) - 4)
    async with serving(env) as (reader, writer):
        writer.write(_produce(0, 1, _record()) + _produce(1, 1, _record()) + bytes(malformed)
                     + _produce(3, 1, _record()) + _produce(4, 1, _record()))
        answers = [await _answer(reader, ApiKey.PRODUCE, 7) for _ in range(2)]
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed after the two answers
    assert [cid for cid, _ in answers] == [0, 1]
    assert [_partition(a) for _, a in answers] == [(0, 0), (0, 1)]
    assert partition.log.log_end_offset == 2


async def test_an_answered_produce_read_alone_is_written_at_once_and_in_order(tmp_path: Path) -> None:
    """A Produce request read on its own and answered in the handler's call (acks=1) is written by the connection
    itself when no earlier answer is outstanding (no writer task); behind a waiting acks=all request it still
    waits its turn. Its metrics are recorded as for any answer."""
    env = make_env(tmp_path)
    await env.create_topic("t")
    _replicated(env)
    partition = env.replica_manager.partitions[("t", 0)]
    metrics = BrokerMetrics()
    async with serving(env, metrics=metrics) as (reader, writer):
        writer.write(_produce(1, 1, _record()))
        cid, answer = await _answer(reader, ApiKey.PRODUCE, 7)
        assert cid == 1 and _partition(answer) == (0, 0)
        # Each frame read alone: an acks=all request waits for follower 1, the acks=1 one after it must not overtake.
        writer.write(_produce(2, -1, _record()))
        await _until(lambda: env.ctx.replicas.produce_purgatory.num_delayed == 1)
        writer.write(_produce(3, 1, _record()))
        await _until(lambda: partition.log.log_end_offset == 3)
        early = asyncio.ensure_future(reader.readexactly(4))
        await asyncio.sleep(0.2)
        assert not early.done()
        early.cancel()
        env.replica_manager.update_follower("t", 0, 1, 3)
        answers = [await _answer(reader, ApiKey.PRODUCE, 7) for _ in range(2)]
        assert [cid for cid, _ in answers] == [2, 3]
        assert [_partition(a) for _, a in answers] == [(0, 1), (0, 2)]
        writer.write(_produce(4, 1, _record()))
        cid, answer = await _answer(reader, ApiKey.PRODUCE, 7)
        assert cid == 4 and _partition(answer) == (0, 3)
    sample = metrics.registry.get_sample_value
    assert sample("moldau_requests_total", {"api": "produce"}) == 4
    assert sample("moldau_bytes_in_total") == sum(len(_produce(i, 1, _record())) for i in range(1, 5))
    assert sample("moldau_response_send_time_seconds_count", {"api": "produce"}) == 4


def _raw_client(server: SocketServer, rcvbuf: int = 0) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.connect(server.bound["PLAINTEXT"])
    sock.setblocking(False)
    return sock


def _frames_in(buf: bytearray) -> list[bytes]:
    """The complete frames at the start of ``buf`` (taken out of it)."""
    frames = []
    while len(buf) >= 4 and len(buf) - 4 >= struct.unpack_from(">i", buf)[0]:
        size = struct.unpack_from(">i", buf)[0]
        frames.append(bytes(buf[4:4 + size]))
        del buf[:4 + size]
    return frames


@asynccontextmanager
async def raw_serving(env: Env, send_buffer: int = -1) -> AsyncIterator[SocketServer]:
    metrics = BrokerMetrics()
    channel = RequestChannel(500)
    pool = HandlerPool(channel, ROUTES, env.ctx, 1, metrics, GROUP_ROUTES)
    server = SocketServer([("PLAINTEXT", "127.0.0.1", 0)], channel, 1 << 20, metrics, send_buffer=send_buffer)
    await server.start()
    pool.start()
    try:
        yield server
    finally:
        await server.close_all()
        await pool.stop()


async def test_an_acks_all_answer_is_written_in_the_call_that_moves_the_high_watermark(tmp_path: Path) -> None:
    """The only request in the line (one acks=all request in flight, as a transactional producer's) is answered on
    the socket in the very call of the follower's report that moves the high watermark: no writer task, no turn
    of the event loop between the two (the client socket is read without giving the loop a turn)."""
    env = make_env(tmp_path)
    await env.create_topic("t")
    _replicated(env)
    async with raw_serving(env) as server:
        sock = _raw_client(server)
        try:
            for cid in range(3):
                sock.send(_produce(cid, -1, _record()))
                await _until(lambda: env.ctx.replicas.produce_purgatory.num_delayed == 1)
                conn = next(iter(server.connections))
                assert conn._writer is None and len(conn._pipeline) == 1
                env.replica_manager.update_follower("t", 0, 1, cid + 1)  # follower 1 reports: HW cid + 1
                buf = bytearray(sock.recv(1 << 16))  # no await since: written in update_follower's call
                (frame,) = _frames_in(buf)
                body, _ = REGISTRY[ApiKey.PRODUCE].response_decoder(7)(memoryview(frame), 4)
                assert struct.unpack_from(">i", frame)[0] == cid and _partition(body) == (0, cid)
                assert not conn._pipeline and conn._writer is None
        finally:
            sock.close()


async def test_answers_the_socket_does_not_take_at_once_follow_in_order(tmp_path: Path) -> None:
    """Pipelined acks=all requests answered together by one high-watermark move, with answers larger than the
    socket buffers while the client reads nothing: the rest is written by the writer task, every answer once, in
    request order, and a request read after them is answered after them."""
    topic = "t" * 240  # long answers: the topic name is in each
    env = make_env(tmp_path)
    await env.create_topic(topic)
    env.replica_manager.become_leader_or_follower(topic, PartitionState(0, 0, 1, [0, 1], [0, 1]), {})
    count = MAX_PIPELINED_PRODUCES

    def produce(cid: int) -> bytes:
        return _frame(ApiKey.PRODUCE, 7, cid, {"transactional_id": None, "acks": -1, "timeout_ms": 30000,
                                                "topic_data": [{"name": topic, "partition_data": [
                                                    {"index": 0, "records": _record()}]}]})

    async with raw_serving(env, send_buffer=4096) as server:
        sock = _raw_client(server, rcvbuf=4096)
        try:
            sock.send(b"".join(produce(cid) for cid in range(count)))
            await _until(lambda: env.ctx.replicas.produce_purgatory.num_delayed == count)
            conn = next(iter(server.connections))
            env.replica_manager.update_follower(topic, 0, 1, count)
            await _until(lambda: conn._unsent is not None or conn._writer is not None)  # the socket is full
            loop = asyncio.get_running_loop()
            await loop.sock_sendall(sock, produce(count))
            buf = bytearray()
            frames: list[bytes] = []
            while len(frames) < count:
                buf += await asyncio.wait_for(loop.sock_recv(sock, 1 << 16), 5)
                frames += _frames_in(buf)
            assert [struct.unpack_from(">i", f)[0] for f in frames] == list(range(count))
            decode = REGISTRY[ApiKey.PRODUCE].response_decoder(7)
            assert [_partition(decode(memoryview(f), 4)[0]) for f in frames] == [(0, i) for i in range(count)]
            env.replica_manager.update_follower(topic, 0, 1, count + 1)
            while not frames[count:]:
                buf += await asyncio.wait_for(loop.sock_recv(sock, 1 << 16), 5)
                frames += _frames_in(buf)
            assert struct.unpack_from(">i", frames[count])[0] == count and not buf
        finally:
            sock.close()


async def test_a_malformed_produce_read_alone_closes_after_the_answers_before_it(tmp_path: Path) -> None:
    """A malformed Produce read on its own (refused in the handler's call) behind a waiting acks=all request: the
    waiting answer is written when it comes, then the connection closes; alone, it closes at once."""
    env = make_env(tmp_path)
    await env.create_topic("t")
    _replicated(env)
    malformed = bytearray(_produce(2, 1, _record()))
    del malformed[-len(_record()) - 20:]
    INT32.pack_into(malformed, 0, len(malformed) - 4)
    async with serving(env) as (reader, writer):
        writer.write(_produce(1, -1, _record()))
        await _until(lambda: env.ctx.replicas.produce_purgatory.num_delayed == 1)
        writer.write(bytes(malformed))
        await asyncio.sleep(0.2)
        env.replica_manager.update_follower("t", 0, 1, 1)  # the waiting request's answer
        cid, answer = await _answer(reader, ApiKey.PRODUCE, 7)
        assert cid == 1 and _partition(answer) == (0, 0)
        assert await asyncio.wait_for(reader.read(), 5) == b""
    async with serving(env) as (reader, writer):
        writer.write(bytes(malformed))
        assert await asyncio.wait_for(reader.read(), 5) == b""


async def test_large_produce_requests_cut_anywhere_are_appended_whole(tmp_path: Path) -> None:
    """Produce requests larger than protocol.frame.DIRECT_AT (which the broker's decoder does not receive in place:
    its memory follows what a client sent), written in uneven pieces: each comes out whole and in order, and the
    records arrive intact (the append checks each batch's CRC)."""
    env = make_env(tmp_path)
    await env.create_topic("t")
    rng = random.Random(7)
    batches = [build_batch([(None, rng.randbytes(2000), [], None) for _ in range(n)]) for n in (300, 200, 1, 350)]
    assert all(len(b) > DIRECT_AT for b in batches[:2] + batches[3:])
    data = b"".join(_produce(cid, 1, batch) for cid, batch in enumerate(batches)) + _frame(
        ApiKey.METADATA, 1, len(batches), {"topics": [{"name": "t"}]})
    async with serving(env) as (reader, writer):
        at = 0
        while at < len(data):
            n = rng.choice((1, 3, 4, 5, 4099, 70_000, 300_000))
            writer.write(data[at:at + n])
            await writer.drain()
            at += n
        answers = [await _answer(reader, ApiKey.PRODUCE, 7) for _ in batches]
        cid, metadata = await _answer(reader, ApiKey.METADATA, 1)
    assert [c for c, _ in answers] == [0, 1, 2, 3]
    assert [_partition(a) for _, a in answers] == [(0, 0), (0, 300), (0, 500), (0, 501)]
    assert cid == 4 and metadata["topics"][0]["name"] == "t"
