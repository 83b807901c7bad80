"""A follower's incremental fetch session (KIP-227) visits only the partitions that changed (issue #21).

The leader keeps, per session, the partitions that may have something to say: appended to, high watermark moved,
named by the request, or answered with records the follower has not confirmed yet. Real in-process components
(handler_env), a manual clock and a manual timer that never fires here: an answer that needed the timer would
hang, so each test also proves that no wake-up is lost."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from moldau.broker.apis import ROUTES
from moldau.broker.fetch_session import FetchSession, FetchSessionCache
from moldau.broker.metadata import PartitionState
from moldau.broker.request_channel import Request
from moldau.protocol.api import REGISTRY, ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.header import RequestHeader
from moldau.protocol.records import build_batch
from tests.unit.broker.apis.handler_env import Env, make_env

PARTS = 50


def _part(index: int, offset: int) -> dict[str, Any]:
    return {"partition": index, "current_leader_epoch": 1, "fetch_offset": offset, "last_fetched_epoch": -1,
            "log_start_offset": 0, "partition_max_bytes": 1 << 20}


class Follower:
    """Follower 1's side of one session: its fetch offsets, and the fetch requests it sends (through the real
    Fetch handler; the answer's records stay file regions)."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.session_id = 0
        self.epoch = 0
        self.offsets = dict.fromkeys(range(PARTS), 0)

    def fetch(self, named: list[int], max_wait_ms: int = 0) -> Any:
        body = {"replica_id": 1, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
                "isolation_level": 0, "session_id": self.session_id, "session_epoch": self.epoch, "rack_id": "",
                "topics": [{"topic": "t", "partitions": [_part(p, self.offsets[p]) for p in named]}] if named else [],
                "forgotten_topics_data": []}
        api = REGISTRY[ApiKey.FETCH]
        request = Request(RequestHeader(ApiKey.FETCH, 12, 1, "follower"), api, b"", 0, "127.0.0.1")
        self.epoch += 1
        return ROUTES[ApiKey.FETCH](self.env.ctx, request, body)

    def take(self, answer: dict[str, Any]) -> dict[int, int]:
        """Applies an answer as the fetcher does (its records move its offsets); returns partition -> number of
        record bytes answered, for every partition in the answer."""
        self.session_id = answer["session_id"]
        got = {}
        for t in answer["responses"]:
            for p in t["partitions"]:
                size = len(p["records"])
                got[p["partition_index"]] = size
                if size:
                    self.offsets[p["partition_index"]] = self.env.replica_manager.partitions[
                        ("t", p["partition_index"])].log.log_end_offset
        return got


async def _setup(tmp_path: Path) -> tuple[Env, Follower]:
    env = make_env(tmp_path)
    await env.create_topic("t", partitions=PARTS)
    for p in range(PARTS):  # led here (epoch 1), follower 1 in the ISR
        env.replica_manager.become_leader_or_follower("t", PartitionState(p, 0, 1, [0, 1], [0, 1]), {})
    follower = Follower(env)
    opened = follower.fetch(list(range(PARTS)))
    assert isinstance(opened, dict) and opened["session_id"] > 0
    follower.take(opened)
    return env, follower


def _append(env: Env, partition: int) -> None:
    env.replica_manager.append("t", partition, bytearray(build_batch([(None, b"v", [], None)])), 1)


def _count_visits(env: Env) -> dict[str, list[int]]:
    """Records each partition the leader looks at: follower updates, reads, "has news" checks."""
    rm = env.replica_manager
    visits: dict[str, list[int]] = {"update": [], "read": [], "news": []}
    for name, kind in (("update_follower", "update"), ("read", "read"), ("may_have_news", "news")):
        real = getattr(rm, name)

        def counting(topic: str, index: int, *a: Any, _real: Any = real, _kind: str = kind, **k: Any) -> Any:
            visits[_kind].append(index)
            return _real(topic, index, *a, **k)

        setattr(rm, name, counting)
    return visits


