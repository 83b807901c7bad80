"""Follower fetches parked in the fetch purgatory, on real in-process components with a manual timer that never
moves: new data must answer a parked fetch at once (a lost wake-up would leave it parked past the data, and only
the timeout that never comes here could answer it), appends in one turn of the event loop go out in one answer,
and a follower's fetch from its new log end offset completes the waiting acks=all produces in the same call."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from moldau.broker.apis import ROUTES
from moldau.broker.metadata import PartitionState
from moldau.broker.request_channel import Request
from moldau.protocol.api import REGISTRY, ApiKey
from moldau.protocol.header import RequestHeader
from moldau.protocol.records import build_batch, iter_headers
from tests.unit.broker.apis.handler_env import Env, make_env

FETCH_VERSION = 11


def _follower_fetch(env: Env, offset: int, max_wait_ms: int = 500) -> Any:
    """The fetch handler's result for follower 1 fetching t-0 from ``offset``: an answer or a parked future."""
    body = {"replica_id": 1, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
            "topics": [{"topic": "t", "partitions": [
                {"partition": 0, "current_leader_epoch": 1, "fetch_offset": offset, "last_fetched_epoch": -1,
                 "log_start_offset": 0, "partition_max_bytes": 1 << 20}]}]}
    api = REGISTRY[ApiKey.FETCH]
    request = Request(RequestHeader(ApiKey.FETCH, FETCH_VERSION, 1, "follower"), api, b"", 0, "127.0.0.1")
    return ROUTES[ApiKey.FETCH](env.ctx, request, body)


def _batches(answer: dict[str, Any]) -> list[int]:
    """Base offsets of the batches in the answer for t-0 (read from the file regions the network would send)."""
    records = answer["responses"][0]["partitions"][0]["records"]
    data = b"".join(os.pread(r.fileobj.fileno(), r.length, r.position) for r in getattr(records, "regions", []))
    return [h.base_offset for _, h in iter_headers(data)]


class _ReadCounter:
    """Counts the fetch handler's reads (``_read_all`` calls) from its creation on."""

    def __init__(self, monkeypatch: Any) -> None:
        import moldau.broker.apis.fetch as fetch_module

        self.count = 0
        real = fetch_module._read_all

        def counting(*args: Any) -> Any:
            self.count += 1
            return real(*args)

        monkeypatch.setattr(fetch_module, "_read_all", counting)


async def _env(tmp_path: Path) -> Env:
    env = make_env(tmp_path)
    await env.create_topic("t")
    # t-0 led here (epoch 1) with follower 1 in the ISR, so acks=all waits for it.
    env.replica_manager.become_leader_or_follower("t", PartitionState(0, 0, 1, [0, 1], [0, 1]), {})
    return env


def _append(env: Env, acks: int = 1) -> int:
    result = env.replica_manager.append("t", 0, bytearray(build_batch([(None, b"v", [], None)])), acks)
    return result.base_offset


async def test_parked_follower_fetch_is_answered_by_new_data_without_the_clock(tmp_path: Path) -> None:
    env = await _env(tmp_path)
    parked = _follower_fetch(env, 0)
    assert isinstance(parked, asyncio.Future) and not parked.done()
    assert env.ctx.replicas.fetch_purgatory.num_delayed == 1
    _append(env)
    # The manual timer never fires: only the append's wake-up can answer the fetch.
    answer = await asyncio.wait_for(parked, 2)
    assert _batches(answer) == [0]
    assert env.timer.now_ms == 0 and env.ctx.replicas.fetch_purgatory.num_delayed == 0


async def test_appends_in_one_turn_go_out_in_one_follower_answer(tmp_path: Path) -> None:
    env = await _env(tmp_path)
    parked = _follower_fetch(env, 0)
    offsets = [_append(env) for _ in range(3)]  # as a worker handles three pipelined produces in one turn
    answer = await asyncio.wait_for(parked, 2)
    assert offsets == [0, 1, 2] and _batches(answer) == [0, 1, 2]


async def test_data_appended_while_a_fetch_is_handled_is_not_missed(tmp_path: Path) -> None:
    """A fetch that finds nothing parks; an append right after (same turn) answers it; the next fetch from the
    new end parks again and is answered by the next append, never left waiting for its timeout."""
    env = await _env(tmp_path)
    for round_ in range(5):
        parked = _follower_fetch(env, round_)
        assert not parked.done()
        _append(env)
        answer = await asyncio.wait_for(parked, 2)
        assert _batches(answer) == [round_]
    assert env.timer.now_ms == 0


