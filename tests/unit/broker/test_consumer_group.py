"""KIP-848 consumer groups: the server-side assignors, the reconciliation state machine, and the coordinator's
ConsumerGroupHeartbeat rules (epochs, fencing, timeouts, offsets), with a manual timer and an in-memory log."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from moldau.broker.coordinator.assignors import MemberSubscription, assignor_names, range_, uniform
from moldau.broker.coordinator.consumer_group import ConsumerGroup, ConsumerMember, MemberState
from moldau.broker.coordinator.consumer_membership import HeartbeatRequest, HeartbeatResult
from moldau.broker.coordinator.group import OffsetAndMetadata
from moldau.protocol import consumer_offsets as fmt
from moldau.protocol.errors import ErrorCode as E

from .test_group_coordinator import Harness

SESSION = 45_000


def subs(**topics: tuple[str, ...]) -> dict[str, MemberSubscription]:
    return {m: MemberSubscription(frozenset(ts)) for m, ts in topics.items()}


def counts(assignment: dict[str, dict[str, set[int]]]) -> dict[str, int]:
    return {m: sum(len(ps) for ps in tps.values()) for m, tps in assignment.items()}


def flat(assignment: dict[str, dict[str, set[int]]]) -> list[tuple[str, int]]:
    return sorted((t, p) for tps in assignment.values() for t, ps in tps.items() for p in ps)


# ------------------------------------------------------------------------------------------------ assignors
def test_uniform_balances_every_partition_once() -> None:
    members = subs(a=("t",), b=("t",), c=("t",))
    result = uniform(members, {"t": 7}, {})
    assert flat(result) == [("t", p) for p in range(7)]
    assert sorted(counts(result).values()) == [2, 2, 3]


def test_uniform_is_sticky_when_a_member_leaves_or_joins() -> None:
    before = uniform(subs(a=("t",), b=("t",), c=("t",)), {"t": 6}, {})
    after = uniform(subs(a=("t",), b=("t",)), {"t": 6}, before)
    for m in ("a", "b"):  # survivors keep what they had and share the leaver's partitions
        assert before[m]["t"] <= after[m]["t"]
    assert counts(after) == {"a": 3, "b": 3}
    joined = uniform(subs(a=("t",), b=("t",), c=("t",), d=("t",)), {"t": 6}, before)
    moved = sum(len(before[m]["t"] - joined[m].get("t", set())) for m in ("a", "b", "c"))
    assert moved == 1 and sorted(counts(joined).values()) == [1, 1, 2, 2]


def test_uniform_heterogeneous_subscriptions() -> None:
    result = uniform(subs(a=("x",), b=("x", "y"), c=("y",)), {"x": 4, "y": 2}, {})
    assert flat(result) == [("x", p) for p in range(4)] + [("y", 0), ("y", 1)]
    assert "y" not in result["a"] and "x" not in result["c"]
    assert max(counts(result).values()) - min(counts(result).values()) <= 1


def test_range_gives_contiguous_ranges_in_member_order() -> None:
    result = range_(subs(b=("t", "u"), a=("t", "u")), {"t": 5, "u": 2}, {})
    assert result["a"] == {"t": {0, 1, 2}, "u": {0}}
    assert result["b"] == {"t": {3, 4}, "u": {1}}


def test_assignor_names_accept_kafka_class_names() -> None:
    assert assignor_names(["org.apache.kafka.coordinator.group.assignor.RangeAssignor", "uniform"]) == \
        ["range", "uniform"]
    with pytest.raises(ValueError):
        assignor_names(["sticky"])


# ------------------------------------------------------------------------------------------------ reconciliation
def _member(group: ConsumerGroup, member_id: str) -> ConsumerMember:
    m = ConsumerMember(member_id, "c", "/h", 30_000, ["t"])
    group.add(m)
    return m


def test_a_partition_moves_only_after_its_owner_revoked_it() -> None:
    g = ConsumerGroup("g")
    a = _member(g, "a")
    g.bump_and_assign({"t": 2})
    assert g.reconcile(a, {}) and a.assigned == {"t": {0, 1}} and a.member_epoch == 1
    b = _member(g, "b")
    g.bump_and_assign({"t": 2})
    assert g.target["b"] and g.state() == "Reconciling"
    moving = next(iter(g.target["b"]["t"]))
    g.reconcile(b, {})  # b reaches epoch 2 but must wait: a still holds the partition
    assert b.member_epoch == 2 and b.state is MemberState.UNRELEASED_PARTITIONS and not b.assigned
    g.reconcile(a, None)  # a is told to revoke; its epoch stays until it has
    assert a.state is MemberState.UNREVOKED_PARTITIONS and a.member_epoch == 1
    assert moving not in a.assigned["t"] and a.pending_revocation == {"t": {moving}}
    g.reconcile(b, None)
    assert not b.assigned  # still held by a (pending revocation)
    g.reconcile(a, {"t": {0, 1}})  # a heartbeat that still owns it changes nothing
    assert a.state is MemberState.UNREVOKED_PARTITIONS
    g.reconcile(a, a.assigned)  # revoked: a moves to the new epoch and releases it
    assert a.state is MemberState.STABLE and a.member_epoch == 2
    assert g.reconcile(b, None) and b.assigned == {"t": {moving}} and b.state is MemberState.STABLE
    assert g.state() == "Stable"


def test_a_removed_member_releases_its_partitions_at_once() -> None:
    g = ConsumerGroup("g")
    a, b = _member(g, "a"), _member(g, "b")
    g.bump_and_assign({"t": 4})
    g.reconcile(a, {})
    g.reconcile(b, {})
    g.remove("a")
    g.bump_and_assign({"t": 4})
    g.reconcile(b, None)
    assert b.assigned == {"t": {0, 1, 2, 3}} and b.state is MemberState.STABLE


# ------------------------------------------------------------------------------------------------ coordinator
class Consumers:
    def __init__(self, h: Harness, counts_: dict[str, int]) -> None:
        self.h = h
        self._counts = counts_
        h.c.partition_counts = lambda: self.counts
        h.c.topic_ids = lambda: {t: bytes([i + 1]) * 16 for i, t in enumerate(sorted(self.counts))}

    @property
    def counts(self) -> dict[str, int]:
        return self._counts

    @counts.setter
    def counts(self, value: dict[str, int]) -> None:
        self._counts = value
        self.h.c.on_topic_change("any", None)  # as the metadata store's listener call

    def beat(self, member: str, epoch: int, topics: Any = "default", owned: dict[str, set[int]] | None = None,
             group: str = "g", **kw: Any) -> HeartbeatResult:
        """A heartbeat; a join (epoch 0) subscribes to t and owns nothing unless told otherwise."""
        if epoch == 0:
            topics = ["t"] if topics == "default" else topics
            owned = owned if owned is not None else {}
            kw.setdefault("rebalance_timeout_ms", 30_000)
        elif topics == "default":
            topics = None
        return self.h.c.consumer_group_heartbeat(HeartbeatRequest(group, member, epoch, subscribed_topic_names=topics,
                                                                  owned=owned, client_id=member, **kw))


@pytest.fixture
def consumers() -> Consumers:
    h = Harness(consumer_session_timeout_ms=SESSION, consumer_heartbeat_interval_ms=500)
    asyncio.run(h.lead(0))
    return Consumers(h, {"t": 4})


def test_join_assign_and_epochs(consumers: Consumers) -> None:
    r = consumers.beat("a", 0)
    assert (r.error_code, r.member_id, r.member_epoch, r.heartbeat_interval_ms) == (E.NONE, "a", 1, 500)
    assert r.assignment == {"t": {0, 1, 2, 3}}
    again = consumers.beat("a", 1, owned={"t": {0, 1, 2, 3}})
    assert again.member_epoch == 1 and again.assignment is None  # nothing changed: no assignment sent
    generated = consumers.beat("", 0)
    assert generated.member_id and generated.member_id != "a"  # v0 clients: the coordinator names the member


def test_fencing_and_unknown_members(consumers: Consumers) -> None:
    consumers.beat("a", 0)
    assert consumers.beat("a", 5).error_code == E.FENCED_MEMBER_EPOCH
    assert consumers.beat("zz", 1).error_code == E.UNKNOWN_MEMBER_ID
    assert consumers.beat("a", 0, topics=None).error_code == E.INVALID_REQUEST
    assert consumers.beat("a", 0, server_assignor="sticky").error_code == E.UNSUPPORTED_ASSIGNOR
    assert consumers.beat("", 3).error_code == E.INVALID_REQUEST


def test_session_timeout_moves_partitions(consumers: Consumers) -> None:
    consumers.beat("a", 0, rebalance_timeout_ms=120_000)
    b = consumers.beat("b", 0)
    assert b.member_epoch == 2 and not b.assignment  # a must revoke first
    a = consumers.beat("a", 1, owned={"t": {0, 1, 2, 3}})
    assert a.member_epoch == 1 and a.assignment is not None and len(a.assignment["t"]) == 2
    epoch = 2
    for _ in range(SESSION // 5000 - 1):  # only b heartbeats (40 s); a died before it revoked
        consumers.h.timer.advance(5000)
        r = consumers.beat("b", epoch)
        assert r.error_code == E.NONE and not r.assignment
        epoch = r.member_epoch
    consumers.h.timer.advance(5000)
    b = consumers.beat("b", epoch)
    assert b.member_epoch == 3 and b.assignment == {"t": {0, 1, 2, 3}}
    assert consumers.beat("a", 1).error_code == E.UNKNOWN_MEMBER_ID


def test_rebalance_timeout_fences_a_member_that_never_revokes(consumers: Consumers) -> None:
    consumers.beat("a", 0)
    consumers.beat("b", 0)
    consumers.beat("a", 1, owned={"t": {0, 1, 2, 3}})  # told to revoke; never does
    consumers.h.timer.advance(30_001)
    assert consumers.beat("a", 1, owned={"t": {0, 1, 2, 3}}).error_code == E.UNKNOWN_MEMBER_ID
    assert consumers.beat("b", 2).assignment == {"t": {0, 1, 2, 3}}


def test_leave_and_kinds_of_group(consumers: Consumers) -> None:
    consumers.beat("a", 0)
    assert consumers.beat("a", -1).member_epoch == -1
    assert consumers.h.c.store.get_group("g").consumer.state() == "Empty"
    consumers.beat("a", 0)
    joined = consumers.h.join("g", "")
    assert joined[0]["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL  # a consumer group with members
    consumers.h.join_new("classic")
    assert consumers.beat("x", 0, group="classic").error_code == E.GROUP_ID_NOT_FOUND
    err, groups = consumers.h.c.list_groups()
    assert {(g.group_id, g.group_type()) for g in groups} == {("g", "consumer"), ("classic", "classic")}
    assert consumers.h.c.describe_group("g")[1]["group_state"] == "Dead"  # DescribeGroups v0-5, as Kafka
    assert consumers.h.c.delete_groups(["g"]) == {"g": E.NON_EMPTY_GROUP}


def test_offset_commits_carry_the_member_epoch(consumers: Consumers) -> None:
    consumers.beat("a", 0)
    offsets = {("t", 0): OffsetAndMetadata(5)}
    c = consumers.h.c
    assert c.commit_offsets("g", "a", None, 1, offsets, 9) == {("t", 0): E.NONE}
    assert c.commit_offsets("g", "a", None, 0, offsets, 9) == {("t", 0): E.STALE_MEMBER_EPOCH}
    assert c.commit_offsets("g", "a", None, 2, offsets, 9) == {("t", 0): E.FENCED_MEMBER_EPOCH}
    assert c.commit_offsets("g", "b", None, 1, offsets, 9) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert c.commit_offsets("g", "", None, -1, offsets, 9) == {("t", 0): E.UNKNOWN_MEMBER_ID}  # not empty
    assert c.commit_offsets("nope", "a", None, 3, offsets, 9) == {("t", 0): E.GROUP_ID_NOT_FOUND}
    assert c.fetch_offsets("g", [("t", 0)], "a", 1)[0] == E.NONE
    assert c.fetch_offsets("g", [("t", 0)], "a", 0)[0] == E.STALE_MEMBER_EPOCH
    assert c.fetch_offsets("g", [("t", 0)])[1][("t", 0)].offset == 5  # admin fetch without a member


def test_a_new_coordinator_resumes_the_group_from_its_records(consumers: Consumers) -> None:
    consumers.beat("a", 0)
    consumers.beat("b", 0)
    consumers.beat("a", 1, owned={"t": {0, 1, 2, 3}})
    kept = consumers.h.c.store.get_group("g").consumer.members["a"].assigned
    a = consumers.beat("a", 1, owned=kept)  # revoked what it had to
    b = consumers.beat("b", 2)
    assert a.member_epoch == 2 and b.member_epoch == 2 and b.assignment
    written = {fmt.read_key(r.key).type for r in consumers.h.rm.partitions[("__consumer_offsets", 0)].log.records()
               if r.key is not None and isinstance(fmt.read_key(r.key), fmt.ConsumerKey)}
    assert written == {3, 5, 6, 7, 8}  # Kafka's record types (4, topic metadata, is not written)
    # Another coordinator over the same log (the partition's new leader) loads the group; members carry on.
    other = Consumers(Harness(rm=consumers.h.rm), consumers.counts)
    asyncio.run(other.h.lead(0))
    loaded = other.h.c.store.get_group("g").consumer
    before = consumers.h.c.store.get_group("g").consumer
    assert loaded is not None and loaded.state() == "Stable" and loaded.group_epoch == before.group_epoch
    assert {m: x.assigned for m, x in loaded.members.items()} == {m: x.assigned for m, x in before.members.items()}
    again = other.beat("b", 2, owned=b.assignment)
    assert again.error_code == E.NONE and again.member_epoch == 2
    assert other.beat("a", 2, owned=a.assignment).error_code == E.NONE
    # Its session timers run at the new coordinator: a member that stays silent is removed there.
    for _ in range(SESSION // 5000):
        other.h.timer.advance(5000)
        assert other.beat("b", 2).error_code == E.NONE
    assert set(loaded.members) == {"b"}


def test_a_static_member_comes_back_to_its_partitions(consumers: Consumers) -> None:
    consumers.beat("a", 0, instance_id="i-a")
    consumers.beat("b", 0, instance_id="i-b")
    consumers.beat("a", 1, owned={"t": {0, 1, 2, 3}})
    kept = dict(consumers.h.c.store.get_group("g").consumer.members["a"].assigned)
    a = consumers.beat("a", 1, owned=kept)
    assert a.member_epoch == 2
    assert consumers.beat("a", -2, instance_id="i-a").member_epoch == -2  # restarts
    assert consumers.beat("a2", 0, instance_id="i-b").error_code == E.UNRELEASED_INSTANCE_ID  # b is still here
    back = consumers.beat("a2", 0, instance_id="i-a")
    assert (back.error_code, back.member_epoch, back.assignment) == (E.NONE, 2, kept)  # no rebalance
    cg = consumers.h.c.store.get_group("g").consumer
    assert cg.group_epoch == 2 and set(cg.members) == {"a2", "b"}


def test_a_regex_subscription_follows_new_topics(consumers: Consumers) -> None:
    consumers.counts = {"rx-a": 2, "other": 1, "__consumer_offsets": 1}
    r = consumers.beat("a", 0, topics=None, subscribed_topic_regex="rx-.*")
    assert r.assignment == {"rx-a": {0, 1}}
    assert consumers.beat("b", 0, topics=None, subscribed_topic_regex="(").error_code == E.INVALID_REGULAR_EXPRESSION
    consumers.counts = dict(consumers.counts, **{"rx-b": 1})  # created later: matched at the next heartbeat
    r = consumers.beat("a", 1)
    assert r.member_epoch == 2 and r.assignment == {"rx-a": {0, 1}, "rx-b": {0}}
