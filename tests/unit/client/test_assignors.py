"""Range and round-robin assignors, and the ConsumerProtocol subscription/assignment wire format."""

from __future__ import annotations

import struct

from moldau.assignors import (
    MemberSubscription,
    Subscription,
    cooperative_sticky_assign,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    range_assign,
    roundrobin_assign,
)


def members(spec: dict[str, list[str]], instances: dict[str, str] | None = None) -> list[MemberSubscription]:
    instances = instances or {}
    return [MemberSubscription(m, instances.get(m), Subscription(topics)) for m, topics in spec.items()]


def test_subscription_bytes_match_kafkas_layout() -> None:
    data = encode_subscription(Subscription(["ab", "c"], b"u", {"ab": [1]}, version=1))
    expected = (struct.pack(">hi", 1, 2) + struct.pack(">h", 2) + b"ab" + struct.pack(">h", 1) + b"c"
                + struct.pack(">i", 1) + b"u" + struct.pack(">i", 1) + struct.pack(">h", 2) + b"ab"
                + struct.pack(">ii", 1, 1))
    assert data == expected
    back = decode_subscription(data)
    assert (back.topics, back.user_data, back.owned_partitions) == (["ab", "c"], b"u", {"ab": [1]})


def test_subscription_v0_and_trailing_fields() -> None:
    v0 = encode_subscription(Subscription(["t"], None, version=0))
    assert v0 == struct.pack(">hih", 0, 1, 1) + b"t" + struct.pack(">i", -1)
    assert decode_subscription(v0).topics == ["t"]
    # v3 (librdkafka 2.x sends generation id and rack after owned partitions): extra bytes are ignored.
    v3 = bytearray(encode_subscription(Subscription(["t"], None, {}, version=1)))
    struct.pack_into(">h", v3, 0, 3)
    assert decode_subscription(bytes(v3) + struct.pack(">ih", 5, -1)).topics == ["t"]


def test_assignment_round_trip() -> None:
    data = encode_assignment({"t": [0, 2], "a": [1]})
    assert data.startswith(struct.pack(">hi", 1, 2))
    assert decode_assignment(data) == {"a": [1], "t": [0, 2]}
    assert decode_assignment(b"") == {}


def test_range_gives_first_members_the_extra_partitions() -> None:
    plan = range_assign(members({"c2": ["t"], "c1": ["t"], "c3": ["t"]}), {"t": 7})
    assert plan == {"c1": {"t": [0, 1, 2]}, "c2": {"t": [3, 4]}, "c3": {"t": [5, 6]}}


def test_range_is_per_topic_and_respects_subscriptions() -> None:
    plan = range_assign(members({"a": ["x", "y"], "b": ["x"]}), {"x": 3, "y": 2})
    assert plan == {"a": {"x": [0, 1], "y": [0, 1]}, "b": {"x": [2]}}


def test_range_orders_static_members_first() -> None:
    plan = range_assign(members({"a": ["t"], "b": ["t"]}, instances={"b": "i-1"}), {"t": 3})
    assert plan == {"b": {"t": [0, 1]}, "a": {"t": [2]}}


def test_range_more_members_than_partitions() -> None:
    plan = range_assign(members({"a": ["t"], "b": ["t"], "c": ["t"]}), {"t": 2})
    assert plan == {"a": {"t": [0]}, "b": {"t": [1]}, "c": {}}


def test_roundrobin_deals_partitions_in_turn() -> None:
    plan = roundrobin_assign(members({"b": ["x", "y"], "a": ["x", "y"]}), {"x": 3, "y": 2})
    assert plan == {"a": {"x": [0, 2], "y": [1]}, "b": {"x": [1], "y": [0]}}


def test_roundrobin_skips_members_not_subscribed() -> None:
    plan = roundrobin_assign(members({"a": ["x"], "b": ["x", "y"]}), {"x": 2, "y": 2})
    assert plan == {"a": {"x": [0]}, "b": {"x": [1], "y": [0, 1]}}


def test_every_partition_assigned_exactly_once() -> None:
    spec = {f"m{i}": ["t1", "t2", "t3"] for i in range(4)}
    for assign in (range_assign, roundrobin_assign):
        plan = assign(members(spec), {"t1": 5, "t2": 1, "t3": 8})
        owned = sorted((t, p) for tps in plan.values() for t, ps in tps.items() for p in ps)
        assert owned == sorted([("t1", p) for p in range(5)] + [("t2", 0)] + [("t3", p) for p in range(8)])


def owned(spec: dict[str, tuple[list[str], dict[str, list[int]]]]) -> list[MemberSubscription]:
    return [MemberSubscription(m, None, Subscription(topics, None, own)) for m, (topics, own) in spec.items()]


def test_cooperative_sticky_fresh_group_is_balanced() -> None:
    plan = cooperative_sticky_assign(owned({"a": (["t"], {}), "b": (["t"], {})}), {"t": 5})
    sizes = sorted(len(tps.get("t", [])) for tps in plan.values())
    assert sizes == [2, 3]
    assert sorted(p for tps in plan.values() for p in tps["t"]) == [0, 1, 2, 3, 4]


def test_cooperative_sticky_keeps_owned_and_defers_moves() -> None:
    # a owned everything; b joins: a keeps 2, the 2 that move to b are left out of this round.
    first = cooperative_sticky_assign(owned({"a": (["t"], {"t": [0, 1, 2, 3]}), "b": (["t"], {})}), {"t": 4})
    assert len(first["a"]["t"]) == 2 and first["b"] == {}
    kept = first["a"]["t"]
    # Next round: a owns only what it kept; the rest goes to b.
    second = cooperative_sticky_assign(owned({"a": (["t"], {"t": kept}), "b": (["t"], {})}), {"t": 4})
    assert second["a"]["t"] == kept and sorted(second["b"]["t"]) == sorted({0, 1, 2, 3} - set(kept))


def test_cooperative_sticky_member_leaving_frees_its_partitions() -> None:
    plan = cooperative_sticky_assign(owned({"a": (["t"], {"t": [0, 1]})}), {"t": 4})
    assert plan == {"a": {"t": [0, 1, 2, 3]}}
