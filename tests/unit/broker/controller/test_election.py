"""The controller's election rules (pure functions)."""

from __future__ import annotations

from moldau.broker.controller.election import (
    NO_LEADER,
    controlled_shutdown_election,
    imbalanced_partitions,
    offline_partition_election,
    preferred_replica_election,
    shrink_isr,
)


def test_offline_election_takes_next_live_isr_replica_in_replica_order() -> None:
    e = offline_partition_election([1, 2, 3], [3, 2, 1], live={2, 3}, unclean=False)
    assert (e.leader, e.isr) == (2, [3, 2])


def test_offline_election_skips_live_replicas_outside_the_isr() -> None:
    e = offline_partition_election([1, 2, 3], [1, 3], live={2, 3}, unclean=False)
    assert e.leader == 3


def test_no_eligible_replica_goes_offline_and_keeps_the_isr() -> None:
    e = offline_partition_election([1, 2, 3], [1], live={2, 3}, unclean=False)
    assert (e.leader, e.isr, e.elected) == (NO_LEADER, [1], False)


def test_unclean_election_only_when_enabled() -> None:
    e = offline_partition_election([1, 2, 3], [1], live={3}, unclean=True)
    assert (e.leader, e.isr) == (3, [3])
    assert offline_partition_election([1, 2], [1], live=set(), unclean=True).leader == NO_LEADER


def test_controlled_shutdown_moves_leadership_and_drops_the_broker_from_isr() -> None:
    e = controlled_shutdown_election([1, 2, 3], [1, 2, 3], live={1, 2, 3}, shutting_down={1})
    assert (e.leader, e.isr) == (2, [2, 3])
    assert controlled_shutdown_election([1], [1], live={1}, shutting_down={1}).leader == NO_LEADER
    assert controlled_shutdown_election([1, 2], [1], live={1, 2}, shutting_down={1}).leader == NO_LEADER


def test_preferred_election_needs_preferred_alive_and_in_sync() -> None:
    assert preferred_replica_election([1, 2], [2, 1], live={1, 2}).leader == 1
    assert preferred_replica_election([1, 2], [2], live={1, 2}).leader == NO_LEADER
    assert preferred_replica_election([1, 2], [1, 2], live={2}).leader == NO_LEADER
    assert preferred_replica_election([1, 2], [1, 2], live={1, 2}, shutting_down={1}).leader == NO_LEADER


def test_shrink_isr_never_empties() -> None:
    assert shrink_isr([1, 2, 3], {2}) == [1, 3]
    assert shrink_isr([2], {2}) == [2]


def test_imbalance_uses_the_per_broker_percentage() -> None:
    leaders = {("t", 0): ([1, 2], 1), ("t", 1): ([1, 2], 2), ("t", 2): ([2, 1], 2), ("t", 3): ([1, 2], 1)}
    # broker 1 prefers 3 partitions and leads 2 of them: 33% imbalance.
    assert imbalanced_partitions(leaders, live={1, 2}, percentage=10) == [("t", 1)]
    assert imbalanced_partitions(leaders, live={1, 2}, percentage=50) == []
    assert imbalanced_partitions(leaders, live={2}, percentage=10) == []
