"""OffsetCommit, OffsetFetch and OffsetDelete: committed offsets of consumer groups (see broker/coordinator)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.broker.apis.context import GroupDeps
from moldau.broker.coordinator.group import OffsetAndMetadata
from moldau.broker.request_channel import Request
from moldau.protocol.errors import ErrorCode

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


async def handle_offset_commit(ctx: GroupDeps, request: Request, body: OffsetCommitRequest
                               ) -> OffsetCommitResponse:
    coordinator = ctx.active_coordinator()
    now = ctx.clock.time_ms()
    errors: dict[tuple[str, int], ErrorCode] = {}
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    for t in body["topics"]:
        for p in t["partitions"]:
            tp = (t["name"], p["partition_index"])
            if coordinator is None:
                errors[tp] = ErrorCode.COORDINATOR_NOT_AVAILABLE
            elif not _known_partition(ctx, *tp):
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                metadata = p["committed_metadata"]
                offsets[tp] = OffsetAndMetadata(p["committed_offset"], p["committed_leader_epoch"],
                                                "" if metadata is None else metadata, now)
    if coordinator is not None:
        committed = coordinator.commit_offsets(body["group_id"], body["member_id"], body["group_instance_id"],
                                               body["generation_id_or_member_epoch"], offsets)
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


def _fetch_group(ctx: GroupDeps, group_id: str, topics: list[OffsetFetchRequestTopics] | None,
                 errors_in_partitions: bool) -> tuple[ErrorCode, list[OffsetFetchResponseTopics]]:
    """One group's answer: (group-level error, topics with partitions)."""
    coordinator = ctx.active_coordinator()
    wanted = None if topics is None else [(t["name"], p) for t in topics for p in t["partition_indexes"]]
    found: dict[tuple[str, int], OffsetAndMetadata | None] = {}
    if coordinator is None:
        error = ErrorCode.COORDINATOR_NOT_AVAILABLE
    else:
        error, found = coordinator.fetch_offsets(group_id, wanted)
    if error != ErrorCode.NONE and (wanted is None or not errors_in_partitions):
        return error, []
    by_topic: dict[str, list[OffsetFetchResponseTopicsPartitions]] = {}
    for tp in (wanted if wanted is not None else list(found)):
        o = found.get(tp)
        by_topic.setdefault(tp[0], []).append({
            "partition_index": tp[1], "committed_offset": NO_OFFSET if o is None else o.offset,
            "committed_leader_epoch": -1 if o is None else o.leader_epoch,
            "metadata": "" if o is None else o.metadata, "error_code": error})
    return error, [{"name": name, "partitions": parts} for name, parts in by_topic.items()]


def handle_offset_fetch(ctx: GroupDeps, request: Request, body: OffsetFetchRequest) -> OffsetFetchResponse:
    version = request.version
    if version >= 8:
        groups: list[OffsetFetchResponseGroups] = []
        for g in body["groups"]:
            error, topics = _fetch_group(ctx, g["group_id"], g["topics"], False)
            groups.append({"group_id": g["group_id"], "topics": topics, "error_code": error})
        return {"throttle_time_ms": 0, "groups": groups}
    # v1 has no group-level error: it is reported in every partition.
    error, topics = _fetch_group(ctx, body["group_id"], body["topics"], version < 2)
    return {"throttle_time_ms": 0, "topics": topics, "error_code": error}


def handle_offset_delete(ctx: GroupDeps, request: Request, body: OffsetDeleteRequest) -> OffsetDeleteResponse:
    coordinator = ctx.active_coordinator()
    wanted = [(t["name"], p["partition_index"]) for t in body["topics"] for p in t["partitions"]]
    if coordinator is None:
        return {"error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "throttle_time_ms": 0, "topics": []}
    error, results = coordinator.delete_offsets(body["group_id"], wanted)
    if error != ErrorCode.NONE:
        return {"error_code": error, "throttle_time_ms": 0, "topics": []}
    by_topic: dict[str, list[OffsetDeleteResponseTopicsPartitions]] = {}
    for (topic, partition), e in results.items():
        if not _known_partition(ctx, topic, partition):
            e = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        by_topic.setdefault(topic, []).append({"partition_index": partition, "error_code": e})
    return {"error_code": ErrorCode.NONE, "throttle_time_ms": 0,
            "topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()]}
