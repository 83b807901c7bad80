"""Replication logic without processes: follower tracking, ISR decisions with a hand-moved clock, the high
watermark, and the divergence point of a follower's log (KIP-101/279)."""

from __future__ import annotations

from pathlib import Path

from moldau.broker.metadata import PartitionState
from moldau.broker.partition import Partition
from moldau.broker.replica_fetcher import divergence_offset
from moldau.protocol.records import build_batch
from moldau.storage.config import LogConfig, ManualClock
from moldau.storage.log import Log

LAG_MS = 3000


def records(n: int) -> bytes:
    return build_batch([(None, f"v{i}".encode(), [], 1000) for i in range(n)])


def leader(tmp_path: Path, isr: list[int] | None = None, now: int = 0) -> Partition:
    p = Partition("t", 0, 1, Log(tmp_path / "t-0", LogConfig()))
    p.apply_state(PartitionState(0, 1, 5, [1, 2, 3], isr if isr is not None else [1, 2, 3], zk_version=7), now)
    return p


def test_high_watermark_is_the_smallest_log_end_offset_of_the_isr(tmp_path: Path) -> None:
    p = leader(tmp_path)
    p.append_as_leader(records(10))
    assert p.log.log_end_offset == 10 and p.high_watermark == 0  # followers have not fetched yet
    assert not p.update_follower(2, 10, 100)
    assert p.high_watermark == 0  # replica 3 still unknown
    assert p.update_follower(3, 4, 100)
    assert p.high_watermark == 4
    assert p.update_follower(3, 10, 200)
    assert p.high_watermark == 10
    # A replica outside the ISR does not hold the HW back.
    p2 = leader(tmp_path / "b", isr=[1, 2])
    p2.append_as_leader(records(5))
    p2.update_follower(2, 5, 10)
    assert p2.high_watermark == 5


def test_a_new_leader_reports_offsets_only_once_its_high_watermark_reaches_its_epoch_start(tmp_path: Path) -> None:
    p = Partition("t", 0, 1, Log(tmp_path / "t-0", LogConfig()))
    p.apply_state(PartitionState(0, 2, 5, [1, 2, 3], [1, 2, 3], zk_version=7), 0)  # a follower of broker 2
    p.log.append_as_follower(records(10))
    p.update_follower_high_watermark(6)  # the last HW it heard from its leader
    assert not p.offsets_settling  # followers never answer ListOffsets for clients anyway
    p.apply_state(PartitionState(0, 1, 6, [1, 2, 3], [1, 3], zk_version=8), 100)  # broker 2 died: leads now
    assert p.leader_epoch_start_offset == 10 and p.high_watermark == 6
    assert p.offsets_settling  # 6 could be below a latest offset broker 2 had already reported
    p.update_follower(3, 8, 200)
    assert p.offsets_settling and p.high_watermark == 8
    p.update_follower(3, 10, 300)
    assert not p.offsets_settling and p.high_watermark == 10


def test_high_watermark_never_moves_back_and_respects_a_pending_isr(tmp_path: Path) -> None:
    p = leader(tmp_path)
    p.append_as_leader(records(10))
    p.update_follower(2, 10, 1)
    p.update_follower(3, 10, 1)
    assert p.high_watermark == 10
    p.append_as_leader(records(5))
    p.update_follower(2, 15, 2)
    # Replica 3 is being removed, but until ZooKeeper accepted it the HW still waits for it.
    p.pending_isr = [1, 2]
    assert not p.maybe_advance_high_watermark() and p.high_watermark == 10
    p.isr, p.pending_isr = [1, 2], None
    assert p.maybe_advance_high_watermark() and p.high_watermark == 15
    # An expansion being written counts the newcomer already.
    p.pending_isr = [1, 2, 3]
    p.append_as_leader(records(1))
    p.update_follower(2, 16, 3)
    assert p.high_watermark == 15


def test_a_follower_that_stops_fetching_or_falls_behind_leaves_the_isr(tmp_path: Path) -> None:
    p = leader(tmp_path, now=0)
    assert p.out_of_sync_replicas(LAG_MS, LAG_MS) == []
    p.append_as_leader(records(3))
    # Replica 2 fetches regularly and catches up; replica 3 fetches but stays behind.
    for t in range(500, 6001, 500):
        p.update_follower(2, p.log.log_end_offset, t)
        p.update_follower(3, 1, t)
    assert p.out_of_sync_replicas(6000, LAG_MS) == [3]
    # Replica 2 stops fetching: out once the lag time has passed since its last fetch, even though it was caught up.
    assert p.out_of_sync_replicas(6000 + LAG_MS, LAG_MS) == [3]
    assert p.out_of_sync_replicas(6001 + LAG_MS, LAG_MS) == [2, 3]


