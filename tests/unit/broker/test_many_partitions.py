"""Work per request that must not grow with the partitions a request names (issue #21).

Incremental fetch sessions (KIP-227) on the leader, through the Fetch handler: a follower's full fetch opens a
session; its incremental fetches (only changed partitions) are answered with only the partitions that have
something new, and only those are read; forgotten partitions leave; a wrong epoch or id is refused. A consumer's
session answers what it may read: data below the high watermark, not an append the followers have not copied. An acks=all request over many partitions completes with checks linear in its partitions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from moldau.broker.apis import ROUTES
from moldau.broker.fetch_session import FetchSessionCache
from moldau.broker.metadata import PartitionState
from moldau.broker.request_channel import Request
from moldau.protocol.api import REGISTRY, ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.header import RequestHeader
from moldau.protocol.records import build_batch
from tests.unit.broker.apis.handler_env import Env, make_env

PARTS = 4


def _part(index: int, offset: int) -> dict[str, Any]:
    return {"partition": index, "current_leader_epoch": 1, "fetch_offset": offset, "last_fetched_epoch": -1,
            "log_start_offset": 0, "partition_max_bytes": 1 << 20}


async def _fetch(env: Env, session_id: int, epoch: int, parts: list[dict[str, Any]],
                 forgotten: list[int] | None = None, replica_id: int = 1) -> dict[str, Any]:
    body = {"replica_id": replica_id, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": session_id, "session_epoch": epoch, "rack_id": "",
            "topics": [{"topic": "t", "partitions": parts}] if parts else [],
            "forgotten_topics_data": [{"topic": "t", "partitions": forgotten}] if forgotten else []}
    api = REGISTRY[ApiKey.FETCH]
    request = Request(RequestHeader(ApiKey.FETCH, 12, 1, "follower"), api, b"", 0, "127.0.0.1")
    answer = ROUTES[ApiKey.FETCH](env.ctx, request, body)  # records stay file regions: not encoded here
    assert isinstance(answer, dict)
    return answer


def _answered(answer: dict[str, Any]) -> dict[int, int]:
    """Partition -> high watermark of the partitions in the answer."""
    return {p["partition_index"]: p["high_watermark"] for t in answer["responses"] for p in t["partitions"]}


async def test_follower_fetch_session(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    await env.create_topic("t", partitions=PARTS)
    for p in range(PARTS):
        env.replica_manager.become_leader_or_follower("t", PartitionState(p, 0, 1, [0, 1], [0, 1]), {})
    opened = await _fetch(env, 0, 0, [_part(p, 0) for p in range(PARTS)])
    session_id = opened["session_id"]
    assert session_id > 0 and _answered(opened) == dict.fromkeys(range(PARTS), 0)  # a full answer
    env.replica_manager.append("t", 2, bytearray(build_batch([(None, b"v", [], None)])), 1)
    # Nothing changed on the follower's side: an empty request; only partition 2 has news (a record).
    answer = await _fetch(env, session_id, 1, [])
    assert answer["error_code"] == ErrorCode.NONE and _answered(answer) == {2: 0}
    # The follower got it: its position moves (only partition 2 is sent); the HW moves to 1 and is told once.
    assert _answered(await _fetch(env, session_id, 2, [_part(2, 1)])) == {2: 1}
    assert _answered(await _fetch(env, session_id, 3, [])) == {}
    assert env.replica_manager.partitions[("t", 2)].high_watermark == 1
    # Forgotten partitions leave the session: new data there is not answered any more.
    await _fetch(env, session_id, 4, [], forgotten=[3])
    env.replica_manager.append("t", 3, bytearray(build_batch([(None, b"v", [], None)])), 1)
    assert _answered(await _fetch(env, session_id, 5, [])) == {}
    # Out of order or unknown: refused, and the fetcher starts over.
    assert (await _fetch(env, session_id, 9, []))["error_code"] == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert (await _fetch(env, session_id + 1, 1, []))["error_code"] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    # Epoch -1 closes the session (a sessionless full fetch); a consumer is not given one.
    closed = await _fetch(env, session_id, -1, [_part(p, 0) for p in range(2)])
    assert closed["session_id"] == 0 and set(_answered(closed)) == {0, 1}
    assert (await _fetch(env, session_id, 6, []))["error_code"] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def _records(answer: dict[str, Any]) -> dict[int, int]:
    """Partition -> bytes of records in the answer (file regions or bytes)."""
    return {p["partition_index"]: len(p["records"]) for t in answer["responses"] for p in t["partitions"]}


async def test_consumer_fetch_session(tmp_path: Path) -> None:
    """A consumer (replica_id -1) gets a session too; its incremental answers follow the high watermark: an
    append only the leader holds is not news to it, the follower's copy (the HW move) is."""
    env = make_env(tmp_path)
    await env.create_topic("t", partitions=PARTS)
    for p in range(PARTS):
        env.replica_manager.become_leader_or_follower("t", PartitionState(p, 0, 1, [0, 1], [0, 1]), {})
    opened = await _fetch(env, 0, 0, [_part(p, 0) for p in range(PARTS)], replica_id=-1)
    session_id = opened["session_id"]
    assert session_id > 0 and _answered(opened) == dict.fromkeys(range(PARTS), 0)
    env.replica_manager.append("t", 2, bytearray(build_batch([(None, b"v", [], None)])), 1)
    assert _answered(await _fetch(env, session_id, 1, [], replica_id=-1)) == {}  # above the HW: nothing to read
    assert _records(await _fetch(env, 0, -1, [_part(2, 1)])) == {2: 0}  # follower 1 has it (sessionless): HW 1
    answer = await _fetch(env, session_id, 2, [], replica_id=-1)
    assert _answered(answer) == {2: 1} and _records(answer)[2] > 0
    # Not confirmed yet (the consumer names no new position): the records are answered again.
    assert _records(await _fetch(env, session_id, 3, [], replica_id=-1))[2] > 0
    assert _answered(await _fetch(env, session_id, 4, [_part(2, 1)], replica_id=-1)) == {}
    assert _answered(await _fetch(env, session_id, 5, [], replica_id=-1)) == {}


