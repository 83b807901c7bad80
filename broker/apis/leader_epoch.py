"""OffsetForLeaderEpoch (KIP-101/279/320): the end offset of a leader epoch in the leader's log.

Followers ask it for the latest epoch in their own log to find where they diverge from the leader; consumers
ask it to validate their position after a leader change. The answer is the largest epoch <= the requested one
that the leader knows and the offset where the next epoch starts (its log end offset for the current epoch).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.broker.apis.context import ReplicaDeps
from moldau.broker.request_channel import Request
from moldau.broker.security.acl import Operation, ResourceType
from moldau.protocol.errors import ErrorCode

if TYPE_CHECKING:  # the message shapes are for mypy only: zero cost at run time
    from moldau.protocol.typed import (
        OffsetForLeaderEpochRequest,
        OffsetForLeaderEpochResponse,
        OffsetForLeaderEpochResponseTopics,
        OffsetForLeaderEpochResponseTopicsPartitions,
    )


def handle_offset_for_leader_epoch(ctx: ReplicaDeps, request: Request, body: OffsetForLeaderEpochRequest
                                   ) -> OffsetForLeaderEpochResponse:
    topics: list[OffsetForLeaderEpochResponseTopics] = []
    # Followers (replica_id >= 0, v3+) need ClusterAction; consumers Describe on each topic (Kafka's rules).
    if body.get("replica_id", -1) >= 0 and not ctx.auth.cluster(request, Operation.CLUSTER_ACTION):
        described: set[str] = set()
    else:
        described = ctx.auth.allowed_names(request, Operation.DESCRIBE, ResourceType.TOPIC,
                                           (t["topic"] for t in body["topics"]))
    for t in body["topics"]:
        partitions: list[OffsetForLeaderEpochResponseTopicsPartitions] = []
        for p in t["partitions"]:
            entry: OffsetForLeaderEpochResponseTopicsPartitions = {"partition": p["partition"],
                                                                   "error_code": ErrorCode.NONE,
                                                                   "leader_epoch": -1, "end_offset": -1}
            partitions.append(entry)
            if t["topic"] not in described:
                entry["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            partition, error = ctx.replica_manager.leader_partition(t["topic"], p["partition"])
            if partition is None:
                entry["error_code"] = error
                continue
            current = p["current_leader_epoch"]
            if current >= 0 and current != partition.leader_epoch:
                entry["error_code"] = (ErrorCode.FENCED_LEADER_EPOCH if current < partition.leader_epoch
                                       else ErrorCode.UNKNOWN_LEADER_EPOCH)
                continue
            entry["leader_epoch"], entry["end_offset"] = partition.end_offset_for_epoch(p["leader_epoch"])
        topics.append({"topic": t["topic"], "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
