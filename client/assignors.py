"""Partition assignors of the classic group protocol and the ConsumerProtocol wire format.

The group leader runs the assignor over every member's subscription; the bytes inside JoinGroup/SyncGroup follow
Kafka's ConsumerProtocol so Java, librdkafka and Python consumers can share one group:

* Subscription: version int16, topics [string], user_data nullable bytes, v1+ owned_partitions
  [topic string, partitions [int32]].
* Assignment: version int16, assigned_partitions [topic string, partitions [int32]], user_data nullable bytes.

``range`` and ``roundrobin`` compute the same result as Kafka's RangeAssignor / RoundRobinAssignor (members ordered
by group.instance.id when set, then member id), so a group mixing clients agrees whoever is leader.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

TopicPartitions = dict[str, list[int]]


@dataclass(slots=True)
class Subscription:
    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: TopicPartitions = field(default_factory=dict)
    version: int = 1


@dataclass(slots=True)
class MemberSubscription:
    member_id: str
    group_instance_id: str | None
    subscription: Subscription


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def i16(self) -> int:
        (v,) = _I16.unpack_from(self.data, self.pos)
        self.pos += 2
        return int(v)

    def i32(self) -> int:
        (v,) = _I32.unpack_from(self.data, self.pos)
        self.pos += 4
        return int(v)

    def string(self) -> str:
        n = self.i16()
        s = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return s

    def nbytes(self) -> bytes | None:
        n = self.i32()
        if n < 0:
            return None
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return bytes(b)

    def topic_partitions(self) -> TopicPartitions:
        out: TopicPartitions = {}
        for _ in range(max(self.i32(), 0)):
            topic = self.string()
            out[topic] = [self.i32() for _ in range(max(self.i32(), 0))]
        return out

    @property
    def more(self) -> bool:
        return self.pos < len(self.data)


def _string(s: str) -> bytes:
    b = s.encode()
    return _I16.pack(len(b)) + b


def _nbytes(b: bytes | None) -> bytes:
    return _I32.pack(-1) if b is None else _I32.pack(len(b)) + b


def _topic_partitions(tps: Mapping[str, list[int]]) -> bytes:
    out = [_I32.pack(len(tps))]
    for topic in sorted(tps):
        parts = tps[topic]
        out.append(_string(topic) + _I32.pack(len(parts)) + b"".join(_I32.pack(p) for p in parts))
    return b"".join(out)


def encode_subscription(sub: Subscription) -> bytes:
    out = _I16.pack(sub.version) + _I32.pack(len(sub.topics)) + b"".join(_string(t) for t in sub.topics)
    out += _nbytes(sub.user_data)
    if sub.version >= 1:
        out += _topic_partitions(sub.owned_partitions)
    return out


def decode_subscription(data: bytes) -> Subscription:
    """Reads v0-v3 (fields after owned_partitions — generation, rack — are not needed by these assignors)."""
    r = _Reader(data)
    version = r.i16()
    topics = [r.string() for _ in range(max(r.i32(), 0))]
    user_data = r.nbytes()
    owned = r.topic_partitions() if version >= 1 and r.more else {}
    return Subscription(topics, user_data, owned, version)


def encode_assignment(assignment: Mapping[str, list[int]], user_data: bytes | None = None,
                      version: int = 1) -> bytes:
    return _I16.pack(version) + _topic_partitions(assignment) + _nbytes(user_data)


def decode_assignment(data: bytes | None) -> TopicPartitions:
    if not data:
        return {}
    r = _Reader(data)
    r.i16()
    return r.topic_partitions()


def _member_order(m: MemberSubscription) -> tuple[bool, str, str]:
    # Kafka sorts static members (by instance id) before dynamic ones (by member id).
    return (m.group_instance_id is None, m.group_instance_id or "", m.member_id)


def range_assign(members: list[MemberSubscription], partitions: Mapping[str, int]) -> dict[str, TopicPartitions]:
    """Kafka's RangeAssignor: per topic, consecutive partition ranges; the first members take one extra."""
    result: dict[str, TopicPartitions] = {m.member_id: {} for m in members}
    ordered = sorted(members, key=_member_order)
    for topic in sorted({t for m in members for t in m.subscription.topics}):
        count = partitions.get(topic, 0)
        subscribers = [m for m in ordered if topic in m.subscription.topics]
        if not count or not subscribers:
            continue
        per, extra = divmod(count, len(subscribers))
        for i, m in enumerate(subscribers):
            start = per * i + min(i, extra)
            length = per + (1 if i < extra else 0)
            if length:
                result[m.member_id][topic] = list(range(start, start + length))
    return result


