"""The state of one classic consumer group: members, generation, chosen protocol, committed offsets.

Kafka's group state machine::

    Empty --join--> PreparingRebalance --all joined / rebalance timeout--> CompletingRebalance
    CompletingRebalance --leader's SyncGroup stored--> Stable
    Stable / CompletingRebalance --join, leave, member expiry--> PreparingRebalance
    PreparingRebalance --every member gone--> Empty (new generation without members)
    any --group deleted / partition emigrated--> Dead

This module holds the data and the transitions only; the protocol logic (who may do what when, timers, storage)
lives in ``coordinator.py``. Nothing here does I/O.
"""

from __future__ import annotations

import enum
import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from moldau.broker.coordinator.consumer_group import ConsumerGroup
from moldau.protocol.types import TopicPartition

log = logging.getLogger("moldau.coordinator.group")


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.STABLE, GroupState.COMPLETING_REBALANCE,
                                               GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset({GroupState.STABLE, GroupState.PREPARING_REBALANCE,
                                GroupState.COMPLETING_REBALANCE, GroupState.EMPTY, GroupState.DEAD}),
}

# Join and sync answers are delivered through callbacks (they complete futures of parked requests).
JoinCallback = Callable[[dict[str, Any]], None]
SyncCallback = Callable[[int, bytes], None]


class IllegalStateTransition(RuntimeError):
    pass


