"""CreatePartitions validation and the replica assignment of the added partitions (Kafka's AdminZkClient
``createNewPartitionsAssignment``): the existing partitions stay as they are; new ones continue the assignment
walk after them, with partition 0's replication factor, starting at partition 0's first replica."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from moldau.broker.controller.assignment import AssignmentError, assign_replicas
from moldau.broker.topics import TopicCreationError
from moldau.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from moldau.protocol.typed import CreatePartitionsRequestTopicsAssignments


def plan_new_partitions(existing: Mapping[int, list[int]], count: int,
                        assignments: list[CreatePartitionsRequestTopicsAssignments] | None,
                        brokers: Mapping[int, str | None]) -> dict[int, list[int]]:
    """The assignment of partitions ``len(existing)`` .. ``count - 1``; raises TopicCreationError with Kafka's
    error codes and messages. ``brokers``: live broker id -> rack (None without ``broker.rack``)."""
    current = len(existing)
    if count < current:
        raise TopicCreationError(ErrorCode.INVALID_PARTITIONS,
                                 f"Topic currently has {current} partitions, which is higher than the requested "
                                 f"{count}.")
    if count == current:
        raise TopicCreationError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions.")
    adding = count - current
    replication_factor = len(existing.get(0) or next(iter(existing.values()), []))
    if assignments is not None:
        return _explicit(current, adding, replication_factor, assignments, brokers)
    live = sorted(brokers)
    if replication_factor > len(live):
        raise TopicCreationError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                 f"Replication factor: {replication_factor} larger than available brokers: "
                                 f"{len(live)}.")
    first = (existing.get(0) or [live[0]])[0]
    start_index = next((i for i, b in enumerate(live) if b >= first), 0)
    try:
        return assign_replicas(brokers, adding, replication_factor, start_index=start_index,
                               start_partition=current)
    except AssignmentError as exc:
        raise TopicCreationError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, str(exc)) from None


def _explicit(current: int, adding: int, replication_factor: int,
              assignments: list[CreatePartitionsRequestTopicsAssignments],
              brokers: Mapping[int, str | None]) -> dict[int, list[int]]:
    if len(assignments) != adding:
        raise TopicCreationError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Increasing the number of partitions by {adding} but {len(assignments)} "
                                 "assignments provided.")
    plan: dict[int, list[int]] = {}
    for i, a in enumerate(assignments):
        replicas = [int(b) for b in a["broker_ids"]]
        partition = current + i
        if not replicas:
            raise TopicCreationError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"The assigned brokers for partition {partition} are empty.")
        if len(set(replicas)) != len(replicas):
            raise TopicCreationError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"Duplicate brokers not allowed in replica assignment: "
                                     f"{', '.join(map(str, replicas))} for partition id {partition}.")
        unknown = sorted(b for b in replicas if b not in brokers)
        if unknown:
            raise TopicCreationError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.")
        if len(replicas) != replication_factor:
            raise TopicCreationError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"Inconsistent replication factor between partitions, partition 0 has "
                                     f"{replication_factor} while partition {partition} has replication factor "
                                     f"{len(replicas)}.")
        plan[partition] = replicas
    return plan