def test_a_follower_session_may_push_out_a_consumer_session() -> None:
    """All slots taken: a new follower session takes a consumer's (followers are privileged, as in Kafka's
    cache); a consumer never takes one still in use, and goes on without a session."""
    def body(replica_id: int, session_id: int = 0, epoch: int = 0) -> dict[str, Any]:
        return {"replica_id": replica_id, "session_id": session_id, "session_epoch": epoch,
                "topics": [{"topic": "t", "partitions": [_part(0, 0)]}], "forgotten_topics_data": []}

    cache = FetchSessionCache(1, evict_after_ms=60_000)
    _, consumer, _ = cache.resolve(body(-1), 0, may_create=True)
    assert consumer is not None and len(cache) == 1
    _, other, _ = cache.resolve(body(-1), 10, may_create=True)
    assert other is None  # the consumer's session is in use: the newcomer goes without
    _, follower, _ = cache.resolve(body(1), 20, may_create=True)
    assert follower is not None and len(cache) == 1
    error, _, _ = cache.resolve(body(-1, consumer.session_id, 1), 30, may_create=True)
    assert error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND  # the consumer starts over with a full fetch
    _, late, _ = cache.resolve(body(-1), 40, may_create=True)
    assert late is None  # and finds no slot: the follower's session is never taken
    _, second, _ = cache.resolve(body(2), 50, may_create=True)
    assert second is None  # nor by another follower while it is in use
    _, after_idle, _ = cache.resolve(body(-1), 60_020, may_create=True)
    assert after_idle is not None  # idle past evict_after_ms: anyone may take it


