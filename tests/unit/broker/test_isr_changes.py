"""The leader's ISR change rules (broker/partition.py): what to propose when a follower catches up or falls behind,
one change in flight at a time, and how the result of the conditional ZooKeeper write is applied. Real Partition
and Log; the write's result is passed in as ZooKeeper would answer it."""

from __future__ import annotations

from pathlib import Path

from moldau.broker.metadata import PartitionState
from moldau.broker.partition import IsrOutcome, Partition
from moldau.protocol.records import build_batch
from moldau.storage.config import LogConfig
from moldau.storage.log import Log

LAG_MS = 3000


def leader(tmp_path: Path, isr: list[int]) -> Partition:
    p = Partition("t", 0, 1, Log(tmp_path / "t-0", LogConfig()))
    p.apply_state(PartitionState(0, 1, 5, [1, 2, 3], isr, zk_version=7), 0)
    p.append_as_leader(build_batch([(None, b"v", [], 1000)] * 4))
    return p


def test_a_caught_up_follower_is_proposed_in_replica_order(tmp_path: Path) -> None:
    p = leader(tmp_path, [1, 2])
    p.update_follower(2, 4, 10)
    assert p.isr_with(3) is None  # 3 has not fetched: not eligible
    assert p.isr_with(2) is None  # already in
    p.update_follower(3, 4, 20)
    assert p.isr_with(3) == [1, 2, 3]


def test_a_follower_is_not_proposed_by_a_partition_that_does_not_lead(tmp_path: Path) -> None:
    p = Partition("t", 0, 1, Log(tmp_path / "t-0", LogConfig()))
    p.apply_state(PartitionState(0, 2, 5, [1, 2, 3], [2, 3], zk_version=7), 0)
    assert p.isr_with(1) is None
    assert p.isr_without_lagging(10 * LAG_MS, LAG_MS) is None


def test_lagging_followers_are_proposed_out_and_only_one_change_is_in_flight(tmp_path: Path) -> None:
    p = leader(tmp_path, [1, 2, 3])
    p.update_follower(2, 4, LAG_MS)
    assert p.isr_without_lagging(LAG_MS + 1, LAG_MS) == ([3], [1, 2])
    assert p.begin_isr_change([1, 2])
    assert p.pending_isr == [1, 2] and p.isr == [1, 2, 3]  # the ISR is what ZooKeeper holds until it answers
    assert not p.begin_isr_change([1])  # one change at a time
    assert p.isr_without_lagging(2 * LAG_MS + 2, LAG_MS) is None
    assert not leader(tmp_path / "b", [1, 2]).begin_isr_change([1, 2])  # nothing to change


def test_an_accepted_write_is_applied(tmp_path: Path) -> None:
    p = leader(tmp_path, [1, 2, 3])
    new = [1, 2]
    assert p.begin_isr_change(new)
    assert p.finish_isr_change(new, p.leader_epoch, (8, [1, 2])) is IsrOutcome.APPLIED
    assert (p.isr, p.zk_version, p.pending_isr) == ([1, 2], 8, None)


def test_a_lost_conditional_write_waits_for_the_controller(tmp_path: Path) -> None:
    p = leader(tmp_path, [1, 2, 3])
    new = [1, 2]
    p.begin_isr_change(new)
    assert p.finish_isr_change(new, p.leader_epoch, None) is IsrOutcome.CONFLICT
    assert (p.isr, p.zk_version, p.pending_isr) == ([1, 2, 3], 7, None)


def test_zookeeper_holding_another_isr_is_built_on(tmp_path: Path) -> None:
    p = leader(tmp_path, [1, 2])
    p.update_follower(2, 4, 10)
    p.update_follower(3, 4, 10)
    assert p.high_watermark == 4
    new = [1, 2, 3]
    p.begin_isr_change(new)
    assert p.finish_isr_change(new, p.leader_epoch, (9, [1, 3])) is IsrOutcome.DIVERGED
    assert (p.isr, p.zk_version, p.pending_isr) == ([1, 3], 9, None)


def test_a_leader_and_isr_that_came_in_meanwhile_has_the_final_word(tmp_path: Path) -> None:
    p = leader(tmp_path, [1, 2, 3])
    new = [1, 2]
    epoch = p.leader_epoch
    p.begin_isr_change(new)
    p.apply_state(PartitionState(0, 1, 6, [1, 2, 3], [1, 3], zk_version=9), 50)  # the controller's new epoch
    assert p.finish_isr_change(new, epoch, (8, [1, 2])) is IsrOutcome.SUPERSEDED
    assert (p.isr, p.zk_version, p.leader_epoch) == ([1, 3], 9, 6)
