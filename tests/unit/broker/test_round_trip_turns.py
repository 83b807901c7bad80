"""The steps of one replication round trip on a leader, on real in-process components (handler_env) with a manual
timer that never moves, so only the wake-ups under test can answer anything: a parked follower fetch goes out on
the next turn of the event loop after an append (one read, not two turns), an acks=all Produce and a long-poll
Fetch handed to the worker pool are answered in the very call that completes them, a coroutine handler's answer
reaches its request as the handler returns, the markers of a WriteTxnMarkers request are appended before its
first wait, and one high-watermark wait covers several partitions under one time-out. Each would catch a
request left parked past the data it waits for (the timer never fires here)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from moldau.broker.apis import ROUTES
from moldau.broker.handler_pool import HandlerPool
from moldau.broker.metadata import PartitionState
from moldau.broker.metrics import BrokerMetrics
from moldau.broker.network import SocketServer
from moldau.broker.request_channel import Reply, Request, RequestChannel
from moldau.protocol.api import REGISTRY, ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.header import RequestHeader
from moldau.protocol.records import build_batch
from moldau.protocol.types import INT32
from tests.unit.broker.apis.handler_env import Env, make_env, request_frame

FETCH_V, PRODUCE_V = 11, 9


async def _env(tmp_path: Path, partitions: int = 1) -> Env:
    env = make_env(tmp_path)
    await env.create_topic("t", partitions=partitions)
    # Led here (epoch 1) with follower 1 in the ISR: acks=all waits for it.
    for p in range(partitions):
        env.replica_manager.become_leader_or_follower("t", PartitionState(p, 0, 1, [0, 1], [0, 1]), {})
    return env


def _request(api_key: int, version: int, body: dict[str, Any]) -> Request:
    api = REGISTRY[api_key]
    wire = api.encode_request(version, body)
    request = Request(RequestHeader(api_key, version, 1, "unit-test"), api, wire, 0, "127.0.0.1")
    # The header is not in ``wire``: the body starts at 0, as the handler pool decodes it.
    request.done = asyncio.get_running_loop().create_future()
    return request


def _fetch_body(offset: int, partitions: int = 1) -> dict[str, Any]:
    return {"replica_id": 1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
            "topics": [{"topic": "t", "partitions": [
                {"partition": p, "current_leader_epoch": 1, "fetch_offset": offset, "last_fetched_epoch": -1,
                 "log_start_offset": 0, "partition_max_bytes": 1 << 20} for p in range(partitions)]}]}


def _produce_body(acks: int = -1) -> dict[str, Any]:
    return {"transactional_id": None, "acks": acks, "timeout_ms": 30000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": build_batch(
                [(None, b"v", [], None)])}]}]}


def _pool(env: Env) -> HandlerPool:
    return HandlerPool(RequestChannel(10), ROUTES, env.ctx, 1, BrokerMetrics())


def _follower_fetch(env: Env, offset: int) -> Any:
    api = REGISTRY[ApiKey.FETCH]
    body = _fetch_body(offset)
    request = Request(RequestHeader(ApiKey.FETCH, FETCH_V, 1, "follower"), api, b"", 0, "127.0.0.1")
    return ROUTES[ApiKey.FETCH](env.ctx, request, body)


async def test_a_parked_follower_fetch_goes_out_on_the_next_turn_after_an_append(tmp_path: Path,
                                                                                  monkeypatch: Any) -> None:
    import moldau.broker.apis.fetch as fetch_module

    env = await _env(tmp_path)
    reads = 0
    real = fetch_module._read_all

    def counting(*args: Any) -> Any:
        nonlocal reads
        reads += 1
        return real(*args)

    monkeypatch.setattr(fetch_module, "_read_all", counting)
    parked = _follower_fetch(env, 0)
    assert isinstance(parked, Reply) and not parked.done() and reads == 1
    await asyncio.sleep(0)
    assert reads == 1  # parking schedules no second read of what the handler has just read
    env.replica_manager.append("t", 0, bytearray(build_batch([(None, b"v", [], None)])), 1)
    assert not parked.done()  # not in the append's own call: the other appends of the turn go out with it
    await asyncio.sleep(0)
    # One turn later, and the check's read is the answer (no second read a turn after it).
    assert parked.done() and reads == 2
    assert parked.result()["responses"][0]["partitions"][0]["records"].size > 0
    assert env.timer.now_ms == 0 and env.ctx.replicas.fetch_purgatory.num_delayed == 0


async def test_an_acks_all_produce_is_answered_in_the_call_that_moves_the_high_watermark(tmp_path: Path) -> None:
    env = await _env(tmp_path)
    pool = _pool(env)
    request = _request(ApiKey.PRODUCE, PRODUCE_V, _produce_body())
    pool.handle(request)
    assert request.done is not None and not request.done.done()
    assert env.ctx.replicas.produce_purgatory.num_delayed == 1
    # The follower reports it has the batch: the HW moves, and the request has its answer before this returns.
    answer = _follower_fetch(env, env.replica_manager.partitions[("t", 0)].log.log_end_offset)
    assert request.done.done() and request.response is not None
    assert request.response["responses"][0]["partition_responses"][0]["error_code"] == ErrorCode.NONE
    assert not pool._pending and env.timer.now_ms == 0
    assert isinstance(answer, Reply) and not answer.done()  # the follower's fetch parks: nothing new for it


async def test_a_parked_fetch_handed_to_the_pool_is_answered_in_its_completing_call(tmp_path: Path) -> None:
    env = await _env(tmp_path)
    pool = _pool(env)
    request = _request(ApiKey.FETCH, FETCH_V, _fetch_body(0))
    pool.handle(request)
    assert request.done is not None and not request.done.done()
    env.replica_manager.append("t", 0, bytearray(build_batch([(None, b"v", [], None)])), 1)
    await asyncio.sleep(0)  # the check's turn; the answer reaches the request in it
    assert request.done.done() and request.response is not None
    assert request.response["responses"][0]["partitions"][0]["records"].size > 0
    assert not pool._pending


async def test_a_coroutine_handler_answers_its_request_as_it_returns(tmp_path: Path) -> None:
    env = await _env(tmp_path)
    pool = _pool(env)
    gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    answered: list[bool] = []

    async def handler(ctx: Any, request: Request, body: Any) -> dict[str, Any]:
        await gate
        return {"throttle_time_ms": 0, "error_code": 0}

    pool.routes = {ApiKey.END_TXN: handler}
    request = _request(ApiKey.END_TXN, 3, {"transactional_id": "tx", "producer_id": 1, "producer_epoch": 0,
                                           "committed": True})
    pool.handle(request)
    assert request.done is not None
    request.done.add_done_callback(lambda _f: answered.append(True))
    await asyncio.sleep(0)  # the handler's task starts and waits on the gate
    gate.set_result(None)
    await asyncio.sleep(0)  # the handler's task resumes and returns: the request is answered in that step
    assert request.done.done() and request.response == {"throttle_time_ms": 0, "error_code": 0}
    await asyncio.sleep(0)
    assert answered and not pool._pending


async def test_a_failing_coroutine_handler_closes_only_its_connection(tmp_path: Path) -> None:
    env = await _env(tmp_path)
    pool = _pool(env)

    async def handler(ctx: Any, request: Request, body: Any) -> dict[str, Any]:
        raise RuntimeError("broken")

    pool.routes = {ApiKey.END_TXN: handler}
    request = _request(ApiKey.END_TXN, 3, {"transactional_id": "tx", "producer_id": 1, "producer_epoch": 0,
                                           "committed": True})
    pool.handle(request)
    assert request.done is not None
    await asyncio.wait_for(request.done, 2)
    assert request.close_connection and request.response is None


async def test_stopping_the_pool_fails_the_requests_still_waiting(tmp_path: Path) -> None:
    env = await _env(tmp_path)
    pool = _pool(env)
    pool.start()
    produce = _request(ApiKey.PRODUCE, PRODUCE_V, _produce_body())
    pool.handle(produce)
    gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def handler(ctx: Any, request: Request, body: Any) -> dict[str, Any]:
        await gate
        return {}

    pool.routes = {**ROUTES, ApiKey.END_TXN: handler}
    end = _request(ApiKey.END_TXN, 3, {"transactional_id": "tx", "producer_id": 1, "producer_epoch": 0,
                                       "committed": True})
    pool.handle(end)
    await asyncio.sleep(0)
    await pool.stop()
    assert end.done is not None
    await asyncio.wait_for(end.done, 2)  # the handler's task ends cancelled on its next step
    assert produce.close_connection and end.close_connection


async def test_markers_are_appended_before_the_request_first_waits(tmp_path: Path) -> None:
    env = await _env(tmp_path, partitions=3)
    body = {"markers": [{"producer_id": 5, "producer_epoch": 0, "transaction_result": True,
                         "coordinator_epoch": 0, "topics": [{"name": "t", "partition_indexes": [0, 1, 2]}]}]}
    api = REGISTRY[ApiKey.WRITE_TXN_MARKERS]
    request = Request(RequestHeader(ApiKey.WRITE_TXN_MARKERS, 1, 1, "coordinator"), api, b"", 0, "127.0.0.1")
    coro = ROUTES[ApiKey.WRITE_TXN_MARKERS](env.ctx, request, body)
    task = asyncio.ensure_future(coro)
    await asyncio.sleep(0)  # the handler's first step: every marker appended, all waiting for one follower fetch
    rm = env.replica_manager
    assert [rm.partitions[("t", p)].log.log_end_offset for p in range(3)] == [1, 1, 1]
    assert not task.done()
    for p in range(3):  # the follower has them all
        rm.update_follower("t", p, 1, 1, 0, 1)
    answer = await asyncio.wait_for(task, 2)
    codes = [p["error_code"] for m in answer["markers"] for t in m["topics"] for p in t["partitions"]]
    assert codes == [ErrorCode.NONE] * 3 and not rm._hw_waiters and env.timer.now_ms == 0


async def test_one_wait_for_several_high_watermarks(tmp_path: Path) -> None:
    env = await _env(tmp_path, partitions=2)
    rm = env.replica_manager
    for p in range(2):
        rm.append("t", p, bytearray(build_batch([(None, b"v", [], None)])), -1)
    rm.update_follower("t", 0, 1, 1, 0, 1)  # partition 0 replicated, partition 1 not
    waiting = asyncio.ensure_future(rm.wait_for_high_watermarks([("t", 0, 1), ("t", 1, 1), ("t", 1, 0)], 5000))
    await asyncio.sleep(0)
    assert not waiting.done()
    rm.update_follower("t", 1, 1, 1, 0, 1)
    assert await asyncio.wait_for(waiting, 2) == [ErrorCode.NONE] * 3
    assert not rm._hw_waiters
    # Under one time-out: what is not replicated by then times out, what is keeps its answer.
    rm.append("t", 1, bytearray(build_batch([(None, b"v", [], None)])), -1)
    errors = await rm.wait_for_high_watermarks([("t", 0, 1), ("t", 1, 2)], 20)
    assert errors == [ErrorCode.NONE, ErrorCode.REQUEST_TIMED_OUT] and not rm._hw_waiters


@pytest.mark.parametrize("how", ["result", "exception", "cancel"])
async def test_a_reply_tells_its_listener_once_however_it_ends(how: str) -> None:
    reply: Reply[int] = Reply()
    heard: list[Reply[int]] = []
    reply.on_done(heard.append)
    if how == "result":
        reply.set_result(1)
    elif how == "exception":
        reply.set_exception(RuntimeError("x"))
    else:
        reply.cancel()
    assert heard == [reply]
    reply.on_done(heard.append)  # already done: told at once
    assert heard == [reply, reply]
    if how == "exception":
        with pytest.raises(RuntimeError):
            await reply


async def test_the_coordinators_own_markers_are_appended_when_the_round_asks(tmp_path: Path) -> None:
    """The marker channel starts a write in the call (its own partitions appended, the others' queued), so a
    round's markers do not wait a turn for a task to start; the awaitable answers once they are replicated."""
    import functools

    from moldau.broker.apis.txn_markers import TxnMarkerDeps, write_markers_locally
    from moldau.broker.coordinator.txn_markers import InterBrokerMarkerChannel

    env = await _env(tmp_path, partitions=2)
    rm = env.replica_manager
    channel = InterBrokerMarkerChannel(env.metadata, lambda _: None, 0,  # type: ignore[arg-type]
                                       local=functools.partial(write_markers_locally,
                                                               TxnMarkerDeps(rm, timeout_ms=5000)))
    written = asyncio.ensure_future(channel.write_markers(0, 5, 0, True, 0, [("t", 0), ("t", 1)]))
    assert [rm.partitions[("t", p)].log.log_end_offset for p in range(2)] == [1, 1]  # before any turn
    await asyncio.sleep(0)
    assert not written.done()
    for p in range(2):
        rm.update_follower("t", p, 1, 1, 0, 1)
    assert await asyncio.wait_for(written, 2) == {("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.NONE}
    assert not rm._hw_waiters and env.timer.now_ms == 0


async def test_a_request_is_handled_at_once_when_nothing_is_queued_and_in_order_when_something_is(
        tmp_path: Path) -> None:
    env = await _env(tmp_path)
    channel = RequestChannel(10)
    handled: list[str] = []

    def handler(ctx: Any, request: Request, body: Any) -> dict[str, Any]:
        handled.append(request.header.client_id or "")
        return {"throttle_time_ms": 0, "error_code": 0}

    pool = HandlerPool(channel, {ApiKey.END_TXN: handler}, env.ctx, 1, BrokerMetrics())

    def end_txn(name: str) -> Request:
        api = REGISTRY[ApiKey.END_TXN]
        wire = api.encode_request(3, {"transactional_id": "tx", "producer_id": 1, "producer_epoch": 0,
                                      "committed": True})
        request = Request(RequestHeader(ApiKey.END_TXN, 3, 1, name), api, wire, 0, "127.0.0.1")
        request.done = asyncio.get_running_loop().create_future()
        return request

    pool.start()
    try:
        first = end_txn("first")
        await channel.send_request(first)
        assert first.done is not None and first.done.done() and handled == ["first"]  # no turn, no worker
        # A backlog (a worker has not taken it yet): the next request queues behind it.
        queued, after = end_txn("queued"), end_txn("after")
        channel.queue.put_nowait(queued)
        await channel.send_request(after)
        assert handled == ["first"]
        assert after.done is not None
        await asyncio.wait_for(after.done, 2)
        assert handled == ["first", "queued", "after"]
    finally:
        await pool.stop()
    assert channel.inline is None


# ---------------------------------------------------------------------------------------------- over a socket
@contextlib.asynccontextmanager
async def _serving(env: Env) -> AsyncIterator[tuple[SocketServer, socket.socket]]:
    """The real socket server and worker pool over ``env``, and a non-blocking client socket to it."""
    channel = RequestChannel(100)
    pool = HandlerPool(channel, ROUTES, env.ctx, 1, BrokerMetrics())
    server = SocketServer([("PLAINTEXT", "127.0.0.1", 0)], channel, 1 << 20, BrokerMetrics())
    await server.start()
    pool.start()
    sock = socket.create_connection(server.bound["PLAINTEXT"])
    sock.setblocking(False)
    try:
        yield server, sock
    finally:
        sock.close()
        await server.close_all()
        await pool.stop()


def _wire(api_key: int, version: int, correlation_id: int, body: dict[str, Any]) -> bytes:
    return request_frame(api_key, version, correlation_id, body, "turns")


def _take_frames(sock: socket.socket, buf: bytearray) -> list[bytes]:
    """Reads what the socket has now (no waiting) and returns the complete answer frames in ``buf``."""
    try:
        buf += sock.recv(1 << 20)
    except BlockingIOError:
        pass
    frames = []
    while len(buf) >= 4 and len(buf) - 4 >= INT32.unpack_from(buf)[0]:
        size = INT32.unpack_from(buf)[0]
        frames.append(bytes(buf[4:4 + size]))
        del buf[:4 + size]
    return frames


async def _until_parked(env: Env, server: SocketServer, fetches: int = 1) -> Any:
    for _ in range(500):
        conns = list(server.connections)
        if env.ctx.replicas.fetch_purgatory.num_delayed == fetches and conns and conns[0]._parked is not None:
            return conns[0]
        await asyncio.sleep(0.01)
    raise AssertionError("the fetch did not park")


@pytest.mark.parametrize("value_size", [1, 27_000])
async def test_a_parked_fetch_answer_is_on_the_socket_in_the_turn_of_its_check(tmp_path: Path,
                                                                               value_size: int) -> None:
    """The parked fetch's answer is written by the check that completes it (one turn after the append), not by
    the connection's coroutine a turn after that; the connection meanwhile waits on its socket. So is an answer
    whose batch is above ``COPY_BELOW`` (27 KB: a transaction's batch of 250 x 100 B records), read in whole
    rather than sent by a writer task with sendfile."""
    env = await _env(tmp_path)
    async with _serving(env) as (server, sock):
        sock.send(_wire(ApiKey.FETCH, FETCH_V, 7, _fetch_body(0)))
        await _until_parked(env, server)
        batch = bytearray(build_batch([(None, b"v" * value_size, [], None)]))
        env.replica_manager.append("t", 0, batch, 1)  # patched in place: offset and leader epoch
        buf = bytearray()
        assert _take_frames(sock, buf) == []  # not in the append's own call
        await asyncio.sleep(0)  # the check's turn: its answer is written in it
        (frame,) = _take_frames(sock, buf)
        body, _ = REGISTRY[ApiKey.FETCH].response_decoder(FETCH_V)(memoryview(frame), 4)
        assert INT32.unpack_from(frame)[0] == 7
        assert bytes(body["responses"][0]["partitions"][0]["records"]) == batch


async def test_a_frame_read_behind_a_parked_fetch_is_handled_after_its_answer(tmp_path: Path) -> None:
    """Muting holds with the parked answer written elsewhere: a Metadata request sent right behind a parked
    fetch is not handled (nor answered) before the fetch's answer is written; a large answer (records for
    sendfile) goes out whole, before it."""
    env = await _env(tmp_path)
    async with _serving(env) as (server, sock):
        sock.send(_wire(ApiKey.FETCH, FETCH_V, 1, _fetch_body(0)) +
                  _wire(ApiKey.METADATA, 1, 2, {"topics": [{"name": "t"}]}))
        conn = await _until_parked(env, server)
        buf = bytearray()
        for _ in range(20):
            await asyncio.sleep(0.005)
            assert _take_frames(sock, buf) == [] and conn._parked is not None
        big = build_batch([(None, b"x" * 200_000, [], None)])  # above COPY_BELOW and COPY_WHOLE_BELOW: sendfile
        env.replica_manager.append("t", 0, bytearray(big), 1)
        frames: list[bytes] = []
        for _ in range(500):
            frames += _take_frames(sock, buf)
            if len(frames) == 2:
                break
            await asyncio.sleep(0.01)
        assert [INT32.unpack_from(f)[0] for f in frames] == [1, 2]
        body, _ = REGISTRY[ApiKey.FETCH].response_decoder(FETCH_V)(memoryview(frames[0]), 4)
        assert len(body["responses"][0]["partitions"][0]["records"]) == len(big)
        assert conn._parked is None and not buf