async def test_incremental_fetch_reads_only_partitions_with_news(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    await env.create_topic("t", partitions=PARTS)
    for p in range(PARTS):
        env.replica_manager.become_leader_or_follower("t", PartitionState(p, 0, 1, [0, 1], [0, 1]), {})
    session_id = (await _fetch(env, 0, 0, [_part(p, 0) for p in range(PARTS)]))["session_id"]
    reads: list[int] = []
    real = env.replica_manager.read
    env.replica_manager.read = lambda topic, index, *a, **k: reads.append(index) or real(topic, index, *a, **k)  # type: ignore[method-assign]
    await _fetch(env, session_id, 1, [])
    assert reads == []  # nothing new anywhere: no partition is read
    env.replica_manager.append("t", 1, bytearray(build_batch([(None, b"v", [], None)])), 1)
    assert _answered(await _fetch(env, session_id, 2, [])) == {1: 0} and reads == [1]


async def test_acks_all_over_many_partitions_costs_linear_checks(tmp_path: Path, monkeypatch: Any) -> None:
    """A follower fetch moving the HW of n partitions wakes an acks=all request over those n partitions n times;
    the request settles its partitions in order, so the wake-ups cost O(n) checks in all, not n x n."""
    import asyncio

    import moldau.broker.apis.produce as produce_module

    n = 150
    env = make_env(tmp_path)
    await env.create_topic("t", partitions=n)
    for p in range(n):
        env.replica_manager.become_leader_or_follower("t", PartitionState(p, 0, 1, [0, 1], [0, 1]), {})
    answer = asyncio.ensure_future(env.call(ApiKey.PRODUCE, 7, {
        "transactional_id": None, "acks": -1, "timeout_ms": 30000, "topic_data": [{"name": "t", "partition_data": [
            {"index": p, "records": build_batch([(None, b"v", [], None)])} for p in range(n)]}]}))
    await asyncio.sleep(0.05)
    assert env.ctx.replicas.produce_purgatory.num_delayed == 1
    checks = 0
    real = produce_module._check

    def counting(*args: Any) -> bool:
        nonlocal checks
        checks += 1
        return real(*args)

    monkeypatch.setattr(produce_module, "_check", counting)
    for p in range(n):  # the follower's fetch reports every partition caught up: n HW moves
        env.replica_manager.update_follower("t", p, 1, 1)
    result = await asyncio.wait_for(answer, 5)
    assert all(p["error_code"] == 0 for t in result["responses"] for p in t["partition_responses"])
    assert checks <= 3 * n


async def test_follower_fetch_moving_many_high_watermarks_checks_a_produce_once(tmp_path: Path,
                                                                                   monkeypatch: Any) -> None:
    """A follower's fetch reports its position in n partitions and so moves n high watermarks: an acks=all
    request over those partitions is asked once whether it is done (it was asked n times, one purgatory walk per
    move), and answers with every partition's offset."""
    import asyncio

    from moldau.broker.apis.produce import DelayedProduce

    n = 40
    env = make_env(tmp_path)
    await env.create_topic("t", partitions=n)
    for p in range(n):
        env.replica_manager.become_leader_or_follower("t", PartitionState(p, 0, 1, [0, 1], [0, 1]), {})
    session_id = (await _fetch(env, 0, 0, [_part(p, 0) for p in range(n)]))["session_id"]
    answer = asyncio.ensure_future(env.call(ApiKey.PRODUCE, 7, {
        "transactional_id": None, "acks": -1, "timeout_ms": 30000, "topic_data": [{"name": "t", "partition_data": [
            {"index": p, "records": build_batch([(None, b"v", [], None)] * 2)} for p in range(n)]}]}))
    for _ in range(100):  # bounded: until the request waits in the purgatory
        if env.ctx.replicas.produce_purgatory.num_delayed == 1:
            break
        await asyncio.sleep(0.01)
    assert env.ctx.replicas.produce_purgatory.num_delayed == 1
    tries = 0
    real = DelayedProduce.try_complete

    def counting(self: DelayedProduce) -> bool:
        nonlocal tries
        tries += 1
        return real(self)

    monkeypatch.setattr(DelayedProduce, "try_complete", counting)
    # The follower got the records (its previous answer): its next fetch names its new position everywhere.
    reported = await _fetch(env, session_id, 1, [_part(p, 2) for p in range(n)])
    assert _answered(reported) == dict.fromkeys(range(n), 2)  # every HW moved, and the answer tells them
    assert tries == 1
    result = await asyncio.wait_for(answer, 5)
    assert [(p["index"], p["error_code"], p["base_offset"]) for t in result["responses"]
            for p in t["partition_responses"]] == [(p, 0, 0) for p in range(n)]


async def test_high_watermark_moves_together_tell_each_listener_after_the_block(tmp_path: Path) -> None:
    """Inside ``high_watermark_moves_together`` the moves are collected and told at the end: each partition once,
    in order, to the per-partition listeners and in one call to the batch listeners; outside it at once."""
    env = make_env(tmp_path)
    await env.create_topic("t", partitions=3)
    rm = env.replica_manager
    for p in range(3):
        rm.become_leader_or_follower("t", PartitionState(p, 0, 1, [0, 1], [0, 1]), {})
        rm.append("t", p, bytearray(build_batch([(None, b"v", [], None)] * 3)), 1)
    single: list[Any] = []
    batches: list[Any] = []
    rm.hw_listeners.append(single.append)
    rm.hw_batch_listeners.append(batches.append)
    with rm.high_watermark_moves_together():
        rm.update_follower("t", 2, 1, 1)
        rm.update_follower("t", 0, 1, 2)
        with rm.high_watermark_moves_together():  # nested: told at the outermost end
            rm.update_follower("t", 2, 1, 3)
        assert single == [] and batches == []
    assert single == [("t", 2), ("t", 0)] and batches == [[("t", 2), ("t", 0)]]
    rm.update_follower("t", 1, 1, 1)
    assert single[-1] == ("t", 1) and batches[-1] == [("t", 1)]


async def test_an_acks_all_request_watches_only_the_partition_it_waits_for(tmp_path: Path) -> None:
    """An acks=all request over n partitions settles them in request order, so it watches only the first one
    still waiting (one watch list entry instead of n): a follower's report of later partitions does not
    complete it, the report of that one settles it and every later partition already done, and it then
    watches the next one waiting. A later partition that lost its leadership meanwhile answers
    NOT_LEADER_OR_FOLLOWER; the others answer their offsets."""
    n = 6
    env = make_env(tmp_path)
    await env.create_topic("t", partitions=n)
    rm = env.replica_manager
    for p in range(n):
        rm.become_leader_or_follower("t", PartitionState(p, 0, 1, [0, 1], [0, 1]), {})
        rm.append("t", p, bytearray(build_batch([(None, b"before", [], None)])), 1)
    api = REGISTRY[ApiKey.PRODUCE]
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 30000, "topic_data": [{"name": "t", "partition_data": [
        {"index": p, "records": bytearray(build_batch([(None, b"v", [], None)]))} for p in range(n)]}]}
    request = Request(RequestHeader(ApiKey.PRODUCE, 9, 1, "producer"), api, b"", 0, "127.0.0.1")
    future: Any = ROUTES[ApiKey.PRODUCE](env.ctx, request, body)
    purgatory = env.ctx.replicas.produce_purgatory
    assert not future.done() and purgatory.num_delayed == 1
    assert purgatory.watched() == 1 and set(purgatory._watchers) == {("t", 0)}
    for p in (5, 4, 1):  # caught up there: those high watermarks move, the request waits for partition 0
        rm.update_follower("t", p, 1, 2)
    rm.become_leader_or_follower("t", PartitionState(3, 1, 2, [0, 1], [0, 1]), {})  # 3 is led by 1 now
    assert not future.done() and set(purgatory._watchers) == {("t", 0)}
    rm.update_follower("t", 0, 1, 2)  # 0, 1 settled (3 on to its error): waits for 2 now
    assert not future.done() and purgatory.watched() == 1 and set(purgatory._watchers) == {("t", 2)}
    rm.update_follower("t", 2, 1, 2)
    assert future.done() and purgatory.watched() == 0 and purgatory.num_delayed == 0
    answers = {p["index"]: (p["error_code"], p["base_offset"])
               for t in future.result()["responses"] for p in t["partition_responses"]}
    assert answers == {p: (ErrorCode.NONE, 1) for p in (0, 1, 2, 4, 5)} | {3: (ErrorCode.NOT_LEADER_OR_FOLLOWER, 1)}
