"""The group coordinator's state machine and offset storage, with a manual timer and an in-memory log.

The fake replica manager stores appended batches with real offsets and serves them back through the same
``read()`` contract as storage.Log, so loading is tested against the real record and key/value formats.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

from moldau.broker.coordinator.coordinator import GroupConfig, GroupCoordinator
from moldau.broker.coordinator.group import GroupState, OffsetAndMetadata
from moldau.broker.coordinator.offsets import OFFSETS_TOPIC, OffsetStore, java_string_hashcode, partition_for
from moldau.broker.purgatory import ManualTimer
from moldau.protocol import consumer_offsets as fmt
from moldau.protocol.errors import ErrorCode as E
from moldau.protocol.records import iter_records, read_header, set_base_offset

SESSION = 10_000
REBALANCE = 30_000


# ------------------------------------------------------------------------------------------------ fakes
class Region:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self) -> bytes:
        return self.data

    def __len__(self) -> int:
        return len(self.data)


@dataclass
class FetchData:
    regions: list[Region]
    size: int


@dataclass
class FakeLog:
    batches: list[tuple[int, bytes]] = field(default_factory=list)
    log_start_offset: int = 0
    log_end_offset: int = 0

    def append(self, records: bytes) -> int:
        buf = bytearray(records)
        set_base_offset(buf, 0, self.log_end_offset)
        header = read_header(buf)
        base = self.log_end_offset
        self.batches.append((base, bytes(buf)))
        self.log_end_offset = header.next_offset
        return base

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None, min_one: bool = True) -> FetchData:
        chosen: list[Region] = []
        size = 0
        for base, data in self.batches:
            last = read_header(data).last_offset
            if last < offset or (max_offset is not None and base >= max_offset):
                continue
            if chosen and size + len(data) > max_bytes:
                break
            chosen.append(Region(data))
            size += len(data)
        return FetchData(chosen, size)

    def records(self) -> list[Any]:
        return [r for _, data in self.batches for r in iter_records(data)]


@dataclass
class FakePartition:
    log: FakeLog

    @property
    def high_watermark(self) -> int:
        return self.log.log_end_offset


@dataclass
class Result:
    error: E = E.NONE
    last_offset: int = -1


class FakeReplicaManager:
    def __init__(self, num_partitions: int) -> None:
        self.partitions = {(OFFSETS_TOPIC, p): FakePartition(FakeLog()) for p in range(num_partitions)}
        self.fail_with: E | None = None

    def get_partition(self, topic: str, index: int) -> FakePartition | None:
        return self.partitions.get((topic, index))

    async def wait_until_leader(self, topic: str, index: int) -> FakePartition:
        return self.partitions[(topic, index)]  # every fake partition leads

    def append(self, topic: str, index: int, records: bytes, acks: int) -> Result:
        if self.fail_with is not None:
            return Result(self.fail_with)
        log = self.partitions[(topic, index)].log
        log.append(records)
        return Result(last_offset=log.log_end_offset - 1)


class FakeClock:
    def __init__(self, timer: ManualTimer) -> None:
        self.timer = timer

    def time_ms(self) -> int:
        return int(self.timer.now_ms)


class Harness:
    """A coordinator over one fake __consumer_offsets, with helpers that record callback answers."""

    def __init__(self, rm: FakeReplicaManager | None = None, num_partitions: int = 1,
                 initial_delay: int = 0, timer: ManualTimer | None = None, **config: Any) -> None:
        self.timer = timer or ManualTimer(1_000_000)
        self.rm = rm or FakeReplicaManager(num_partitions)
        self.store = OffsetStore(self.rm, FakeClock(self.timer), num_partitions, max_metadata_size=100)
        cfg = GroupConfig(min_session_timeout_ms=1000, max_session_timeout_ms=60_000,
                          initial_rebalance_delay_ms=initial_delay, **config)
        self.c = GroupCoordinator(self.store, self.timer, FakeClock(self.timer), cfg)
        self.c.startup()

    async def lead(self, *partitions: int) -> None:
        for p in partitions:
            self.c.on_become_leader(p)
        for _ in range(20):
            await asyncio.sleep(0)
            if not self.store.loading:
                return
        raise AssertionError("partitions did not load")

    def join(self, group: str = "g", member: str = "", protocols: list[tuple[str, bytes]] | None = None, *,
             instance: str | None = None, v4: bool = True, client: str = "client", session: int = SESSION,
             ptype: str = "consumer") -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        self.c.join_group(group, member, instance, v4, client, "/127.0.0.1", REBALANCE, session, ptype,
                          protocols if protocols is not None else [("range", b"meta-" + client.encode())],
                          out.append)
        return out

    def join_new(self, group: str = "g", **kw: Any) -> tuple[str, list[dict[str, Any]]]:
        """The v4+ two-step join: MEMBER_ID_REQUIRED, then the join with the given member id."""
        first = self.join(group, **kw)
        assert first and first[0]["error_code"] == E.MEMBER_ID_REQUIRED
        member_id = first[0]["member_id"]
        return member_id, self.join(group, member_id, **kw)

    def sync(self, member: str, generation: int, assignments: dict[str, bytes] | None = None,
             group: str = "g", instance: str | None = None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        self.c.sync_group(group, generation, member, instance, None, None, assignments or {}, out.append)
        return out

    def stable_group(self, n: int, group: str = "g") -> list[str]:
        """n members joined (time advances until the rebalance completes) and synced."""
        ids, answers = [], []
        for i in range(n):
            member_id, answer = self.join_new(group, client=f"c{i}")
            ids.append(member_id)
            answers.append(answer)
        for _ in range(REBALANCE // 1000):
            if all(answers):
                break
            self.timer.advance(1000)
        generation = answers[0][0]["generation_id"]
        leader = answers[0][0]["leader"]
        syncs = {m: self.sync(m, generation, {x: f"assign-{x}".encode() for x in ids} if m == leader else None,
                              group) for m in ids}
        for m in ids:
            assert syncs[m] and syncs[m][0]["error_code"] == E.NONE, syncs[m]
        assert self.c.store.get_group(group).state is GroupState.STABLE  # type: ignore[union-attr]
        return ids


@pytest.fixture
async def h() -> Harness:
    harness = Harness(initial_delay=3000)
    await harness.lead(0)
    return harness


# ------------------------------------------------------------------------------------------------ partitioning
def test_java_string_hashcode_and_partition() -> None:
    assert java_string_hashcode("") == 0
    assert java_string_hashcode("abc") == 96354
    assert java_string_hashcode("hello") == 99162322
    assert java_string_hashcode("polygenelubricants") == -(1 << 31)  # Utils.abs maps it to 0
    assert partition_for("polygenelubricants", 50) == 0
    assert java_string_hashcode("zzzzzzzzzz") < 0
    assert partition_for("zzzzzzzzzz", 50) == abs(java_string_hashcode("zzzzzzzzzz")) % 50
    assert java_string_hashcode("\U0001F600") == 0xD83D * 31 + 0xDE00  # UTF-16 surrogate pair


def test_log_format_bytes_and_round_trip() -> None:
    assert fmt.offset_key("g", "t", 3) == b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x03"
    assert fmt.group_key("g") == b"\x00\x02\x00\x01g"
    value = fmt.offset_value(42, 5, "m", 1000)
    assert value == b"\x00\x03" + (42).to_bytes(8, "big") + (5).to_bytes(4, "big") + b"\x00\x01m" + \
        (1000).to_bytes(8, "big")
    assert fmt.read_offset_value(value) == {"offset": 42, "leader_epoch": 5, "metadata": "m",
                                            "commit_timestamp": 1000, "expire_timestamp": -1}
    assert fmt.read_key(fmt.offset_key("g", "t", 3)) == fmt.OffsetKey("g", "t", 3)
    assert fmt.read_key(fmt.group_key("g")) == fmt.GroupKey("g")
    with pytest.raises(fmt.FormatError):
        fmt.read_key(b"\x00\x07abc")


# ------------------------------------------------------------------------------------------------ joining
async def test_member_id_required_then_initial_delay_then_sync(h: Harness) -> None:
    first = h.join(client="kp")
    assert first[0]["error_code"] == E.MEMBER_ID_REQUIRED
    member_id = first[0]["member_id"]
    assert member_id.startswith("kp-") and len(member_id) > 30
    second = h.join(member=member_id, client="kp")
    assert second == []  # parked for group.initial.rebalance.delay.ms
    h.timer.advance(2999)
    assert second == []
    h.timer.advance(1)
    [result] = second
    assert result["error_code"] == E.NONE and result["generation_id"] == 1
    assert result["leader"] == member_id and result["protocol_name"] == "range"
    assert result["members"] == [{"member_id": member_id, "group_instance_id": None, "metadata": b"meta-kp"}]
    group = h.store.get_group("g")
    assert group is not None and group.state is GroupState.COMPLETING_REBALANCE
    [synced] = h.sync(member_id, 1, {member_id: b"A"})
    assert synced["error_code"] == E.NONE and synced["assignment"] == b"A"
    assert synced["protocol_name"] == "range" and group.state is GroupState.STABLE


async def test_join_without_member_id_requirement_v3(h: Harness) -> None:
    out = h.join(v4=False)
    h.timer.advance(3000)
    assert out[0]["error_code"] == E.NONE and out[0]["member_id"].startswith("client-")


async def test_initial_delay_is_extended_while_members_arrive(h: Harness) -> None:
    _, a = h.join_new(client="a")
    h.timer.advance(2000)
    _, b = h.join_new(client="b")
    h.timer.advance(1000)  # the first delay ran out, but a member arrived: wait once more
    assert a == [] and b == []
    h.timer.advance(3000)
    assert a[0]["generation_id"] == b[0]["generation_id"] == 1
    assert len([r for r in (a[0], b[0]) if r["members"]]) == 1  # only the leader gets the member list
    leader = a[0] if a[0]["members"] else b[0]
    assert {m["member_id"] for m in leader["members"]} == {a[0]["member_id"], b[0]["member_id"]}


async def test_protocol_selection_by_votes() -> None:
    h = Harness()
    await h.lead(0)
    x = h.join(v4=False, client="x", protocols=[("range", b"x1"), ("roundrobin", b"x2")])
    h.timer.advance(1)
    leader_id = x[0]["member_id"]
    y = h.join(v4=False, client="y", protocols=[("roundrobin", b"y2"), ("range", b"y1")])
    z = h.join(v4=False, client="z", protocols=[("roundrobin", b"z2"), ("sticky", b"z3"), ("range", b"z1")])
    x2 = h.join(member=leader_id, client="x", protocols=[("range", b"x1"), ("roundrobin", b"x2")])
    for out in (x2, y, z):
        assert out and out[0]["error_code"] == E.NONE
        assert out[0]["protocol_name"] == "roundrobin"
    assert {m["metadata"] for m in x2[0]["members"]} == {b"x2", b"y2", b"z2"}
    # No common protocol, or another protocol type: refused.
    assert h.join(v4=False, protocols=[("sticky", b"")])[0]["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.join(v4=False, ptype="connect")[0]["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL


async def test_request_validation_errors() -> None:
    h = Harness(num_partitions=2)
    mine = "polygenelubricants"  # partition 0
    other = next(g for g in (f"g{i}" for i in range(100)) if partition_for(g, 2) == 1)
    await h.lead(0)
    assert h.join(mine, session=999)[0]["error_code"] == E.INVALID_SESSION_TIMEOUT
    assert h.join(mine, session=60_001)[0]["error_code"] == E.INVALID_SESSION_TIMEOUT
    assert h.join("")[0]["error_code"] == E.INVALID_GROUP_ID
    assert h.join(other)[0]["error_code"] == E.NOT_COORDINATOR
    assert h.join(mine, member="nobody")[0]["error_code"] == E.UNKNOWN_MEMBER_ID
    assert h.c.heartbeat(mine, "nobody", None, 1) == E.UNKNOWN_MEMBER_ID
    assert h.sync("nobody", 1, group=mine)[0]["error_code"] == E.UNKNOWN_MEMBER_ID
    h.store.begin_load(1)  # a partition being loaded
    assert h.join(other)[0]["error_code"] == E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.c.heartbeat(other, "m", None, 1) == E.NONE  # answered blindly while loading
    assert h.sync("m", 1, group=other)[0]["error_code"] == E.REBALANCE_IN_PROGRESS
    h.c.active = False
    assert h.join(mine)[0]["error_code"] == E.COORDINATOR_NOT_AVAILABLE


async def test_generation_and_state_errors(h: Harness) -> None:
    a, b = h.stable_group(2)
    assert h.c.heartbeat("g", a, None, 1) == E.NONE
    assert h.c.heartbeat("g", a, None, 0) == E.ILLEGAL_GENERATION
    assert h.sync(a, 7)[0]["error_code"] == E.ILLEGAL_GENERATION
    # A new member triggers a rebalance: heartbeats say so, SyncGroup is refused.
    new_id, parked = h.join_new(client="c")
    assert parked == [] and h.store.get_group("g").state is GroupState.PREPARING_REBALANCE  # type: ignore
    assert h.c.heartbeat("g", a, None, 1) == E.REBALANCE_IN_PROGRESS
    assert h.sync(a, 1)[0]["error_code"] == E.REBALANCE_IN_PROGRESS
    ra, rb = h.join(member=a, client="c0"), h.join(member=b, client="c1")
    assert parked and ra and rb and {r[0]["generation_id"] for r in (parked, ra, rb)} == {2}


async def test_follower_sync_waits_for_leader(h: Harness) -> None:
    ids = []
    answers = []
    for i in range(2):
        member_id, answer = h.join_new(client=f"c{i}")
        ids.append(member_id)
        answers.append(answer)
    while not all(answers):
        h.timer.advance(1000)
    leader = answers[0][0]["leader"]
    follower = next(m for m in ids if m != leader)
    waiting = h.sync(follower, 1)
    assert waiting == []
    h.sync(leader, 1, {follower: b"F"})  # the leader's own assignment is missing: it gets empty bytes
    assert waiting[0] == {"error_code": E.NONE, "assignment": b"F", "protocol_type": "consumer",
                          "protocol_name": "range"}
    assert h.store.get_group("g").get(leader).assignment == b""  # type: ignore[union-attr]


# ------------------------------------------------------------------------------------------------ leaving
async def test_session_timeout_removes_silent_member(h: Harness) -> None:
    a, b = h.stable_group(2)
    h.timer.advance(SESSION // 2)
    assert h.c.heartbeat("g", a, None, 1) == E.NONE
    h.timer.advance(SESSION // 2 - 1)
    assert h.c.heartbeat("g", a, None, 1) == E.NONE
    group = h.store.get_group("g")
    assert group is not None and group.has(b)
    h.timer.advance(1)  # b's session runs out
    assert group is not None and not group.has(b) and group.is_(GroupState.PREPARING_REBALANCE)
    assert h.c.heartbeat("g", a, None, 1) == E.REBALANCE_IN_PROGRESS
    rejoined = h.join(member=a, client="c0")
    assert rejoined[0]["generation_id"] == 2 and [m["member_id"] for m in rejoined[0]["members"]] == [a]
    assert h.c.heartbeat("g", b, None, 2) == E.UNKNOWN_MEMBER_ID


async def test_rebalance_timeout_removes_member_that_does_not_rejoin(h: Harness) -> None:
    a, b = h.stable_group(2)
    rejoin = h.join(member=a, client="c0", protocols=[("range", b"changed")])
    assert rejoin == []
    for _ in range(REBALANCE // 5000):
        h.timer.advance(5000)
        h.c.heartbeat("g", a, None, 1)
    assert rejoin and rejoin[0]["generation_id"] == 2 and len(rejoin[0]["members"]) == 1
    assert not h.store.get_group("g").has(b)  # type: ignore[union-attr]


async def test_leave_group_triggers_rebalance_and_empties_group(h: Harness) -> None:
    a, b = h.stable_group(2)
    assert h.c.leave_group("g", [(b, None)]) == (E.NONE, [(b, None, E.NONE)])
    assert h.c.leave_group("g", [("ghost", None)]) == (E.NONE, [("ghost", None, E.UNKNOWN_MEMBER_ID)])
    rejoined = h.join(member=a, client="c0")
    assert rejoined[0]["generation_id"] == 2
    h.sync(a, 2, {a: b"all"})
    h.c.leave_group("g", [(a, None)])
    group = h.store.get_group("g")
    assert group is not None and group.is_(GroupState.EMPTY) and group.generation_id == 3
    assert group.protocol_name is None


async def test_pending_member_expires(h: Harness) -> None:
    first = h.join()
    pending = first[0]["member_id"]
    assert pending in h.store.get_group("g").pending_members  # type: ignore[union-attr]
    h.timer.advance(SESSION)
    assert pending not in h.store.get_group("g").pending_members  # type: ignore[union-attr]
    assert h.join(member=pending)[0]["error_code"] == E.UNKNOWN_MEMBER_ID


# ------------------------------------------------------------------------------------------------ static members
async def test_static_member_rejoin_replaces_member_id_without_rebalance(h: Harness) -> None:
    out = h.join(instance="i-1", client="s")
    h.timer.advance(3000)
    old = out[0]["member_id"]
    h.sync(old, 1, {old: b"mine"}, instance="i-1")
    again = h.join(instance="i-1", client="s")
    [r] = again
    assert r["error_code"] == E.NONE and r["generation_id"] == 1 and r["member_id"] != old
    assert r["leader"] == old  # the old leader id: the member must not assign again
    group = h.store.get_group("g")
    assert group is not None and group.is_(GroupState.STABLE)
    assert h.sync(r["member_id"], 1, instance="i-1")[0]["assignment"] == b"mine"
    assert h.c.heartbeat("g", old, "i-1", 1) == E.FENCED_INSTANCE_ID
    assert h.c.heartbeat("g", r["member_id"], "i-1", 1) == E.NONE
    assert h.c.leave_group("g", [(old, "i-1")])[1][0][2] == E.FENCED_INSTANCE_ID


# ------------------------------------------------------------------------------------------------ offsets
def commit(h: Harness, offsets: dict[tuple[str, int], int], group: str = "g", member: str = "",
           generation: int = -1, metadata: str = "") -> dict[tuple[str, int], E]:
    now = int(h.timer.now_ms)
    return h.c.commit_offsets(group, member, None, generation,
                              {tp: OffsetAndMetadata(o, -1, metadata, now) for tp, o in offsets.items()})


async def test_simple_commits_and_fetch(h: Harness) -> None:
    assert commit(h, {("t", 0): 5, ("t", 1): 7}) == {("t", 0): E.NONE, ("t", 1): E.NONE}
    error, found = h.c.fetch_offsets("g", [("t", 0), ("t", 2)])
    assert error == E.NONE and found[("t", 0)].offset == 5 and found[("t", 2)] is None  # type: ignore[union-attr]
    _, everything = h.c.fetch_offsets("g", None)
    assert {tp: o.offset for tp, o in everything.items() if o} == {("t", 0): 5, ("t", 1): 7}
    assert commit(h, {("t", 0): 1}, metadata="x" * 101) == {("t", 0): E.OFFSET_METADATA_TOO_LARGE}
    assert commit(h, {("t", 0): 1}, group="nogroup", member="m", generation=3) == \
        {("t", 0): E.ILLEGAL_GENERATION}
    assert commit(h, {("t", 0): 6}, group="") == {("t", 0): E.NONE}  # the empty group id is allowed here


async def test_member_commits_are_checked_against_the_generation(h: Harness) -> None:
    a, _ = h.stable_group(2)
    assert commit(h, {("t", 0): 1}, member=a, generation=1) == {("t", 0): E.NONE}
    assert commit(h, {("t", 0): 1}, member=a, generation=0) == {("t", 0): E.ILLEGAL_GENERATION}
    assert commit(h, {("t", 0): 1}, member="x", generation=1) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert commit(h, {("t", 0): 1}) == {("t", 0): E.UNKNOWN_MEMBER_ID}  # a simple commit to a live group
    h.rm.fail_with = E.NOT_LEADER_OR_FOLLOWER
    assert commit(h, {("t", 0): 2}, member=a, generation=1) == {("t", 0): E.NOT_COORDINATOR}
    assert h.c.fetch_offsets("g", [("t", 0)])[1][("t", 0)].offset == 1  # type: ignore[union-attr]


async def test_state_survives_reload_from_the_log(h: Harness) -> None:
    a, b = h.stable_group(2)
    commit(h, {("t", 0): 10, ("t", 1): 20}, member=a, generation=1)
    commit(h, {("t", 0): 11}, member=a, generation=1)
    commit(h, {("x", 0): 3}, group="simple")
    again = Harness(rm=h.rm, timer=h.timer, initial_delay=3000)
    again.store.begin_load(0)
    assert again.join("g", a)[0]["error_code"] == E.COORDINATOR_LOAD_IN_PROGRESS
    again.store.loading.clear()
    await again.lead(0)
    group = again.store.get_group("g")
    assert group is not None and group.is_(GroupState.STABLE) and group.generation_id == 1
    assert set(group.members) == {a, b} and group.get(b).assignment == f"assign-{b}".encode()
    assert {tp: o.offset for tp, o in group.offsets.items()} == {("t", 0): 11, ("t", 1): 20}
    assert again.c.heartbeat("g", a, None, 1) == E.NONE
    assert again.store.get_group("simple").offsets[("x", 0)].offset == 3  # type: ignore[union-attr]
    # Members that stay silent after the move are expired by their session timeout.
    h.timer.advance(SESSION)
    assert not group.has(b)


async def test_delete_groups_and_tombstones(h: Harness) -> None:
    a, _ = h.stable_group(2, group="busy")
    commit(h, {("t", 0): 4}, group="idle")
    assert h.c.delete_groups(["busy", "idle", "ghost"]) == \
        {"busy": E.NON_EMPTY_GROUP, "idle": E.NONE, "ghost": E.GROUP_ID_NOT_FOUND}
    tombstones = [r for r in h.rm.partitions[(OFFSETS_TOPIC, 0)].log.records() if r.value is None]
    assert {fmt.read_key(r.key) for r in tombstones} == {fmt.OffsetKey("idle", "t", 0), fmt.GroupKey("idle")}
    again = Harness(rm=h.rm, timer=h.timer)
    await again.lead(0)
    assert again.store.get_group("idle") is None and again.store.get_group("busy") is not None
    assert again.c.describe_group("ghost")[1]["group_state"] == "Dead"


async def test_offset_delete_respects_subscriptions(h: Harness) -> None:
    subscription = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t"  # version 0, topics ["t"]
    out = h.join(v4=False, protocols=[("range", subscription)])
    h.timer.advance(3000)
    member = out[0]["member_id"]
    h.sync(member, 1, {member: b""})
    commit(h, {("t", 0): 1, ("u", 0): 2}, member=member, generation=1)
    error, result = h.c.delete_offsets("g", [("t", 0), ("u", 0)])
    assert error == E.NONE and result == {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): E.NONE}
    assert set(h.store.get_group("g").offsets) == {("t", 0)}  # type: ignore[union-attr]
    assert h.c.delete_offsets("ghost", [("t", 0)])[0] == E.GROUP_ID_NOT_FOUND


async def test_offsets_of_empty_group_expire_after_retention() -> None:
    h = Harness(offsets_retention_ms=60_000, offsets_retention_check_interval_ms=10_000)
    await h.lead(0)
    commit(h, {("t", 0): 1}, group="old")
    h.timer.advance(30_000)
    commit(h, {("t", 0): 2}, group="young")
    h.timer.advance(30_000)  # "old" is now 60 s old
    assert h.store.get_group("old") is None
    assert h.store.get_group("young") is not None
    h.timer.advance(30_000)
    assert h.store.get_group("young") is None
    # A group with members keeps its offsets however old they are.
    a = h.stable_group(1, group="live")[0]
    commit(h, {("t", 0): 3}, group="live", member=a, generation=1)
    for _ in range(20):
        h.timer.advance(SESSION // 2)
        h.c.heartbeat("live", a, None, 1)
    assert h.store.get_group("live").offsets  # type: ignore[union-attr]


async def test_resign_answers_parked_requests_and_forgets_groups(h: Harness) -> None:
    parked = h.join(v4=False)
    h.c.on_resign(0)
    assert parked[0]["error_code"] == E.NOT_COORDINATOR
    assert h.store.get_group("g") is None
    assert h.c.heartbeat("g", "m", None, 1) == E.NOT_COORDINATOR


async def test_list_and_describe(h: Harness) -> None:
    a = h.stable_group(1, group="s")[0]
    commit(h, {("t", 0): 1}, group="e")
    error, groups = h.c.list_groups()
    assert error == E.NONE and [(g.group_id, g.state.value) for g in groups] == [("e", "Empty"), ("s", "Stable")]
    assert [g.group_id for g in h.c.list_groups({"stable"})[1]] == ["s"]
    error, described = h.c.describe_group("s")
    assert error == E.NONE and described["group_state"] == "Stable" and described["protocol_data"] == "range"
    [member] = described["members"]
    assert member["member_id"] == a and member["client_id"] == "c0" and member["member_metadata"] == b"meta-c0"
    assert member["member_assignment"] == f"assign-{a}".encode()


async def test_leadership_follows_the_offsets_topic_metadata() -> None:
    from moldau.broker.metadata import PartitionState, TopicMetadata

    h = Harness(num_partitions=3)
    h.c.broker_id = 1

    def topic(leaders: list[int]) -> TopicMetadata:
        return TopicMetadata(OFFSETS_TOPIC, b"\0" * 16,
                             {p: PartitionState(p, leader, 0, [leader], [leader]) for p, leader in enumerate(leaders)})

    h.c.on_topic_change("other-topic", topic([1, 1, 1]))
    assert not h.store.loading and not h.store.owned
    h.c.on_topic_change(OFFSETS_TOPIC, topic([1, 2, 1]))
    assert h.store.loading == {0, 2}
    await h.lead()
    for _ in range(10):
        await asyncio.sleep(0)
    assert h.store.owned == {0, 2} and not h.store.loading
    group = next(g for g in (f"g{i}" for i in range(100)) if partition_for(g, 3) == 2)
    parked = h.join(group, v4=False)
    h.c.on_topic_change(OFFSETS_TOPIC, topic([1, 1, 2]))  # partition 2 moves away, partition 1 comes here
    assert parked[0]["error_code"] == E.NOT_COORDINATOR
    assert h.store.owned == {0} and h.store.loading == {1}
    h.c.on_topic_change(OFFSETS_TOPIC, None)  # topic deleted
    assert not h.store.owned and not h.store.loading