async def test_follower_fetch_completes_waiting_acks_all_produces_at_once(tmp_path: Path) -> None:
    env = await _env(tmp_path)
    produce = env.ctx.replicas.produce_purgatory
    parked = _follower_fetch(env, 0)
    offsets = [_append(env, acks=-1) for _ in range(4)]
    await asyncio.wait_for(parked, 2)
    partition = env.replica_manager.partitions[("t", 0)]
    assert partition.high_watermark == 0
    # Produce requests waiting for the HW (as the handler parks them): one per appended batch.
    answers = [asyncio.ensure_future(env.call(ApiKey.PRODUCE, 7, {
        "transactional_id": None, "acks": -1, "timeout_ms": 30000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": build_batch(
            [(None, b"w", [], None)])}]}]})) for _ in range(3)]
    await asyncio.sleep(0)
    assert produce.num_delayed == 3
    # The follower's next fetch reports it has everything: the HW moves and every waiting produce completes.
    again = _follower_fetch(env, partition.log.log_end_offset)
    assert partition.high_watermark == 7 and produce.num_delayed == 0
    results = [await asyncio.wait_for(a, 2) for a in answers]
    bases = [r["responses"][0]["partition_responses"][0]["base_offset"] for r in results]
    assert offsets == [0, 1, 2, 3] and bases == [4, 5, 6]
    # The follower's parked fetch learns the new HW with the next data, not by an extra round trip.
    assert isinstance(again, asyncio.Future) and not again.done()


async def test_wake_ups_of_one_turn_cost_one_check(tmp_path: Path, monkeypatch: Any) -> None:
    """A parked fetch woken n times in one turn (a follower fetch moving the HW of n partitions) re-reads its
    partitions once, at the end of the turn, not n times."""

    env = await _env(tmp_path)
    parked = _follower_fetch(env, 0)
    await asyncio.sleep(0)  # the check scheduled when it was parked
    reads = _ReadCounter(monkeypatch)
    purgatory = env.ctx.replicas.fetch_purgatory
    for _ in range(50):
        purgatory.check_and_complete(("t", 0))
    assert reads.count == 0 and not parked.done()
    await asyncio.sleep(0)
    assert reads.count == 1 and not parked.done()  # nothing new: still parked, after one read
    _append(env)
    answer = await asyncio.wait_for(parked, 2)
    assert _batches(answer) == [0]


def _session_fetch(env: Env, replica: int, offset: int, session_id: int, epoch: int, max_wait_ms: int = 500) -> Any:
    """Follower ``replica``'s session fetch of t-0 (epoch 0 opens the session, later epochs are incremental)."""
    body = {"replica_id": replica, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": session_id, "session_epoch": epoch, "rack_id": "",
            "forgotten_topics_data": [], "topics": [{"topic": "t", "partitions": [
                {"partition": 0, "current_leader_epoch": 1, "fetch_offset": offset, "last_fetched_epoch": -1,
                 "log_start_offset": 0, "partition_max_bytes": 1 << 20}]}]}
    api = REGISTRY[ApiKey.FETCH]
    request = Request(RequestHeader(ApiKey.FETCH, FETCH_VERSION, 1, f"follower-{replica}"), api, b"", 0,
                      "127.0.0.1")
    return ROUTES[ApiKey.FETCH](env.ctx, request, body)


async def test_a_high_watermark_move_alone_schedules_no_check_of_a_parked_follower_fetch(tmp_path: Path,
                                                                                         monkeypatch: Any) -> None:
    """RF 3: follower 2's report moves the high watermark, which marks follower 1's session changed. Follower 1's
    parked fetch waits for data: that change schedules no read for it (it could answer nothing); the next
    append answers it, with the new high watermark; a change of the leader's epoch wakes it too (an error)."""

    env = make_env(tmp_path)
    await env.create_topic("t")
    env.replica_manager.become_leader_or_follower("t", PartitionState(0, 0, 1, [0, 1, 2], [0, 1, 2]), {})
    sessions = {}
    for replica in (1, 2):  # each opens its session at offset 0 (answered at once: a full fetch over nothing)
        opened = _session_fetch(env, replica, 0, 0, 0, max_wait_ms=0)
        sessions[replica] = opened["session_id"]
    _append(env)
    for r in (1, 2):  # the record is there: answered at once
        assert _batches(_session_fetch(env, r, 0, sessions[r], 1)) == [0]
    first = _session_fetch(env, 1, 1, sessions[1], 2)  # follower 1 has it: parks (the HW waits for follower 2)
    assert isinstance(first, asyncio.Future) and not first.done()
    reads = _ReadCounter(monkeypatch)
    second = _session_fetch(env, 2, 1, sessions[2], 2)  # follower 2 has it too: the HW moves to 1
    partition = env.replica_manager.partitions[("t", 0)]
    assert partition.high_watermark == 1 and reads.count == 1  # follower 2's own read, which parks it
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert reads.count == 1 and not first.done() and not second.done()
    _append(env)
    answers = {1: await asyncio.wait_for(first, 2), 2: await asyncio.wait_for(second, 2)}
    for answer in answers.values():
        p = answer["responses"][0]["partitions"][0]
        assert _batches(answer) == [1] and p["high_watermark"] == 1
    # A new leader epoch: the parked fetches (from epoch 1) are answered with their error, not left waiting.
    again = _session_fetch(env, 1, 2, sessions[1], 3)
    assert isinstance(again, asyncio.Future) and not again.done()
    env.replica_manager.become_leader_or_follower("t", PartitionState(0, 0, 2, [0, 1, 2], [0, 1, 2]), {})
    p = (await asyncio.wait_for(again, 2))["responses"][0]["partitions"][0]
    assert p["error_code"] != 0