@dataclass(slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1


@dataclass(slots=True, eq=False)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    # (protocol name, subscription metadata) in the member's order of preference
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    awaiting_join: JoinCallback | None = None
    awaiting_sync: SyncCallback | None = None
    heartbeat_satisfied: bool = False
    is_new: bool = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    def has_satisfied_heartbeat(self) -> bool:
        if self.is_new:
            return self.heartbeat_satisfied  # a new member may expire while it waits for the join
        # A member inside a rebalance is covered by the rebalance timeout instead of its session.
        return self.is_awaiting_join or self.is_awaiting_sync or self.heartbeat_satisfied

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among the candidates."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


@dataclass(slots=True, eq=False)
class GroupMetadata:
    group_id: str
    partition: int  # the __consumer_offsets partition that stores this group
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, MemberMetadata] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    # Members that were handed a member id (MEMBER_ID_REQUIRED) and have not joined with it yet.
    pending_members: set[str] = field(default_factory=set)
    offsets: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)
    # TxnOffsetCommit: offsets written in a producer's open transaction (producer id -> offsets); they become
    # ``offsets`` on its COMMIT marker and are dropped on ABORT.
    pending_txn_offsets: dict[int, dict[TopicPartition, OffsetAndMetadata]] = field(default_factory=dict)
    current_state_timestamp: int | None = None
    new_member_added: bool = False
    num_awaiting_join: int = 0
    # A consumer group of KIP-848's protocol (consumer_group.py); None for a classic group. Its classic state
    # stays Empty: the members, epochs and assignments live in this object.
    consumer: ConsumerGroup | None = None

    # ----------------------------------------------------------------------------------------- state
    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[target]:
            raise IllegalStateTransition(f"group {self.group_id}: {self.state.value} -> {target.value}")
        self.state = target
        self.current_state_timestamp = now_ms

    def can_rebalance(self) -> bool:
        return self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY)

    # ----------------------------------------------------------------------------------------- members
    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: MemberMetadata, callback: JoinCallback | None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.discard(member.member_id)
        if callback is not None:
            member.awaiting_join = callback
            self.num_awaiting_join += 1

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.awaiting_join is not None:
            self.num_awaiting_join -= 1
            member.awaiting_join = None
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def update_member(self, member: MemberMetadata, protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
                      session_timeout_ms: int, callback: JoinCallback | None) -> None:
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if callback is not None and member.awaiting_join is None:
            self.num_awaiting_join += 1
        elif callback is None and member.awaiting_join is not None:
            self.num_awaiting_join -= 1
        member.awaiting_join = callback

    def invoke_join_callback(self, member: MemberMetadata, result: dict[str, Any]) -> None:
        callback = member.awaiting_join
        if callback is not None:
            member.awaiting_join = None
            self.num_awaiting_join -= 1
            callback(result)

    def invoke_sync_callback(self, member: MemberMetadata, error: int, assignment: bytes) -> bool:
        callback = member.awaiting_sync
        if callback is None:
            return False
        member.awaiting_sync = None
        callback(error, assignment)
        return True

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        return None if group_instance_id is None else self.static_members.get(group_instance_id)

    def is_static_member_fenced(self, member_id: str, group_instance_id: str | None) -> bool:
        """True when the instance id belongs to another member id (a newer incarnation fenced this one)."""
        if group_instance_id is None:
            return False
        known = self.static_members.get(group_instance_id)
        return known is not None and known != member_id

    def replace_static_member(self, group_instance_id: str, old_member_id: str, new_member_id: str,
                              fenced_error: int) -> MemberMetadata:
        member = self.members.pop(old_member_id)
        # The old incarnation's parked requests learn they were fenced.
        if member.awaiting_join is not None:
            callback, member.awaiting_join = member.awaiting_join, None
            self.num_awaiting_join -= 1
            callback({"error_code": fenced_error, "member_id": old_member_id})
        if member.awaiting_sync is not None:
            sync, member.awaiting_sync = member.awaiting_sync, None
            sync(fenced_error, b"")
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        return member

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_members

    def not_yet_rejoined(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if m.awaiting_join is None]

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Make sure the leader is a member that rejoined; False when no member has rejoined."""
        if self.leader_id is not None and self.leader_id in self.members and \
                self.members[self.leader_id].is_awaiting_join:
            return True
        for member in self.members.values():
            if member.is_awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    # ----------------------------------------------------------------------------------------- protocols
    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        names = {name for name, _ in protocols}
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        """The common protocol most members prefer; ties go to the first candidate in the leader's order."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise ValueError(f"group {self.group_id} has no protocol common to all members")
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        best = max(votes.values())
        order = [name for name, _ in self.members[self.leader_id].protocols] if self.leader_id in self.members \
            else sorted(candidates)
        return next(name for name in order if votes.get(name) == best)

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)

    def current_member_metadata(self) -> list[dict[str, Any]]:
        assert self.protocol_name is not None
        return [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                 "metadata": m.metadata_for(self.protocol_name)} for m in self.members.values()]

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol only); None when that cannot be known."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            try:
                topics |= parse_subscription_topics(member.metadata_for(self.protocol_name))
            except (KeyError, ValueError, struct.error):
                return None
        return topics

    def has_offsets(self) -> bool:
        return bool(self.offsets)

    def is_empty(self) -> bool:
        """No members of either protocol (offsets may be deleted, the group expired)."""
        return self.state is GroupState.EMPTY and not (self.consumer is not None and self.consumer.members)

    def group_type(self) -> str:
        return "classic" if self.consumer is None else "consumer"

    def state_name(self) -> str:
        """The state ListGroups shows: the consumer group's own for KIP-848 groups."""
        return self.state.value if self.consumer is None or self.is_(GroupState.DEAD) else self.consumer.state()


def parse_subscription_topics(metadata: bytes) -> set[str]:
    """Topics of a ConsumerProtocolSubscription (int16 version, then an array of int16-length strings)."""
    pos = 2
    (count,) = struct.unpack_from(">i", metadata, pos)
    pos += 4
    if count < 0 or count > len(metadata):
        raise ValueError("bad topic count")
    topics = set()
    for _ in range(count):
        (n,) = struct.unpack_from(">h", metadata, pos)
        pos += 2
        if n < 0 or pos + n > len(metadata):
            raise ValueError("bad topic name")
        topics.add(metadata[pos:pos + n].decode())
        pos += n
    return topics
