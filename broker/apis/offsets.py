"""OffsetCommit, OffsetFetch and OffsetDelete: committed offsets of consumer groups (see broker/coordinator).

ACLs (Kafka's rules): OffsetCommit needs Read on the group and on each topic, OffsetFetch Describe on the group
and on each topic (all-topics fetches leave the others out), OffsetDelete Delete on the group and Read on each
topic; refusals answer GROUP_AUTHORIZATION_FAILED or TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from moldau.broker.apis.context import GroupDeps
from moldau.broker.coordinator.group import OffsetAndMetadata
from moldau.broker.request_channel import Request
from moldau.broker.security.acl import Operation, ResourceType
from moldau.protocol.errors import ErrorCode
from moldau.protocol.types import TopicPartition

if TYPE_CHECKING:  # the message shapes are for mypy only: zero cost at run time
    from moldau.protocol.typed import (
        OffsetCommitRequest,
        OffsetCommitResponse,
        OffsetCommitResponseTopics,
        OffsetDeleteRequest,
        OffsetDeleteResponse,
        OffsetDeleteResponseTopicsPartitions,
        OffsetFetchRequest,
        OffsetFetchRequestTopics,
        OffsetFetchResponse,
        OffsetFetchResponseGroups,
        OffsetFetchResponseTopics,
        OffsetFetchResponseTopicsPartitions,
    )

NO_OFFSET = -1


def _known_partition(ctx: GroupDeps, topic: str, partition: int) -> bool:
    t = ctx.topics.metadata.topic(topic)
    return t is not None and partition in t.partitions


def _topics_allowed(ctx: GroupDeps, request: Request, operation: Operation, names: Iterable[str]) -> set[str]:
    return ctx.topics.auth.allowed_names(request, operation, ResourceType.TOPIC, names)


def _group_allowed(ctx: GroupDeps, request: Request, operation: Operation, group_id: str) -> bool:
    return ctx.topics.auth.allowed(request, operation, ResourceType.GROUP, group_id)


async def handle_offset_commit(ctx: GroupDeps, request: Request, body: OffsetCommitRequest
                               ) -> OffsetCommitResponse:
    coordinator = ctx.active_coordinator()
    now = ctx.clock.time_ms()
    errors: dict[TopicPartition, ErrorCode] = {}
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    group_ok = _group_allowed(ctx, request, Operation.READ, body["group_id"])
    readable = _topics_allowed(ctx, request, Operation.READ, (t["name"] for t in body["topics"]))
    for t in body["topics"]:
        for p in t["partitions"]:
            tp = (t["name"], p["partition_index"])
            if not group_ok:
                errors[tp] = ErrorCode.GROUP_AUTHORIZATION_FAILED
            elif t["name"] not in readable:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif coordinator is None:
                errors[tp] = ErrorCode.COORDINATOR_NOT_AVAILABLE
            elif not _known_partition(ctx, *tp):
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                metadata = p["committed_metadata"]
                offsets[tp] = OffsetAndMetadata(p["committed_offset"], p["committed_leader_epoch"],
                                                "" if metadata is None else metadata, now)
    if coordinator is not None and offsets:
        committed = coordinator.commit_offsets(body["group_id"], body["member_id"], body["group_instance_id"],
                                               body["generation_id_or_member_epoch"], offsets, request.version)
        if any(e == ErrorCode.NONE for e in committed.values()):
            # Answered once replicated (acks=all), as Kafka's coordinator does.
            store = coordinator.store
            error = await store.replicated(store.partition_for(body["group_id"]),
                                           int(ctx.topics.config.get("offsets.commit.timeout.ms")))
            if error != ErrorCode.NONE:
                committed = {tp: error if e == ErrorCode.NONE else e for tp, e in committed.items()}
        errors.update(committed)
    topics: list[OffsetCommitResponseTopics] = [{"name": t["name"],
               "partitions": [{"partition_index": p["partition_index"],
                               "error_code": errors[(t["name"], p["partition_index"])]} for p in t["partitions"]]}
              for t in body["topics"]]
    return {"throttle_time_ms": 0, "topics": topics}


def _fetch_group(ctx: GroupDeps, request: Request, group_id: str, topics: list[OffsetFetchRequestTopics] | None,
                 errors_in_partitions: bool, require_stable: bool = False, member: tuple[str | None, int] = (None, -1)
                 ) -> tuple[ErrorCode, list[OffsetFetchResponseTopics]]:
    """One group's answer: (group-level error, topics with partitions). ``require_stable`` (v7+, KIP-447): a
    partition with a transactional commit still pending answers UNSTABLE_OFFSET_COMMIT (the client retries)."""
    coordinator = ctx.active_coordinator()
    wanted = None if topics is None else [(t["name"], p) for t in topics for p in t["partition_indexes"]]
    found: dict[TopicPartition, OffsetAndMetadata | None] = {}
    if not _group_allowed(ctx, request, Operation.DESCRIBE, group_id):
        error = ErrorCode.GROUP_AUTHORIZATION_FAILED
    elif coordinator is None:
        error = ErrorCode.COORDINATOR_NOT_AVAILABLE
    else:
        error, found = coordinator.fetch_offsets(group_id, wanted, *member)
    unstable = coordinator.pending_txn_partitions(group_id) if coordinator is not None and require_stable \
        else set()
    if error != ErrorCode.NONE and (wanted is None or not errors_in_partitions):
        return error, []
    by_topic: dict[str, list[OffsetFetchResponseTopicsPartitions]] = {}
    tps = wanted if wanted is not None else list(found)
    described = _topics_allowed(ctx, request, Operation.DESCRIBE, (tp[0] for tp in tps))
    for tp in tps:
        o = found.get(tp)
        if tp[0] not in described:
            if wanted is None:
                continue  # all topics: only those the principal may describe
            o, partition_error = None, ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif tp in unstable and error == ErrorCode.NONE:
            o, partition_error = None, ErrorCode.UNSTABLE_OFFSET_COMMIT
        else:
            partition_error = error
        by_topic.setdefault(tp[0], []).append({
            "partition_index": tp[1], "committed_offset": NO_OFFSET if o is None else o.offset,
            "committed_leader_epoch": -1 if o is None else o.leader_epoch,
            "metadata": "" if o is None else o.metadata, "error_code": partition_error})
    return error, [{"name": name, "partitions": parts} for name, parts in by_topic.items()]


def handle_offset_fetch(ctx: GroupDeps, request: Request, body: OffsetFetchRequest) -> OffsetFetchResponse:
    version = request.version
    if version >= 8:
        groups: list[OffsetFetchResponseGroups] = []
        for g in body["groups"]:
            error, topics = _fetch_group(ctx, request, g["group_id"], g["topics"], False, body["require_stable"],
                                         (g["member_id"], g["member_epoch"]))
            groups.append({"group_id": g["group_id"], "topics": topics, "error_code": error})
        return {"throttle_time_ms": 0, "groups": groups}
    # v1 has no group-level error: it is reported in every partition.
    error, topics = _fetch_group(ctx, request, body["group_id"], body["topics"], version < 2,
                                 body["require_stable"])
    return {"throttle_time_ms": 0, "topics": topics, "error_code": error}


def handle_offset_delete(ctx: GroupDeps, request: Request, body: OffsetDeleteRequest) -> OffsetDeleteResponse:
    coordinator = ctx.active_coordinator()
    wanted = [(t["name"], p["partition_index"]) for t in body["topics"] for p in t["partitions"]]
    if coordinator is None:
        return {"error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "throttle_time_ms": 0, "topics": []}
    if not _group_allowed(ctx, request, Operation.DELETE, body["group_id"]):
        return {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "throttle_time_ms": 0, "topics": []}
    readable = _topics_allowed(ctx, request, Operation.READ, (tp[0] for tp in wanted))
    denied = [tp for tp in wanted if tp[0] not in readable]
    wanted = [tp for tp in wanted if tp[0] in readable]
    error, results = coordinator.delete_offsets(body["group_id"], wanted)
    results.update({tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp in denied})
    if error != ErrorCode.NONE:
        return {"error_code": error, "throttle_time_ms": 0, "topics": []}
    by_topic: dict[str, list[OffsetDeleteResponseTopicsPartitions]] = {}
    for (topic, partition), e in results.items():
        if not _known_partition(ctx, topic, partition):
            e = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        by_topic.setdefault(topic, []).append({"partition_index": partition, "error_code": e})
    return {"error_code": ErrorCode.NONE, "throttle_time_ms": 0,
            "topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()]}
