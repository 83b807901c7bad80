"""Server-side partition assignors of the consumer group protocol (KIP-848): ``uniform`` and ``range``.

An assignor maps the members' subscriptions and the subscribed topics' partition counts to a target assignment,
member id -> {topic: partitions}. It is a pure function of its inputs plus the current target (for stickiness);
the coordinator decides when to run it (each new group epoch) and reconciles members towards its result.

- ``uniform`` (Kafka's default, UniformAssignor): every partition of a subscribed topic goes to one of its
  subscribers, the counts of any two members that could swap a partition differ by at most one, and partitions
  stay where they are whenever that balance allows (few revocations per rebalance).
- ``range`` (RangeAssignor): per topic, its subscribers sorted by member id get contiguous ranges of partitions,
  the first ``partitions % members`` one more; members with the same subscriptions get the same partition numbers
  of co-partitioned topics.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

Assignment = dict[str, dict[str, set[int]]]  # member id -> topic -> partitions


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    topics: frozenset[str]
    instance_id: str | None = None
    rack_id: str | None = None


AssignorFn = Callable[[Mapping[str, MemberSubscription], Mapping[str, int], Assignment], Assignment]


def uniform(members: Mapping[str, MemberSubscription], partition_counts: Mapping[str, int],
            current: Assignment) -> Assignment:
    """Balanced and sticky: keep what the current target gives where still valid, hand out the rest to the least
    loaded eligible member, then move partitions from the most to the least loaded until balanced."""
    result: Assignment = {m: {} for m in members}
    count = {m: 0 for m in members}
    owner: dict[tuple[str, int], str] = {}
    subscribers: dict[str, list[str]] = {}
    for m in sorted(members):
        for t in members[m].topics:
            if partition_counts.get(t, 0) > 0:
                subscribers.setdefault(t, []).append(m)
    total = sum(partition_counts[t] for t in subscribers)
    homogeneous = len({s.topics for s in members.values()}) <= 1
    # Homogeneous subscriptions: nobody keeps more than the ceiling of a fair share, so moves are minimal.
    ceiling = -(-total // len(members)) if members and homogeneous else total
    for m in sorted(members):
        for t, parts in sorted(current.get(m, {}).items()):
            if t not in subscribers or m not in subscribers[t]:
                continue
            for p in sorted(parts):
                if p < partition_counts[t] and (t, p) not in owner and count[m] < ceiling:
                    owner[(t, p)] = m
                    result[m].setdefault(t, set()).add(p)
                    count[m] += 1
    for t in sorted(subscribers):
        for p in range(partition_counts[t]):
            if (t, p) in owner:
                continue
            m = min(subscribers[t], key=lambda x: (count[x], x))
            owner[(t, p)] = m
            result[m].setdefault(t, set()).add(p)
            count[m] += 1
    _balance(result, count, owner, subscribers)
    return result


def _balance(result: Assignment, count: dict[str, int], owner: dict[tuple[str, int], str],
             subscribers: dict[str, list[str]]) -> None:
    """Move partitions from members to eligible members holding at least two fewer, most loaded owners first;
    passes repeat (with live counts) until one moves nothing."""
    moved = True
    budget = 4 * (len(owner) + 1) * (len(count) + 1)  # each move lowers the sum of squares: this never binds
    while moved and budget > 0:
        moved = False
        for (t, p), m in sorted(owner.items(), key=lambda item: (-count[item[1]], item[0])):
            if count[m] <= min(count.values()) + 1:
                continue  # this owner holds at most one more than anybody: nothing of it can move
            target = min(subscribers[t], key=lambda x: (count[x], x))
            if count[target] + 1 < count[m]:
                result[m][t].discard(p)
                if not result[m][t]:
                    del result[m][t]
                result[target].setdefault(t, set()).add(p)
                owner[(t, p)] = target
                count[m] -= 1
                count[target] += 1
                moved = True
                budget -= 1


def range_(members: Mapping[str, MemberSubscription], partition_counts: Mapping[str, int],
           current: Assignment) -> Assignment:
    """Per topic, contiguous ranges in member id order (``current`` is not used: ranges are deterministic)."""
    result: Assignment = {m: {} for m in members}
    topics = sorted({t for s in members.values() for t in s.topics if partition_counts.get(t, 0) > 0})
    for t in topics:
        subs = sorted(m for m, s in members.items() if t in s.topics)
        n = partition_counts[t]
        per, extra = divmod(n, len(subs))
        start = 0
        for i, m in enumerate(subs):
            size = per + (1 if i < extra else 0)
            if size:
                result[m][t] = set(range(start, start + size))
            start += size
    return result


ASSIGNORS: dict[str, AssignorFn] = {"uniform": uniform, "range": range_}
# Kafka names its assignors by class in group.consumer.assignors and by short name on the wire.
CLASS_NAMES = {"org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
               "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range"}


def assignor_names(configured: list[str]) -> list[str]:
    """``group.consumer.assignors`` (class or short names) -> short names; the first is the default. Raises
    ValueError for an assignor Moldau does not have."""
    names = []
    for entry in configured:
        name = CLASS_NAMES.get(entry.strip(), entry.strip())
        if name not in ASSIGNORS:
            raise ValueError(f"unknown consumer group assignor {entry!r} (Moldau has {sorted(ASSIGNORS)})")
        names.append(name)
    if not names:
        raise ValueError("group.consumer.assignors must name at least one assignor")
    return names