def test_a_follower_keeping_pace_with_a_steady_stream_stays_in_sync(tmp_path: Path) -> None:
    p = leader(tmp_path, now=0)
    t = 0
    for _ in range(20):
        t += 500
        # Each fetch asks for what the leader had at the previous fetch, while new records keep arriving.
        p.update_follower(2, p.log.log_end_offset, t)
        p.update_follower(3, p.log.log_end_offset, t)
        p.append_as_leader(records(2))
    assert p.out_of_sync_replicas(t + 100, LAG_MS) == []


def test_a_follower_rejoins_once_it_has_the_high_watermark_and_the_epoch_start(tmp_path: Path) -> None:
    p = Partition("t", 0, 1, Log(tmp_path / "t-0", LogConfig()))
    p.log.append_as_leader(records(4), 4)  # written under an older epoch
    p.apply_state(PartitionState(0, 1, 5, [1, 2, 3], [1, 2], zk_version=3), 0)
    assert p.leader_epoch_start_offset == 4 and p.log.latest_epoch == 5
    p.append_as_leader(records(6))
    p.update_follower(2, 10, 10)
    assert p.high_watermark == 10
    p.update_follower(3, 3, 10)
    assert p.replicas_to_add() == []
    p.update_follower(3, 9, 20)
    assert p.replicas_to_add() == []
    p.update_follower(3, 10, 30)
    assert p.replicas_to_add() == [3]


def test_a_new_leader_epoch_resets_follower_tracking(tmp_path: Path) -> None:
    p = leader(tmp_path)
    p.append_as_leader(records(2))
    p.update_follower(2, 2, 1)
    assert p.follower_leo[2] == 2
    assert not p.apply_state(PartitionState(0, 1, 5, [1, 2, 3], [1, 2], zk_version=8), 2)  # same epoch
    assert p.follower_leo[2] == 2 and p.zk_version == 8
    assert p.apply_state(PartitionState(0, 1, 6, [1, 2, 3], [1, 2], zk_version=9), 3)
    assert p.follower_leo == {2: -1, 3: -1}
    p.apply_state(PartitionState(0, 2, 7, [1, 2, 3], [1, 2], zk_version=10), 4)
    assert not p.is_leader and p.followers == {}


def epochs(entries: list[tuple[int, int]], leo: int):  # type: ignore[no-untyped-def]
    """A follower's end_offset_for_epoch over (epoch, start offset) entries (Kafka's rules)."""

    def end_for(epoch: int) -> tuple[int, int]:
        if entries and epoch == entries[-1][0]:
            return epoch, leo
        higher = [o for e, o in entries if e > epoch]
        if not higher:
            return -1, -1
        floor = [e for e, _ in entries if e <= epoch]
        return (floor[-1] if floor else epoch), higher[0]

    return end_for


def test_divergence_point_of_an_old_leader_with_an_unreplicated_tail() -> None:
    # The old leader wrote 100..104 in epoch 5 that nobody copied; the new leader (epoch 6) started at 100.
    follower = epochs([(3, 0), (5, 60)], 105)
    assert divergence_offset(5, 100, follower, 105, 90) == (100, True)
    # The leader never saw epoch 5: it answers with epoch 3 ending at 60; the follower drops its epoch-5 part and
    # asks again.
    assert divergence_offset(3, 60, follower, 105, 50) == (60, True)
    follower2 = epochs([(2, 0), (5, 60)], 105)
    assert divergence_offset(3, 70, follower2, 105, 10) == (60, False)


def test_divergence_point_falls_back_to_the_high_watermark_and_never_goes_below_it() -> None:
    follower = epochs([(5, 0)], 50)
    assert divergence_offset(-1, -1, follower, 50, 42) == (42, True)
    assert divergence_offset(5, 80, follower, 50, 42) == (50, True)  # nothing to cut: the leader has more
    assert divergence_offset(5, 30, follower, 50, 42) == (42, True)  # committed data stays


def test_high_watermarks_survive_a_restart_through_the_checkpoint(tmp_path: Path) -> None:
    from moldau.broker.replica_manager import ReplicaManager
    from moldau.storage.log_manager import LogManager

    clock = ManualClock(1_000)

    def manager() -> tuple[LogManager, ReplicaManager]:
        lm = LogManager([tmp_path], LogConfig(), clock)
        lm.load()
        hws = lm.read_high_watermarks()
        return lm, ReplicaManager(1, lm, lambda _: LogConfig(), clock=clock, high_watermarks=hws)

    lm, rm = manager()
    state = PartitionState(0, 1, 3, [1, 2], [1, 2], zk_version=1)
    assert rm.become_leader_or_follower("t", state, {}) == 0
    assert rm.append("t", 0, records(6), acks=1).error == 0
    rm.update_follower("t", 0, 2, 4)
    assert rm.get_partition("t", 0).high_watermark == 4  # type: ignore[union-attr]
    rm.checkpoint_high_watermarks()
    lm.shutdown()

    lm, rm = manager()
    # Back as a follower: the HW it knew is where it starts (never below what the ISR committed).
    rm.become_leader_or_follower("t", PartitionState(0, 2, 4, [1, 2], [1, 2], zk_version=2), {})
    p = rm.get_partition("t", 0)
    assert p is not None and p.high_watermark == 4 and p.log.log_end_offset == 6
    lm.shutdown()


