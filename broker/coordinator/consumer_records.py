"""A KIP-848 consumer group as Kafka's records in ``__consumer_offsets`` (key types 3, 5, 6, 7, 8), and back.

The coordinator keeps what it last wrote per key (``ConsumerGroup.persisted``) and after each change appends only
the records whose value changed, plus tombstones for keys that are gone (a member that left), as Kafka's
coordinator does; a new coordinator replays them (``load_consumer_group``) and the members carry on with their
epochs. Topics are named by topic id on disk; a topic that no longer exists is left out when loading.
Type 4 (the subscribed topics' metadata) is not written: the loader takes partition counts from the current
metadata instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from moldau.broker.coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    TopicPartitions,
)
from moldau.protocol import consumer_offsets as fmt

_STATES = {MemberState.STABLE: 0, MemberState.UNREVOKED_PARTITIONS: 1, MemberState.UNRELEASED_PARTITIONS: 2}
_BY_CODE = {code: state for state, code in _STATES.items()}


def _by_id(tps: TopicPartitions, topic_ids: Mapping[str, bytes]) -> list[dict[str, Any]]:
    return [{"topic_id": topic_ids[t], "partitions": sorted(ps)} for t, ps in sorted(tps.items())
            if ps and t in topic_ids]


def _by_name(parts: list[dict[str, Any]], topic_names: Mapping[bytes, str]) -> TopicPartitions:
    return {topic_names[p["topic_id"]]: set(p["partitions"]) for p in parts
            if p["topic_id"] in topic_names and p["partitions"]}


def group_records(cg: ConsumerGroup, topic_ids: Mapping[str, bytes], members: Iterable[str] | None = None,
                  targets: Iterable[str] = ()) -> dict[bytes, bytes]:
    """The records that describe the group now, key -> value: the group's own, every record of ``members`` (None:
    all of them) and the target assignment of ``targets``."""
    g = cg.group_id
    out = {fmt.consumer_key(fmt.CONSUMER_GROUP_METADATA, g):
           fmt.consumer_value(fmt.CONSUMER_GROUP_METADATA, {"epoch": cg.group_epoch}),
           fmt.consumer_key(fmt.CONSUMER_TARGET_METADATA, g):
           fmt.consumer_value(fmt.CONSUMER_TARGET_METADATA, {"assignment_epoch": cg.assignment_epoch})}
    for mid in targets:
        if mid in cg.members:
            out[fmt.consumer_key(fmt.CONSUMER_TARGET_MEMBER, g, mid)] = fmt.consumer_value(
                fmt.CONSUMER_TARGET_MEMBER, {"topic_partitions": _by_id(cg.target.get(mid, {}), topic_ids)})
    for mid in cg.members if members is None else members:
        m = cg.members.get(mid)
        if m is None:
            continue
        out[fmt.consumer_key(fmt.CONSUMER_MEMBER_METADATA, g, mid)] = fmt.consumer_value(
            fmt.CONSUMER_MEMBER_METADATA,
            {"instance_id": m.instance_id, "rack_id": m.rack_id, "client_id": m.client_id,
             "client_host": m.client_host, "subscribed_topic_names": list(m.topic_names),
             "subscribed_topic_regex": m.topic_regex, "rebalance_timeout_ms": m.rebalance_timeout_ms,
             "server_assignor": m.server_assignor})
        out[fmt.consumer_key(fmt.CONSUMER_TARGET_MEMBER, g, mid)] = fmt.consumer_value(
            fmt.CONSUMER_TARGET_MEMBER, {"topic_partitions": _by_id(cg.target.get(mid, {}), topic_ids)})
        out[fmt.consumer_key(fmt.CONSUMER_CURRENT_ASSIGNMENT, g, mid)] = fmt.consumer_value(
            fmt.CONSUMER_CURRENT_ASSIGNMENT,
            {"member_epoch": m.member_epoch, "previous_member_epoch": m.previous_member_epoch,
             "state": _STATES[m.state], "assigned_partitions": _by_id(m.assigned, topic_ids),
             "partitions_pending_revocation": _by_id(m.pending_revocation, topic_ids)})
    return out


def changes(cg: ConsumerGroup, topic_ids: Mapping[str, bytes], members: Iterable[str] | None = None,
            targets: Iterable[str] = (), removed: Iterable[str] = ()) -> list[tuple[bytes, bytes | None]]:
    """What to append so the log says what the group is now: the changed values among the records of ``members``
    (None: all) and ``targets``, and tombstones for the records of ``removed`` members. Only the members a change
    touched are encoded: a steady group of many members costs one member's records per heartbeat."""
    now = group_records(cg, topic_ids, members, targets)
    gone = [fmt.consumer_key(t, cg.group_id, mid) for mid in removed
            for t in (fmt.CONSUMER_MEMBER_METADATA, fmt.CONSUMER_TARGET_MEMBER, fmt.CONSUMER_CURRENT_ASSIGNMENT)]
    out: list[tuple[bytes, bytes | None]] = [(k, None) for k in gone if k in cg.persisted]
    out += [(k, v) for k, v in now.items() if cg.persisted.get(k) != v]
    return out


def tombstones(cg: ConsumerGroup) -> list[tuple[bytes, bytes | None]]:
    """Delete every record of the group (the group is deleted or becomes a classic group)."""
    return [(k, None) for k in cg.persisted]


def load_consumer_group(group_id: str, records: Mapping[tuple[int, str], dict[str, Any]], default_assignor: str,
                        topic_names: Mapping[bytes, str], partition_counts: Mapping[str, int],
                        regex_topics: Callable[[str | None], set[str]]) -> ConsumerGroup:
    """The group that the replayed records (latest value per (type, member) key) describe; a member's regex is
    matched against today's topics."""
    cg = ConsumerGroup(group_id, default_assignor)
    cg.group_epoch = records[(fmt.CONSUMER_GROUP_METADATA, "")]["epoch"]
    target_meta = records.get((fmt.CONSUMER_TARGET_METADATA, ""))
    cg.assignment_epoch = target_meta["assignment_epoch"] if target_meta is not None else 0
    for (record_type, mid), v in sorted(records.items()):
        if record_type != fmt.CONSUMER_MEMBER_METADATA:
            continue
        names, regex = sorted(v["subscribed_topic_names"]), v["subscribed_topic_regex"]
        member = ConsumerMember(mid, v["client_id"], v["client_host"], v["rebalance_timeout_ms"],
                                sorted(set(names) | regex_topics(regex)), v["instance_id"], v["rack_id"],
                                v["server_assignor"], names, regex)
        current = records.get((fmt.CONSUMER_CURRENT_ASSIGNMENT, mid))
        if current is not None:
            member.member_epoch = current["member_epoch"]
            member.previous_member_epoch = current["previous_member_epoch"]
            member.state = _BY_CODE.get(current["state"], MemberState.STABLE)
            member.assigned = _by_name(current["assigned_partitions"], topic_names)
            member.pending_revocation = _by_name(current["partitions_pending_revocation"], topic_names)
        target = records.get((fmt.CONSUMER_TARGET_MEMBER, mid))
        if target is not None:
            cg.target[mid] = _by_name(target["topic_partitions"], topic_names)
        cg.add(member)
        for tps in (member.assigned, member.pending_revocation):
            for t, ps in tps.items():
                for p in ps:
                    cg.owners[(t, p)] = mid
    cg.partition_counts = {t: partition_counts[t] for t in cg.subscribed_topics() if partition_counts.get(t, 0) > 0}
    cg.assignor_name = cg.chosen_assignor() if cg.members else ""
    return cg