def roundrobin_assign(members: list[MemberSubscription],
                      partitions: Mapping[str, int]) -> dict[str, TopicPartitions]:
    """Kafka's RoundRobinAssignor: all partitions (sorted) dealt in turn to the members subscribed to them."""
    result: dict[str, TopicPartitions] = {m.member_id: {} for m in members}
    ordered = sorted(members, key=_member_order)
    if not ordered:
        return result
    topics = sorted({t for m in members for t in m.subscription.topics})
    turn = 0
    for topic in topics:
        for p in range(partitions.get(topic, 0)):
            for _ in range(len(ordered)):  # skip members not subscribed to this topic
                m = ordered[turn % len(ordered)]
                turn += 1
                if topic in m.subscription.topics:
                    result[m.member_id].setdefault(topic, []).append(p)
                    break
    return result


def cooperative_sticky_assign(members: list[MemberSubscription],
                              partitions: Mapping[str, int]) -> dict[str, TopicPartitions]:
    """KIP-429's cooperative-sticky: a balanced assignment that keeps owned partitions where it can.

    A partition that must move to another member is left out of this round (its owner revokes it and rejoins;
    the next round hands it over), so no partition is ever owned by two members at once.
    """
    ordered = sorted(members, key=_member_order)
    subscribed = {m.member_id: set(m.subscription.topics) for m in ordered}
    owner: dict[tuple[str, int], str] = {}
    for m in ordered:
        for topic, parts in m.subscription.owned_partitions.items():
            for p in parts:
                tp = (topic, p)
                # Claimed twice (a stale member): nobody keeps it, it is reassigned.
                owner[tp] = "" if tp in owner else m.member_id
    all_tps = sorted((t, p) for t in sorted({t for s in subscribed.values() for t in s})
                     for p in range(partitions.get(t, 0)))
    target: dict[str, list[tuple[str, int]]] = {m.member_id: [] for m in ordered}
    if not ordered:
        return {}
    quota_hi = -(-len(all_tps) // len(ordered))
    free: list[tuple[str, int]] = []
    for tp in all_tps:
        cur = owner.get(tp, "")
        if cur and tp[0] in subscribed.get(cur, ()) and len(target[cur]) < quota_hi:
            target[cur].append(tp)
        else:
            free.append(tp)
    for tp in free:
        candidates = [m for m in ordered if tp[0] in subscribed[m.member_id]]
        if candidates:
            best = min(candidates, key=lambda m: len(target[m.member_id]))
            target[best.member_id].append(tp)
    _balance(target, subscribed)
    result: dict[str, TopicPartitions] = {m.member_id: {} for m in ordered}
    for member, tps in target.items():
        for tp in sorted(tps):
            cur = owner.get(tp, "")
            if cur and cur != member and cur in target:
                continue  # still owned elsewhere: handed over in the follow-up rebalance
            result[member].setdefault(tp[0], []).append(tp[1])
    return result


def _balance(target: dict[str, list[tuple[str, int]]], subscribed: dict[str, set[str]]) -> None:
    """Moves partitions from the fullest to the emptiest eligible member until counts differ by at most one."""
    for _ in range(sum(len(v) for v in target.values())):
        moved = False
        for big in sorted(target, key=lambda m: -len(target[m])):
            for small in sorted(target, key=lambda m: len(target[m])):
                if len(target[big]) - len(target[small]) <= 1:
                    break
                movable = [tp for tp in target[big] if tp[0] in subscribed[small]]
                if movable:
                    tp = movable[-1]
                    target[big].remove(tp)
                    target[small].append(tp)
                    moved = True
                    break
            if moved:
                break
        if not moved:
            return


ASSIGNORS = {"range": range_assign, "roundrobin": roundrobin_assign, "cooperative-sticky": cooperative_sticky_assign}
COOPERATIVE = frozenset({"cooperative-sticky"})