def test_acks_all_waits_for_the_high_watermark(tmp_path: Path) -> None:
    import asyncio

    from moldau.broker.apis.context import ReplicaDeps
    from moldau.broker.apis.produce import handle_produce
    from moldau.broker.purgatory import ManualTimer, Purgatory
    from moldau.broker.replica_manager import ReplicaManager
    from moldau.storage.log_manager import LogManager

    lm = LogManager([tmp_path], LogConfig(), ManualClock(1_000))
    lm.load()
    rm = ReplicaManager(1, lm, lambda _: LogConfig(), clock=ManualClock(1_000))
    rm.become_leader_or_follower("t", PartitionState(0, 1, 0, [1, 2, 3], [1, 2, 3], zk_version=0),
                                 {"min.insync.replicas": "2"})
    timer = ManualTimer()
    deps = ReplicaDeps(rm, produce_purgatory=Purgatory("Produce", timer), fetch_purgatory=Purgatory("Fetch", timer))
    rm.hw_listeners.append(deps.produce_purgatory.check_and_complete)

    def body(n: int, timeout_ms: int = 1000) -> dict[str, object]:
        return {"acks": -1, "timeout_ms": timeout_ms,
                "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records(n)}]}]}

    async def scenario() -> None:
        fut = handle_produce(deps, None, body(3))  # type: ignore[arg-type]
        assert isinstance(fut, asyncio.Future) and not fut.done()
        rm.update_follower("t", 0, 2, 3)
        assert not fut.done()  # replica 3 is in the ISR and has nothing yet
        rm.update_follower("t", 0, 3, 3)
        answer = (await fut)["responses"][0]["partition_responses"][0]
        assert answer["error_code"] == 0 and answer["base_offset"] == 0
        # Nobody copies the next one: REQUEST_TIMED_OUT when the timeout passes.
        fut = handle_produce(deps, None, body(1, timeout_ms=500))  # type: ignore[arg-type]
        timer.advance(499)
        assert not fut.done()
        timer.advance(1)
        answer = (await fut)["responses"][0]["partition_responses"][0]
        assert answer["error_code"] == 7  # REQUEST_TIMED_OUT
        # The ISR shrinks to the leader while a produce waits: the HW passes it, but below min.insync.replicas.
        fut = handle_produce(deps, None, body(1))  # type: ignore[arg-type]
        rm.become_leader_or_follower("t", PartitionState(0, 1, 0, [1, 2, 3], [1], zk_version=1),
                                     {"min.insync.replicas": "2"})
        answer = (await fut)["responses"][0]["partition_responses"][0]
        assert answer["error_code"] == 20  # NOT_ENOUGH_REPLICAS_AFTER_APPEND
        answer = handle_produce(deps, None, body(1))["responses"][0]["partition_responses"][0]  # type: ignore[arg-type,index]
        assert answer["error_code"] == 19  # NOT_ENOUGH_REPLICAS, before the append

    asyncio.run(scenario())
    lm.shutdown()


def test_internal_writers_wait_for_the_high_watermark(tmp_path: Path) -> None:
    """wait_for_high_watermark (the coordinators' acks=all writes and transaction markers): NONE once the HW
    passes the offset, on the next loop turn; REQUEST_TIMED_OUT after the time-out; NOT_LEADER_OR_FOLLOWER when
    leadership moves; no waiter left behind."""
    import asyncio

    from moldau.broker.replica_manager import ReplicaManager
    from moldau.protocol.errors import ErrorCode
    from moldau.storage.log_manager import LogManager

    lm = LogManager([tmp_path], LogConfig(), ManualClock(1_000))
    lm.load()
    rm = ReplicaManager(1, lm, lambda _: LogConfig(), clock=ManualClock(1_000))
    rm.become_leader_or_follower("t", PartitionState(0, 1, 0, [1, 2], [1, 2], zk_version=0), {})

    async def scenario() -> None:
        end = rm.append("t", 0, records(3), -1).last_offset + 1
        waiting = asyncio.ensure_future(rm.wait_for_high_watermark("t", 0, end, 10_000))
        await asyncio.sleep(0)
        assert not waiting.done()
        rm.update_follower("t", 0, 2, end)
        await asyncio.sleep(0)  # one turn: the waiter's future is done, the task resumes
        await asyncio.sleep(0)
        assert waiting.done() and waiting.result() == ErrorCode.NONE
        assert await rm.wait_for_high_watermark("t", 0, end, 10_000) == ErrorCode.NONE  # already there
        end = rm.append("t", 0, records(1), -1).last_offset + 1
        assert await rm.wait_for_high_watermark("t", 0, end, 20) == ErrorCode.REQUEST_TIMED_OUT
        moved = asyncio.ensure_future(rm.wait_for_high_watermark("t", 0, end, 10_000))
        await asyncio.sleep(0)
        rm.become_leader_or_follower("t", PartitionState(0, 2, 1, [1, 2], [1, 2], zk_version=1), {})
        assert await moved == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert not rm._hw_waiters

    asyncio.run(scenario())
    lm.shutdown()


def test_a_fetch_from_another_leader_epoch_neither_counts_nor_brings_its_follower_back(tmp_path: Path) -> None:
    """A broker that did a controlled shutdown is taken out of the ISR with a new leader epoch; a fetch it sent
    before it heard of that epoch (the controller's LeaderAndIsr to it fails: it is going) must not put it back
    (a run of tests/integration/test_cluster.py saw the leader re-add it 0.3 s after it left)."""
    import asyncio

    from moldau.broker.replica_manager import ReplicaManager
    from moldau.storage.log_manager import LogManager

    clock = ManualClock(1_000)
    lm = LogManager([tmp_path], LogConfig(), clock)
    lm.load()
    rm = ReplicaManager(1, lm, lambda _: LogConfig(), clock=clock)
    written: list[list[int]] = []

    async def write(partition: Partition, isr: list[int]) -> tuple[int, list[int]]:
        written.append(isr)  # as ZooKeeper would answer a conditional write that succeeds
        return partition.zk_version + 1, isr

    rm.isr_writer = write

    async def scenario() -> None:
        rm.become_leader_or_follower("t", PartitionState(0, 1, 0, [1, 2, 3], [1, 2, 3], zk_version=0), {})
        rm.become_leader_or_follower("t", PartitionState(0, 1, 1, [1, 2, 3], [1, 2], zk_version=1), {})
        p = rm.get_partition("t", 0)
        assert p is not None and p.leader_epoch == 1
        rm.update_follower("t", 0, 3, 0, current_leader_epoch=0)  # broker 3's last fetch, from epoch 0
        await asyncio.sleep(0)
        assert written == [] and p.isr == [1, 2] and p.follower_leo[3] == -1
        rm.update_follower("t", 0, 3, 0, current_leader_epoch=2)  # an epoch this leader does not know yet
        await asyncio.sleep(0)
        assert written == [] and p.follower_leo[3] == -1
        # A fetch of this epoch counts, and one without an epoch (Fetch before v9) too.
        rm.update_follower("t", 0, 3, 0, current_leader_epoch=1)
        for _ in range(3):
            await asyncio.sleep(0)
        assert written == [[1, 2, 3]] and p.isr == [1, 2, 3]
        rm.update_follower("t", 0, 2, 0)
        assert p.follower_leo[2] == 0

    asyncio.run(scenario())
    lm.shutdown()


async def test_the_periodic_high_watermark_checkpoint_writes_only_what_changed(tmp_path: Path) -> None:
    """replica.high.watermark.checkpoint.interval.ms: written on a worker thread, and not at all when no high
    watermark moved since the last one (10,000 partitions made it a pause of the event loop every 5 s)."""
    from moldau.broker.replica_manager import ReplicaManager
    from moldau.storage.log_manager import LogManager

    lm = LogManager([tmp_path], LogConfig(), ManualClock(1_000))
    lm.load()
    rm = ReplicaManager(1, lm, lambda _: LogConfig(), clock=ManualClock(1_000))
    rm.become_leader_or_follower("t", PartitionState(0, 1, 3, [1, 2], [1, 2], zk_version=1), {})
    rm.append("t", 0, records(6), acks=1)
    rm.update_follower("t", 0, 2, 4)
    checkpoint = tmp_path / "replication-offset-checkpoint"
    await rm.checkpoint_high_watermarks_in_background()
    assert lm.read_high_watermarks() == {("t", 0): 4}
    checkpoint.unlink()
    await rm.checkpoint_high_watermarks_in_background()  # nothing moved: no write
    assert not checkpoint.exists()
    rm.update_follower("t", 0, 2, 6)
    await rm.checkpoint_high_watermarks_in_background()
    assert lm.read_high_watermarks() == {("t", 0): 6}
    lm.shutdown()
