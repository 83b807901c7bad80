"""The controller's leader-election rules as pure functions (Kafka's PartitionLeaderElectionAlgorithms).

Every rule walks the replica list in order (the assignment order, so the preferred replica comes first) and
returns ``(leader, isr)``; leader -1 means no eligible replica (the partition goes offline).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from moldau.protocol.types import TopicPartition

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class Election:
    leader: int
    isr: list[int]

    @property
    def elected(self) -> bool:
        return self.leader != NO_LEADER


def offline_partition_election(replicas: list[int], isr: list[int], live: Collection[int],
                               unclean: bool) -> Election:
    """After the leader died (or for a new/offline partition): the first live replica that is in the ISR; with
    unclean election allowed, else the first live replica at all (its ISR becomes just itself)."""
    for r in replicas:
        if r in live and r in isr:
            return Election(r, [i for i in isr if i in live])
    if unclean:
        for r in replicas:
            if r in live:
                return Election(r, [r])
    # Offline: keep the ISR as it was, so the last in-sync replica can lead again when it comes back.
    return Election(NO_LEADER, list(isr))


def controlled_shutdown_election(replicas: list[int], isr: list[int], live: Collection[int],
                                 shutting_down: Collection[int]) -> Election:
    """Move leadership off brokers that are shutting down: the first live ISR replica not shutting down."""
    new_isr = [r for r in isr if r not in shutting_down]
    for r in replicas:
        if r in live and r in new_isr:
            return Election(r, new_isr)
    return Election(NO_LEADER, list(isr))


def preferred_replica_election(replicas: list[int], isr: list[int], live: Collection[int],
                               shutting_down: Collection[int] = ()) -> Election:
    """The preferred (first) replica, if it is alive, in sync and not shutting down."""
    preferred = replicas[0] if replicas else NO_LEADER
    if preferred in live and preferred in isr and preferred not in shutting_down:
        return Election(preferred, list(isr))
    return Election(NO_LEADER, list(isr))


def shrink_isr(isr: list[int], gone: Collection[int]) -> list[int]:
    """ISR without the given replicas, but never empty (Kafka keeps the last member as a marker)."""
    remaining = [r for r in isr if r not in gone]
    return remaining or list(isr[:1])


def imbalanced_partitions(leaders: Mapping[TopicPartition, tuple[list[int], int]], live: Collection[int],
                          percentage: int) -> list[TopicPartition]:
    """Partitions to hand back to their preferred leader: for each live broker whose share of partitions it
    prefers but does not lead exceeds ``leader.imbalance.per.broker.percentage``, all such partitions.
    ``leaders`` maps a partition to (replicas, current leader)."""
    preferred_of: dict[int, list[TopicPartition]] = {}
    for tp, (replicas, _) in leaders.items():
        if replicas:
            preferred_of.setdefault(replicas[0], []).append(tp)
    out: list[TopicPartition] = []
    for broker, tps in sorted(preferred_of.items()):
        if broker not in live:
            continue
        not_led = [tp for tp in tps if leaders[tp][1] != broker]
        if tps and len(not_led) * 100 > percentage * len(tps):
            out.extend(sorted(not_led))
    return out


def partitions_led_by(states: Mapping[TopicPartition, int], broker: int) -> list[TopicPartition]:
    return sorted(tp for tp, leader in states.items() if leader == broker)


def brokers_to_notify(replica_sets: Iterable[list[int]], live: Collection[int]) -> set[int]:
    return {r for replicas in replica_sets for r in replicas if r in live}
