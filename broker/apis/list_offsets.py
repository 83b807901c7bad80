"""ListOffsets: earliest (-2; a tiered partition's remote log start), latest (-1), max timestamp (-3), earliest-local
(-4, v8+: the local log start offset), or the first offset at/after a timestamp (Describe on the topic, else
TOPIC_AUTHORIZATION_FAILED). A consumer's latest is the high watermark, or the last stable offset with
isolation level 1 (read_committed, v2+)."""

from __future__ import annotations

import asyncio
import logging
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

log = logging.getLogger("moldau.apis.list_offsets")

EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL = -2, -3, -4


RemoteLookup = tuple["ListOffsetsResponseTopicsPartitions", str, int, int, int, int]


def handle_list_offsets(ctx: ReplicaDeps, request: Request, body: ListOffsetsRequest
                        ) -> ListOffsetsResponse | asyncio.Future[ListOffsetsResponse]:
    version = request.version
    remote: list[RemoteLookup] = []
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
            if (ts == MAX_TIMESTAMP and version < 7) or (ts == EARLIEST_LOCAL and version < 8):
                entry["error_code"] = ErrorCode.UNSUPPORTED_VERSION
                continue
            if consumer and ts not in (EARLIEST, EARLIEST_LOCAL) and partition.offsets_settling:
                entry["error_code"] = ErrorCode.OFFSET_NOT_AVAILABLE
                continue
            remote_start = partition.remote_log_start
            if ctx.remote is not None and ts >= 0 and remote_start is not None:
                # A tiered partition: the remote segments come first.
                remote.append((entry, t["name"], p["partition_index"], ts, remote_start, partition.leader_epoch))
            found = partition.offset_for_timestamp(ts, committed_only=consumer, read_committed=read_committed)
            if found is not None:
                offset, entry["timestamp"] = found
                entry["offset"] = offset
                entry["leader_epoch"] = partition.leader_epoch if offset >= 0 else -1
            if version == 0:
                entry["old_style_offsets"] = [entry["offset"]] if entry["offset"] >= 0 else []
        topics.append({"name": t["name"], "partitions": partitions})
    response: ListOffsetsResponse = {"throttle_time_ms": 0, "topics": topics}
    if remote:
        return asyncio.ensure_future(_with_remote(ctx, remote, response, version))
    return response


async def _with_remote(ctx: ReplicaDeps, lookups: list[RemoteLookup], response: ListOffsetsResponse,
                       version: int) -> ListOffsetsResponse:
    """Timestamps in the remote part of tiered partitions: searched on the remote-read pool."""
    assert ctx.remote is not None
    results = await asyncio.gather(*(ctx.remote.offset_for_timestamp(topic, index, ts, start)
                                     for _, topic, index, ts, start, _ in lookups), return_exceptions=True)
    for (entry, topic, index, *_rest, epoch), found in zip(lookups, results, strict=True):
        if isinstance(found, BaseException):
            log.warning("remote ListOffsets of %s-%d failed: %r", topic, index, found)
            entry.update({"error_code": ErrorCode.KAFKA_STORAGE_ERROR, "offset": -1, "timestamp": -1,
                          "leader_epoch": -1})
        elif found is not None:
            entry.update({"offset": found[0], "timestamp": found[1], "leader_epoch": epoch})
        if version == 0:
            entry["old_style_offsets"] = [entry["offset"]] if entry["offset"] >= 0 else []
    return response