async def test_an_incremental_fetch_visits_only_named_and_changed_partitions(tmp_path: Path) -> None:
    env, follower = await _setup(tmp_path)
    visits = _count_visits(env)
    assert follower.take(follower.fetch([])) == {}
    assert visits == {"update": [], "read": [], "news": []}  # nothing changed: no partition is looked at
    _append(env, 7)
    assert follower.take(follower.fetch([])) == {7: 1 * len(build_batch([(None, b"v", [], None)]))}
    # Read, but the follower's position there is the one recorded last (it did not name 7): no update.
    assert visits["update"] == [] and sorted(set(visits["read"])) == [7]
    # The follower names its new position in 7: the HW moves and is told; then 7 has nothing left to say.
    for v in visits.values():
        v.clear()
    assert follower.take(follower.fetch([7])) == {7: 0}
    assert env.replica_manager.partitions[("t", 7)].high_watermark == 1
    assert follower.take(follower.fetch([])) == {}
    assert set(visits["update"]) | set(visits["read"]) | set(visits["news"]) == {7}


async def test_a_parked_session_fetch_is_woken_by_any_partition_of_the_session(tmp_path: Path) -> None:
    env, follower = await _setup(tmp_path)
    purgatory = env.ctx.replicas.fetch_purgatory
    parked = follower.fetch([], max_wait_ms=500)
    assert isinstance(parked, asyncio.Future) and not parked.done()
    # Pending (timed out there) but on no watch list: its session wakes it, not one entry per partition.
    assert purgatory.num_delayed == 1 and purgatory.watched() == 0
    _append(env, 33)  # a partition the request did not name
    answer = await asyncio.wait_for(parked, 2)  # the timer never fires: only the wake-up can answer
    assert follower.take(answer).keys() == {33} and purgatory.num_delayed == 0 and env.timer.now_ms == 0


async def test_changes_while_an_answer_is_built_or_in_flight_are_in_the_next_answer(tmp_path: Path) -> None:
    env, follower = await _setup(tmp_path)
    visits = _count_visits(env)
    parked = follower.fetch([], max_wait_ms=500)
    _append(env, 1)  # completes the fetch; its answer is read at the end of this turn ...
    _append(env, 2)  # ... so this one, in the same turn, goes out with it
    first = follower.take(await asyncio.wait_for(parked, 2))
    assert first.keys() == {1, 2}
    _append(env, 3)  # the answer is on its way to the follower: the next fetch must carry this
    again = follower.fetch([1, 2], max_wait_ms=500)
    assert isinstance(again, dict), "parked although partition 3 has data"
    assert follower.take(again).keys() == {1, 2, 3}  # 1 and 2: the moved HW; 3: its record
    # A fetch that parks again is answered by the next append, never by the timer; the HW its own report moved
    # (partition 3) goes out with that data, not in an answer of its own (min_bytes is 1).
    parked = follower.fetch([3], max_wait_ms=500)
    assert isinstance(parked, asyncio.Future)
    _append(env, 40)
    assert follower.take(await asyncio.wait_for(parked, 2)).keys() == {3, 40}
    assert env.timer.now_ms == 0
    assert set(visits["read"]) == {1, 2, 3, 40} and set(visits["update"]) == {1, 2, 3}


async def test_answers_that_change_without_the_follower_naming_the_partition(tmp_path: Path) -> None:
    """An answer's records may never be applied (the follower dropped them): as long as the follower does not
    name a new position, the partition is read again in each fetch, as Kafka's leader reads every partition.
    A new leader epoch is told to a follower still fetching at the old one (FENCED_LEADER_EPOCH)."""
    env, follower = await _setup(tmp_path)
    visits = _count_visits(env)
    _append(env, 5)
    assert follower.fetch([])["responses"][0]["partitions"][0]["partition_index"] == 5  # not taken
    answer = follower.fetch([])
    assert isinstance(answer, dict) and follower.take(answer).get(5, 0) > 0
    assert set(visits["read"]) == {5} and visits["update"] == []  # 5 not named: its position is as recorded
    follower.take(follower.fetch([5]))
    assert follower.take(follower.fetch([])) == {}
    env.replica_manager.become_leader_or_follower("t", PartitionState(9, 0, 2, [0, 1], [0, 1]), {})
    fenced = follower.fetch([], max_wait_ms=500)
    assert isinstance(fenced, dict)
    assert [(p["partition_index"], p["error_code"]) for t in fenced["responses"] for p in t["partitions"]] == [
        (9, ErrorCode.FENCED_LEADER_EPOCH)]


