"""Replica assignment for new topics, the way Kafka's AdminUtils does it.

Rack-unaware: brokers sorted by id; partition p's leader is broker ``(p + start) % n`` so leaders go round-robin
from a random starting broker; the followers sit at increasing distances from the leader, and that distance
(the "shift", also random at first) grows by one each time the partitions wrap around the broker list, so
followers of consecutive rounds do not always land on the same neighbours.

Rack-aware (every broker has ``broker.rack``): the same walk over a rack-alternating broker list
(rack A's first broker, rack B's first, rack C's first, rack A's second, ...), skipping a candidate while its
rack already holds a replica of the partition and some rack holds none, or while the broker already holds one
and some broker holds none. So a partition's replicas land on distinct racks as long as there are enough racks.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

Assignment = dict[int, list[int]]


class AssignmentError(ValueError):
    pass


def _follower_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def _start_and_shift(n: int, start_index: int, shift: int, rng: random.Random | None) -> tuple[int, int]:
    r = rng or random.Random()
    start = start_index if start_index >= 0 else r.randrange(n)
    first_shift = shift if shift >= 0 else r.randrange(n)
    return start, first_shift


def assign_rack_unaware(brokers: list[int], num_partitions: int, replication_factor: int, *,
                        start_index: int = -1, shift: int = -1, start_partition: int = 0,
                        rng: random.Random | None = None) -> Assignment:
    """Kafka's rack-unaware assignment. ``start_index``/``shift`` of -1 mean "random" (as Kafka does)."""
    ids = sorted(brokers)
    n = len(ids)
    _check(n, num_partitions, replication_factor)
    start, next_shift = _start_and_shift(n, start_index, shift, rng)
    plan: Assignment = {}
    for p in range(max(0, start_partition), max(0, start_partition) + num_partitions):
        if p > 0 and p % n == 0:
            next_shift += 1
        first = (p + start) % n
        replicas = [ids[first]]
        replicas += [ids[_follower_index(first, next_shift, j, n)] for j in range(replication_factor - 1)]
        plan[p] = replicas
    return plan


def rack_alternated(rack_of: Mapping[int, str]) -> list[int]:
    """Brokers ordered so that consecutive entries alternate racks (racks sorted, brokers sorted within one)."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in rack_of.items():
        by_rack.setdefault(rack, []).append(broker)
    racks = sorted(by_rack)
    queues = {rack: sorted(ids) for rack, ids in by_rack.items()}
    result: list[int] = []
    i = 0
    while len(result) < len(rack_of):
        queue = queues[racks[i]]
        if queue:
            result.append(queue.pop(0))
        i = (i + 1) % len(racks)
    return result


def assign_rack_aware(rack_of: Mapping[int, str], num_partitions: int, replication_factor: int, *,
                      start_index: int = -1, shift: int = -1, start_partition: int = 0,
                      rng: random.Random | None = None) -> Assignment:
    """Kafka's rack-aware assignment over ``rack_of`` (broker id -> rack)."""
    arranged = rack_alternated(rack_of)
    n = len(arranged)
    _check(n, num_partitions, replication_factor)
    num_racks = len(set(rack_of.values()))
    start, next_shift = _start_and_shift(n, start_index, shift, rng)
    plan: Assignment = {}
    for p in range(max(0, start_partition), max(0, start_partition) + num_partitions):
        if p > 0 and p % n == 0:
            next_shift += 1
        first = (p + start) % n
        leader = arranged[first]
        replicas = [leader]
        racks_used = {rack_of[leader]}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[_follower_index(first, next_shift * num_racks, k, n)]
                rack = rack_of[broker]
                k += 1
                if (rack not in racks_used or len(racks_used) == num_racks) and \
                        (broker not in replicas or len(replicas) == n):
                    replicas.append(broker)
                    racks_used.add(rack)
                    break
        plan[p] = replicas
    return plan


def assign_replicas(brokers: Mapping[int, str | None], num_partitions: int, replication_factor: int, *,
                    start_index: int = -1, shift: int = -1, start_partition: int = 0,
                    rng: random.Random | None = None) -> Assignment:
    """Rack-aware when every broker has a rack, rack-unaware when none has; a mix is refused (as Kafka does)."""
    with_rack = {b: r for b, r in brokers.items() if r}
    if with_rack and len(with_rack) != len(brokers):
        missing = sorted(b for b, r in brokers.items() if not r)
        raise AssignmentError(f"Not all brokers have rack information for replica rack aware assignment "
                              f"(brokers without broker.rack: {missing})")
    if with_rack:
        return assign_rack_aware(with_rack, num_partitions, replication_factor, start_index=start_index,
                                 shift=shift, start_partition=start_partition, rng=rng)
    return assign_rack_unaware(list(brokers), num_partitions, replication_factor, start_index=start_index,
                               shift=shift, start_partition=start_partition, rng=rng)


def _check(n: int, num_partitions: int, replication_factor: int) -> None:
    if num_partitions <= 0:
        raise AssignmentError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise AssignmentError("Replication factor must be larger than 0.")
    if replication_factor > n:
        raise AssignmentError(f"Replication factor: {replication_factor} larger than available brokers: {n}.")
