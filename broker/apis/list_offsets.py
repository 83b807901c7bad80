"""ListOffsets: earliest (-2), latest (-1), max timestamp (-3), or the first offset at/after a timestamp (Describe
on the topic, else TOPIC_AUTHORIZATION_FAILED). A consumer's latest is the high watermark, or the last stable
offset with isolation level 1 (read_committed, v2+)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.broker.apis.context import ReplicaDeps
from moldau.broker.request_channel import Request
from moldau.broker.security.acl import Operation, ResourceType
from moldau.protocol.errors import ErrorCode

if TYPE_CHECKING:  # the message shapes are for mypy only: zero cost at run time
    from moldau.protocol.typed import (
        ListOffsetsRequest,
        ListOffsetsResponse,
        ListOffsetsResponseTopics,
        ListOffsetsResponseTopicsPartitions,
    )

EARLIEST, MAX_TIMESTAMP = -2, -3


def handle_list_offsets(ctx: ReplicaDeps, request: Request, body: ListOffsetsRequest) -> ListOffsetsResponse:
    version = request.version
    consumer = body["replica_id"] < 0
    read_committed = version >= 2 and body["isolation_level"] == 1
    topics: list[ListOffsetsResponseTopics] = []
    described = ctx.auth.allowed_names(request, Operation.DESCRIBE, ResourceType.TOPIC,
                                       (t["name"] for t in body["topics"]))
    for t in body["topics"]:
        partitions: list[ListOffsetsResponseTopicsPartitions] = []
        for p in t["partitions"]:
            entry: ListOffsetsResponseTopicsPartitions = {
                "partition_index": p["partition_index"], "error_code": ErrorCode.NONE,
                "timestamp": -1, "offset": -1, "leader_epoch": -1, "old_style_offsets": []}
            partitions.append(entry)
            if t["name"] not in described:  # Kafka: Describe on the topic
                entry["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            partition, error = ctx.replica_manager.leader_partition(t["name"], p["partition_index"])
            if partition is None:
                entry["error_code"] = error
                continue
            ts = p["timestamp"]
            if ts == MAX_TIMESTAMP and version < 7:
                entry["error_code"] = ErrorCode.UNSUPPORTED_VERSION
                continue
            if consumer and ts != EARLIEST and partition.offsets_settling:
                entry["error_code"] = ErrorCode.OFFSET_NOT_AVAILABLE
                continue
            found = partition.offset_for_timestamp(ts, committed_only=consumer, read_committed=read_committed)
            if found is not None:
                offset, entry["timestamp"] = found
                entry["offset"] = offset
                entry["leader_epoch"] = partition.leader_epoch if offset >= 0 else -1
            if version == 0:
                entry["old_style_offsets"] = [entry["offset"]] if entry["offset"] >= 0 else []
        topics.append({"name": t["name"], "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