async def test_caught_up_idle_partitions_keep_the_follower_in_the_isr(tmp_path: Path) -> None:
    """Partitions where nothing happens are not visited by each fetch; a periodic sweep of the session keeps
    the follower's caught-up time fresh, so idle partitions do not shrink their ISR."""
    env, follower = await _setup(tmp_path)
    visits = _count_visits(env)
    rm = env.replica_manager
    lag_ms = rm.replica_lag_time_max_ms
    for _ in range(12):  # three times replica.lag.time.max.ms of incremental fetches
        env.clock.advance(lag_ms // 4)
        follower.take(follower.fetch([]))
        rm.maybe_shrink_isrs()
    assert all(rm.partitions[("t", p)].isr == [0, 1] for p in range(PARTS))
    # One sweep per lag / 4 visits every partition; the other fetches none.
    assert len(visits["update"]) == 12 * PARTS
    visits["update"].clear()
    env.clock.advance(1)
    follower.take(follower.fetch([]))
    assert visits["update"] == []
    # A follower that stops fetching is still taken out after the lag.
    env.clock.advance(lag_ms + 1)
    rm.maybe_shrink_isrs()
    assert all(rm.partitions[("t", p)].pending_isr in (None, [0]) for p in range(PARTS))


def test_the_changed_set_follows_the_sessions_partitions() -> None:
    cache = FetchSessionCache(10)
    body: dict[str, Any] = {"session_id": 0, "session_epoch": 0, "forgotten_topics_data": [],
                            "topics": [{"topic": "t", "partitions": [_part(0, 0), _part(1, 0)]}]}
    _, a, full = cache.resolve(body, 0, may_create=True)
    assert a is not None and full
    _, b, _ = cache.resolve({**body, "topics": [{"topic": "t", "partitions": [_part(1, 0)]}]}, 0, may_create=True)
    assert b is not None
    woken: list[int] = []

    class Waiter:
        def try_complete(self) -> bool:
            woken.append(1)
            return False

        def wake(self, tp: tuple[str, int]) -> None:
            woken.append(1)

    a.waiter = Waiter()
    cache.partition_changed(("t", 1))
    cache.partition_changed(("t", 9))  # in no session
    assert a.changed == {("t", 1)} and b.changed == {("t", 1)} and woken == [1]
    # An incremental request's named partitions are candidates; forgotten ones leave (and stop being marked).
    inc = {"session_id": a.session_id, "session_epoch": 1, "topics": [{"topic": "t", "partitions": [_part(0, 3)]}],
           "forgotten_topics_data": [{"topic": "t", "partitions": [1]}]}
    _, same, full = cache.resolve(inc, 0, may_create=True)
    assert same is a and not full and a.changed == {("t", 0)}
    a.changed.clear()
    cache.partition_changed(("t", 1))
    assert a.changed == set() and b.changed == {("t", 1)}
    # A closed session is no longer told of changes.
    cache.resolve({**inc, "session_epoch": -1, "forgotten_topics_data": []}, 0, may_create=True)
    cache.partition_changed(("t", 0))
    assert a.changed == set() and isinstance(a, FetchSession)


def test_a_followers_new_session_supersedes_its_old_one() -> None:
    """A follower that reconnects opens a new session over the same partitions: its old session is dropped at
    once (not when the cache runs out of slots), so appends stop marking it; another follower's stays."""
    cache = FetchSessionCache(10)

    def full(replica_id: int) -> dict[str, Any]:
        return {"replica_id": replica_id, "session_id": 0, "session_epoch": 0, "forgotten_topics_data": [],
                "topics": [{"topic": "t", "partitions": [_part(0, 0), _part(1, 0)]}]}

    _, old, _ = cache.resolve(full(1), 0, may_create=True)
    _, other, _ = cache.resolve(full(2), 0, may_create=True)
    _, new, _ = cache.resolve(full(1), 0, may_create=True)
    assert old is not None and other is not None and new is not None and len(cache) == 2
    cache.partition_changed(("t", 0))
    assert old.changed == set() and new.changed == other.changed == {("t", 0)}
    error, _, _ = cache.resolve({"replica_id": 1, "session_id": old.session_id, "session_epoch": 1,
                                 "topics": [], "forgotten_topics_data": []}, 0, may_create=True)
    assert error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
