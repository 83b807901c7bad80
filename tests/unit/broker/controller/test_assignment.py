"""Replica assignment: Kafka's published vectors, fixed seeds, and the distribution properties."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from moldau.broker.controller.assignment import (
    AssignmentError,
    assign_rack_aware,
    assign_rack_unaware,
    assign_replicas,
    rack_alternated,
)

RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def test_rack_unaware_fixed_start_matches_kafka() -> None:
    # Kafka's AdminUtils test vector: 5 brokers, 10 partitions, RF 3, start index 0, shift 0.
    plan = assign_rack_unaware([0, 1, 2, 3, 4], 10, 3, start_index=0, shift=0)
    assert plan == {0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
                    5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2]}


def test_rack_alternated_list_matches_kafka() -> None:
    assert rack_alternated(RACKS) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated({b: r for b, r in RACKS.items() if b != 5}) == [0, 3, 1, 4, 2]


def test_rack_aware_fixed_start_matches_kafka() -> None:
    plan = assign_rack_aware(RACKS, 7, 3, start_index=0, shift=0)
    assert plan == {0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2], 4: [4, 2, 0], 5: [2, 0, 3],
                    6: [0, 4, 2]}


@pytest.mark.parametrize("seed", range(20))
def test_random_start_is_seeded_and_leaders_are_even(seed: int) -> None:
    brokers = [1, 2, 3]
    a = assign_rack_unaware(brokers, 6, 3, rng=random.Random(seed))
    b = assign_rack_unaware(brokers, 6, 3, rng=random.Random(seed))
    assert a == b
    assert Counter(r[0] for r in a.values()) == {1: 2, 2: 2, 3: 2}
    assert all(sorted(r) == brokers for r in a.values())
    # Leaders go round-robin over the sorted brokers from the starting one.
    leaders = [a[p][0] for p in range(6)]
    start = brokers.index(leaders[0])
    assert leaders == [brokers[(start + p) % 3] for p in range(6)]


@pytest.mark.parametrize("seed", range(20))
def test_rack_aware_puts_replicas_on_distinct_racks(seed: int) -> None:
    racks = {1: "a", 2: "b", 3: "c", 4: "a", 5: "b", 6: "c"}
    plan = assign_rack_aware(racks, 12, 3, rng=random.Random(seed))
    for replicas in plan.values():
        assert len({racks[r] for r in replicas}) == 3
        assert len(set(replicas)) == 3
    assert Counter(r[0] for r in plan.values()) == {b: 2 for b in racks}


def test_more_replicas_than_racks_still_uses_every_rack() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    for replicas in assign_rack_aware(racks, 8, 3, rng=random.Random(7)).values():
        assert {racks[r] for r in replicas} == {"a", "b"}
        assert len(set(replicas)) == 3


def test_followers_shift_between_rounds() -> None:
    plan = assign_rack_unaware([0, 1, 2, 3], 8, 2, start_index=0, shift=0)
    first_round = [plan[p][1] for p in range(4)]
    second_round = [plan[p][1] for p in range(4, 8)]
    assert first_round != second_round


def test_mixed_racks_refused_and_limits() -> None:
    with pytest.raises(AssignmentError, match="rack"):
        assign_replicas({1: "a", 2: None}, 1, 1)
    with pytest.raises(AssignmentError, match="larger than available brokers"):
        assign_replicas({1: None, 2: None}, 1, 3)
    with pytest.raises(AssignmentError):
        assign_replicas({1: None}, 0, 1)
    assert assign_replicas({7: None}, 3, 1) == {0: [7], 1: [7], 2: [7]}
