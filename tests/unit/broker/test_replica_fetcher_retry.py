"""The follower fetcher's retries: a partition whose leader has not applied its LeaderAndIsr yet
(UNKNOWN_LEADER_EPOCH / NOT_LEADER_OR_FOLLOWER) is asked again after 50 ms, then 100, 200, ... up to
replica.fetch.backoff.ms, while the other partitions are fetched meanwhile; one log line per answer.

The leader is a scripted stand-in for the connection (what it answers is the input); the fetcher, its partitions
and their logs are real. The schedule is checked with a hand-moved clock, the loop with real time."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from moldau.broker.metadata import PartitionState
from moldau.broker.partition import Partition
from moldau.broker.replica_fetcher import RETRY_INITIAL_MS, Fetcher, FetcherSettings, FollowState
from moldau.protocol.api import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.records import build_batch
from moldau.storage.config import LogConfig, ManualClock
from moldau.storage.log import Log

LEADER, FOLLOWER, EPOCH = 1, 2, 5

Answer = Callable[[tuple[str, int]], ErrorCode]


def _follower(tmp_path: Path, index: int, with_data: bool) -> Partition:
    """A partition this broker (2) follows at EPOCH; with data written at an older epoch, it must truncate first."""
    p = Partition("t", index, FOLLOWER, Log(tmp_path / f"t-{index}", LogConfig()))
    if with_data:
        p.apply_state(PartitionState(index, FOLLOWER, EPOCH - 1, [LEADER, FOLLOWER], [LEADER, FOLLOWER]), 0)
        p.append_as_leader(build_batch([(None, b"v", [], 1000)]))
    p.apply_state(PartitionState(index, LEADER, EPOCH, [LEADER, FOLLOWER], [LEADER, FOLLOWER]), 0)
    return p


class ScriptedLeader:
    """Answers OffsetForLeaderEpoch per partition with ``truncation(tp)``; Fetch with nothing new after waiting
    max_wait_ms, as a leader with no new data does. Records (time, api key, partitions, max_wait_ms)."""

    def __init__(self, truncation: Answer) -> None:
        self.truncation = truncation
        self.requests: list[tuple[float, int, list[tuple[str, int]], int]] = []

    async def send(self, api: Any, body: dict[str, Any]) -> dict[str, Any]:
        if api.key == ApiKey.OFFSET_FOR_LEADER_EPOCH:
            tps = [(t["topic"], p["partition"]) for t in body["topics"] for p in t["partitions"]]
            self.requests.append((time.monotonic(), api.key, tps, 0))
            return {"topics": [{"topic": t, "partitions": [
                {"partition": p, "error_code": int(self.truncation((t, p))), "leader_epoch": EPOCH - 1,
                 "end_offset": 1}]} for t, p in tps]}
        assert api.key == ApiKey.FETCH
        tps = [(t["topic"], p["partition"]) for t in body["topics"] for p in t["partitions"]]
        self.requests.append((time.monotonic(), api.key, tps, body["max_wait_ms"]))
        await asyncio.sleep(body["max_wait_ms"] / 1000)
        return {"error_code": 0, "session_id": 0, "responses": [
            {"topic": t, "partitions": [{"partition_index": p, "error_code": 0, "high_watermark": 1,
                                          "log_start_offset": 0, "records": None}]} for t, p in tps]}

    def asked(self, key: int, tp: tuple[str, int]) -> list[int]:
        """Indexes of the requests of ``key`` that named ``tp``."""
        return [i for i, (_, k, tps, _) in enumerate(self.requests) if k == key and tp in tps]


class ScriptedFetcher(Fetcher):
    leader: ScriptedLeader

    async def _connection(self) -> Any:
        return self.leader


async def _fetcher(leader: ScriptedLeader, settings: FetcherSettings, partitions: list[Partition],
                   run: bool) -> ScriptedFetcher:
    ScriptedFetcher.leader = leader
    fetcher = ScriptedFetcher(LEADER, settings, lambda _: None)
    if not run:
        await fetcher.stop()  # the steps are driven by hand
    for p in partitions:
        fetcher.add(p)
    return fetcher


def test_the_retry_delay_starts_short_and_doubles_up_to_the_backoff() -> None:
    st = FollowState(None, EPOCH)  # type: ignore[arg-type]  # the schedule does not look at the partition
    assert st.due(0)
    delays = [st.retry_later(10_000, 1000, soon=True) for _ in range(7)]
    assert delays == [50, 100, 200, 400, 800, 1000, 1000]
    assert st.retry_at_ms == 11_000 and not st.due(10_999) and st.due(11_000)
    st.succeeded()
    assert st.due(0) and st.retry_later(0, 1000, soon=True) == RETRY_INITIAL_MS
    assert FollowState(None, EPOCH).retry_later(0, 1000, soon=False) == 1000  # type: ignore[arg-type]


def test_a_partition_whose_leader_is_not_ready_is_asked_again_on_schedule(tmp_path: Path,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    async def run() -> None:
        clock = ManualClock(0)
        slow = [("t", 0), ("t", 1)]
        answers = {tp: ErrorCode.UNKNOWN_LEADER_EPOCH for tp in slow}
        leader = ScriptedLeader(lambda tp: answers.get(tp, ErrorCode.NONE))
        parts = [_follower(tmp_path, 0, True), _follower(tmp_path, 1, True), _follower(tmp_path, 2, True)]
        fetcher = await _fetcher(leader, FetcherSettings(FOLLOWER, backoff_ms=1000, clock=clock), parts,
                                 run=False)
        with caplog.at_level(logging.INFO, logger="moldau.replica_fetcher"):
            assert await fetcher._truncate(leader)  # type: ignore[arg-type]
        lines = [r.getMessage() for r in caplog.records if "OffsetForLeaderEpoch" in r.getMessage()]
        assert lines == ["OffsetForLeaderEpoch from broker 1: 2 partitions answered UNKNOWN_LEADER_EPOCH "
                         "(t-0, t-1); retrying them in 50 ms"]
        assert not fetcher.partitions[("t", 2)].truncating  # the healthy one goes on to fetching

        # Not asked again before its delay; the healthy partition is fetched meanwhile, waiting no longer.
        clock.advance(RETRY_INITIAL_MS - 1)
        before = len(leader.requests)
        assert not await fetcher._truncate(leader)  # type: ignore[arg-type]
        assert len(leader.requests) == before  # nothing was due: no request at all
        await fetcher._fetch(leader)  # type: ignore[arg-type]
        _, key, tps, max_wait = leader.requests[-1]
        assert key == ApiKey.FETCH and tps == [("t", 2)] and max_wait == 1

        clock.advance(1)
        answers[("t", 0)] = ErrorCode.NOT_LEADER_OR_FOLLOWER
        answers[("t", 1)] = ErrorCode.NONE
        assert await fetcher._truncate(leader)  # type: ignore[arg-type]
        assert leader.requests[-1][2] == slow
        assert fetcher.partitions[("t", 0)].retry_at_ms == clock.now + 2 * RETRY_INITIAL_MS  # doubled
        assert fetcher.partitions[("t", 1)].due(clock.now) and not fetcher.partitions[("t", 1)].truncating

        clock.advance(2 * RETRY_INITIAL_MS)
        answers[("t", 0)] = ErrorCode.NONE
        assert await fetcher._truncate(leader)  # type: ignore[arg-type]
        assert not fetcher.partitions[("t", 0)].truncating and fetcher.partitions[("t", 0)].retry_delay_ms == 0

    asyncio.run(run())


def test_the_loop_retries_soon_although_the_backoff_is_long(tmp_path: Path) -> None:
    """replica.fetch.backoff.ms 10 s: the partition whose leader was not ready is asked again within moments, and
    the healthy partition is fetched in between (its long poll ends when the retry is due)."""
    async def run() -> None:
        slow, healthy = ("t", 0), ("t", 1)
        answered: list[ErrorCode] = []

        def truncation(tp: tuple[str, int]) -> ErrorCode:
            error = ErrorCode.UNKNOWN_LEADER_EPOCH if not answered else ErrorCode.NONE
            answered.append(error)
            return error

        leader = ScriptedLeader(truncation)
        settings = FetcherSettings(FOLLOWER, backoff_ms=10_000, max_wait_ms=5000)
        fetcher = await _fetcher(leader, settings, [_follower(tmp_path, 0, True), _follower(tmp_path, 1, False)],
                                 run=True)
        try:
            deadline = time.monotonic() + 5
            while len(leader.asked(ApiKey.OFFSET_FOR_LEADER_EPOCH, slow)) < 2:
                assert time.monotonic() < deadline, f"asked once in 5 s: {leader.requests}"
                await asyncio.sleep(0.01)
            first, second = leader.asked(ApiKey.OFFSET_FOR_LEADER_EPOCH, slow)[:2]
            between = [leader.requests[i] for i in range(first + 1, second)]
            assert any(k == ApiKey.FETCH and healthy in tps and wait <= RETRY_INITIAL_MS
                       for _, k, tps, wait in between), leader.requests
        finally:
            await fetcher.stop()

    asyncio.run(run())


@pytest.mark.parametrize(("error", "delay"), [(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, RETRY_INITIAL_MS),
                                              (ErrorCode.NOT_LEADER_OR_FOLLOWER, RETRY_INITIAL_MS),
                                              (ErrorCode.KAFKA_STORAGE_ERROR, 1000)])
def test_only_a_leader_that_is_not_ready_yet_is_asked_again_soon(tmp_path: Path, error: ErrorCode,
                                                                 delay: int) -> None:
    async def run() -> None:
        clock = ManualClock(0)
        leader = ScriptedLeader(lambda tp: error)
        fetcher = await _fetcher(leader, FetcherSettings(FOLLOWER, backoff_ms=1000, clock=clock),
                                 [_follower(tmp_path, 0, True)], run=False)
        assert not await fetcher._truncate(leader)  # type: ignore[arg-type]
        assert fetcher.partitions[("t", 0)].retry_at_ms == delay

    asyncio.run(run())


async def test_the_same_leader_in_the_next_epoch_needs_no_truncation(tmp_path: Path) -> None:
    """An ISR change (the controller took a dead replica out) gives the same leader a new epoch: a replica that
    had truncated for the epoch before is still a prefix of that leader's log and asks no OffsetForLeaderEpoch.
    A skipped epoch (another leader may have led meanwhile) or a replica still truncating asks again."""
    leader = ScriptedLeader(lambda tp: ErrorCode.NONE)
    p = _follower(tmp_path, 0, with_data=True)
    fetcher = await _fetcher(leader, FetcherSettings(FOLLOWER), [p], run=False)
    tp = ("t", 0)
    assert await fetcher._truncate(leader)  # type: ignore[arg-type]
    assert len(leader.asked(ApiKey.OFFSET_FOR_LEADER_EPOCH, tp)) == 1 and not fetcher.partitions[tp].truncating

    p.apply_state(PartitionState(0, LEADER, EPOCH + 1, [LEADER, FOLLOWER], [LEADER]), 0)
    fetcher.add(p)
    assert fetcher.partitions[tp].leader_epoch == EPOCH + 1 and not fetcher.partitions[tp].truncating
    assert not await fetcher._truncate(leader)  # type: ignore[arg-type]
    assert len(leader.asked(ApiKey.OFFSET_FOR_LEADER_EPOCH, tp)) == 1

    p.apply_state(PartitionState(0, LEADER, EPOCH + 3, [LEADER, FOLLOWER], [LEADER, FOLLOWER]), 0)
    fetcher.add(p)  # EPOCH + 2 was never seen here: it may have had another leader
    assert fetcher.partitions[tp].truncating
    p.apply_state(PartitionState(0, LEADER, EPOCH + 4, [LEADER, FOLLOWER], [LEADER, FOLLOWER]), 0)
    fetcher.add(p)  # the next epoch, but the one before was not truncated yet
    assert fetcher.partitions[tp].truncating
    assert await fetcher._truncate(leader)  # type: ignore[arg-type]
    assert len(leader.asked(ApiKey.OFFSET_FOR_LEADER_EPOCH, tp)) == 2

    fetcher.remove(tp)  # another leader in between (the role change removes it from this fetcher) ...
    p.apply_state(PartitionState(0, LEADER, EPOCH + 6, [LEADER, FOLLOWER], [LEADER, FOLLOWER]), 0)
    fetcher.add(p)  # ... and back: truncate
    assert fetcher.partitions[tp].truncating
