"""The assignment of partitions added by CreatePartitions."""

from __future__ import annotations

import pytest

from moldau.broker.partition_plan import plan_new_partitions
from moldau.broker.topics import TopicCreationError
from moldau.protocol.errors import ErrorCode


def test_continues_the_round_robin_after_the_existing_partitions() -> None:
    existing = {0: [1, 2], 1: [2, 3], 2: [3, 1]}
    plan = plan_new_partitions(existing, 6, None, {1: None, 2: None, 3: None})
    assert sorted(plan) == [3, 4, 5]
    # leaders continue from partition 0's first replica: partition p is led by broker (p % 3) + 1
    assert [plan[p][0] for p in (3, 4, 5)] == [1, 2, 3]
    assert all(len(r) == 2 and len(set(r)) == 2 for r in plan.values())


def test_rack_aware_keeps_replicas_on_distinct_racks() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    plan = plan_new_partitions({0: [1, 3]}, 9, None, racks)
    assert sorted(plan) == list(range(1, 9))
    assert all(len({racks[b] for b in r}) == 2 for r in plan.values())


def test_errors() -> None:
    brokers: dict[int, str | None] = {1: None, 2: None}
    with pytest.raises(TopicCreationError) as err:
        plan_new_partitions({0: [1, 2]}, 1, None, brokers)
    assert err.value.code == ErrorCode.INVALID_PARTITIONS
    with pytest.raises(TopicCreationError) as err:
        plan_new_partitions({0: [1, 2]}, 2, [{"broker_ids": [1]}], brokers)
    assert err.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT and "Inconsistent replication factor" in err.value.message
    with pytest.raises(TopicCreationError) as err:
        plan_new_partitions({0: [1, 2, 3]}, 2, None, brokers)
    assert err.value.code == ErrorCode.INVALID_REPLICATION_FACTOR
    assert plan_new_partitions({0: [1, 2]}, 2, [{"broker_ids": [2, 1]}], brokers) == {1: [2, 1]}
