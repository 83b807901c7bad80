"""The state of one consumer group of KIP-848's protocol: members, epochs, target assignment, reconciliation.

Kafka's model, without I/O or timers (``consumer_membership.py`` drives it):

- The **group epoch** moves on every change that may change the assignment: a member joins, leaves, changes its
  subscription or assignor, or a subscribed topic changes its partition count. The **target assignment** is the
  assignor's answer for the latest group epoch; its epoch is the **assignment epoch**.
- Each member moves on its own towards its target (**reconciliation**), at its own **member epoch**. A partition is
  handed to its new owner only once the previous owner has revoked it: a member first loses the partitions it
  must give up (state UNREVOKED_PARTITIONS, member epoch unchanged) and reaches the new epoch only when its
  heartbeat says it no longer owns them; partitions still held by another member wait (UNRELEASED_PARTITIONS)
  until they are released.
- Group states (as DescribeGroups/ListGroups show them): Empty, Assigning (group epoch ahead of the target's; not
  observable here, the target is computed at once), Reconciling (some member is not at the assignment epoch or
  still waits), Stable, Dead.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from moldau.broker.coordinator.assignors import ASSIGNORS, Assignment, MemberSubscription

TopicPartitions = dict[str, set[int]]


class MemberState(enum.Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


@dataclass(slots=True, eq=False)
class ConsumerMember:
    member_id: str
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    subscribed_topic_names: list[str]
    instance_id: str | None = None
    rack_id: str | None = None
    server_assignor: str | None = None
    # What the member asked for: topic names and/or a regex (subscribed_topic_names is their resolution).
    topic_names: list[str] = field(default_factory=list)
    topic_regex: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: TopicPartitions = field(default_factory=dict)
    pending_revocation: TopicPartitions = field(default_factory=dict)
    session: Any = None  # TimerHandle of the session timeout
    revocation: Any = None  # TimerHandle of the rebalance timeout while partitions are unrevoked

    def subscription(self) -> MemberSubscription:
        return MemberSubscription(frozenset(self.subscribed_topic_names), self.instance_id, self.rack_id)


def _copy(tps: TopicPartitions) -> TopicPartitions:
    return {t: set(ps) for t, ps in tps.items() if ps}


def subset(owned: TopicPartitions, of: TopicPartitions) -> bool:
    return all(ps <= of.get(t, set()) for t, ps in owned.items())


def overlaps(a: TopicPartitions, b: TopicPartitions) -> bool:
    return any(ps & b.get(t, set()) for t, ps in a.items())


@dataclass(slots=True, eq=False)
class ConsumerGroup:
    group_id: str
    default_assignor: str = "uniform"
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: Assignment = field(default_factory=dict)
    # Who holds each partition now (assigned or still revoking): the new owner waits until it is released.
    owners: dict[tuple[str, int], str] = field(default_factory=dict)
    # The partition counts of the subscribed topics the target was computed with.
    partition_counts: dict[str, int] = field(default_factory=dict)
    assignor_name: str = ""
    # What __consumer_offsets holds for this group, key -> value (consumer_records.py writes the differences).
    persisted: dict[bytes, bytes] = field(default_factory=dict)
    changed_targets: set[str] = field(default_factory=set)  # members whose target is not written yet
    _subscribed: frozenset[str] | None = None

    # ----------------------------------------------------------------------------------------- queries
    def state(self) -> str:
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        if any(m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
               for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def subscribed_topics(self) -> frozenset[str]:
        """Every member's topics (cached: a heartbeat asks for them; membership and subscription changes drop it)."""
        if self._subscribed is None:
            self._subscribed = frozenset(t for m in self.members.values() for t in m.subscribed_topic_names)
        return self._subscribed

    def subscriptions_changed(self) -> None:
        self._subscribed = None

    def chosen_assignor(self) -> str:
        """The assignor most members ask for (ties: the default), as Kafka picks it."""
        votes: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        if not votes:
            return self.default_assignor
        best = max(votes.values())
        return self.default_assignor if votes.get(self.default_assignor) == best else \
            min(name for name, v in votes.items() if v == best)

    # ----------------------------------------------------------------------------------------- membership
    def add(self, member: ConsumerMember) -> None:
        self._subscribed = None
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def remove(self, member_id: str) -> ConsumerMember | None:
        """Drop a member and release every partition it held (it is gone: nothing to wait for)."""
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self._subscribed = None
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        self._release(member, member.assigned)
        self._release(member, member.pending_revocation)
        member.assigned, member.pending_revocation = {}, {}
        self.target.pop(member_id, None)
        return member

    def replace_static(self, old: ConsumerMember, new_id: str) -> ConsumerMember:
        """A static member that left with epoch -2 comes back under a new member id: the new id takes its place,
        subscription, epoch and partitions as they are, without a new group epoch (no rebalance)."""
        self.members.pop(old.member_id)
        target = self.target.pop(old.member_id, {})
        old.member_id = new_id
        old.member_epoch = old.previous_member_epoch
        self.members[new_id] = old
        self.target[new_id] = target
        if old.instance_id is not None:
            self.static_members[old.instance_id] = new_id
        for key, holder in self.owners.items():
            if holder != new_id and (key[1] in old.assigned.get(key[0], ()) or
                                     key[1] in old.pending_revocation.get(key[0], ())):
                self.owners[key] = new_id
        return old

    def _release(self, member: ConsumerMember, tps: TopicPartitions) -> None:
        for t, ps in tps.items():
            for p in ps:
                if self.owners.get((t, p)) == member.member_id:
                    del self.owners[(t, p)]

    def reset_member(self, member: ConsumerMember) -> None:
        """The member rejoins with epoch 0 (it lost its partitions): start its reconciliation from nothing."""
        self._release(member, member.assigned)
        self._release(member, member.pending_revocation)
        member.assigned, member.pending_revocation = {}, {}
        member.state = MemberState.STABLE
        member.previous_member_epoch, member.member_epoch = member.member_epoch, 0

    # ----------------------------------------------------------------------------------------- target
    def bump_and_assign(self, partition_counts: dict[str, int]) -> None:
        """A new group epoch and its target assignment (computed at once, so Assigning is never seen)."""
        self.group_epoch += 1
        self.partition_counts = dict(partition_counts)
        name = self.chosen_assignor()
        self.assignor_name = name
        subscriptions = {mid: m.subscription() for mid, m in self.members.items()}
        before = self.target
        self.target = ASSIGNORS[name](subscriptions, partition_counts, self.target)
        self.assignment_epoch = self.group_epoch
        self.changed_targets |= {mid for mid, tps in self.target.items() if before.get(mid) != tps}

    # ----------------------------------------------------------------------------------------- reconciliation
    def reconcile(self, member: ConsumerMember, owned: TopicPartitions | None) -> bool:
        """Move the member towards its target; ``owned`` is what its heartbeat says it owns (None: unchanged).
        Returns True when its assigned partitions changed (its heartbeat answer then carries them)."""
        before = _copy(member.assigned)
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if owned is None or overlaps(owned, member.pending_revocation):
                return False  # still owns partitions it must give up
            self._release(member, member.pending_revocation)
            member.pending_revocation = {}
            member.state = MemberState.STABLE
            self._advance(member)
        elif member.member_epoch != self.assignment_epoch:
            self._advance(member)
        elif member.state is MemberState.UNRELEASED_PARTITIONS:
            self._acquire(member)
        return _copy(member.assigned) != before

    def _advance(self, member: ConsumerMember) -> None:
        target = self.target.get(member.member_id, {})
        kept = {t: ps & target.get(t, set()) for t, ps in member.assigned.items()}
        revoking = {t: ps - target.get(t, set()) for t, ps in member.assigned.items()}
        kept, revoking = _copy(kept), _copy(revoking)
        if revoking:
            member.assigned = kept
            member.pending_revocation = revoking
            member.state = MemberState.UNREVOKED_PARTITIONS
            return
        member.previous_member_epoch, member.member_epoch = member.member_epoch, self.assignment_epoch
        member.assigned = kept
        self._acquire(member)

    def _acquire(self, member: ConsumerMember) -> None:
        """Take the target's partitions nobody else holds any more; the rest stay unreleased."""
        target = self.target.get(member.member_id, {})
        waiting = False
        for t, ps in target.items():
            for p in ps:
                holder = self.owners.get((t, p))
                if holder is None or holder == member.member_id or holder not in self.members:
                    self.owners[(t, p)] = member.member_id
                    member.assigned.setdefault(t, set()).add(p)
                else:
                    waiting = True
        member.state = MemberState.UNRELEASED_PARTITIONS if waiting else MemberState.STABLE
