"""DescribeProducers (61, KIP-664): the active producers of partitions led here, from their producer state --
producer id and epoch, last sequence and timestamp, the coordinator epoch of the last marker, and the first offset
of the open transaction (-1 without one; a transaction that pins the last stable offset shows up here).

Read on the topic, else TOPIC_AUTHORIZATION_FAILED; UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER (only the
leader's state is authoritative), KAFKA_STORAGE_ERROR for a partition on a failed log dir, as Kafka.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.broker.apis.context import ReplicaDeps
from moldau.broker.request_channel import Request
from moldau.broker.security.acl import Operation, ResourceType
from moldau.protocol.errors import ErrorCode

if TYPE_CHECKING:  # the message shapes are for mypy only: zero cost at run time
    from moldau.protocol.typed import (
        DescribeProducersRequest,
        DescribeProducersResponse,
        DescribeProducersResponseTopics,
        DescribeProducersResponseTopicsPartitions,
        DescribeProducersResponseTopicsPartitionsActiveProducers,
    )


def handle_describe_producers(ctx: ReplicaDeps, request: Request, body: DescribeProducersRequest
                              ) -> DescribeProducersResponse:
    readable = ctx.auth.allowed_names(request, Operation.READ, ResourceType.TOPIC, (t["name"] for t in body["topics"]))
    topics: list[DescribeProducersResponseTopics] = []
    for t in body["topics"]:
        partitions: list[DescribeProducersResponseTopicsPartitions] = []
        for index in t["partition_indexes"]:
            entry: DescribeProducersResponseTopicsPartitions = {
                "partition_index": index, "error_code": ErrorCode.NONE, "error_message": None, "active_producers": []}
            partitions.append(entry)
            if t["name"] not in readable:
                entry["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            partition, error = ctx.replica_manager.leader_partition(t["name"], index)
            if partition is None:
                entry["error_code"] = error
                continue
            active: list[DescribeProducersResponseTopicsPartitionsActiveProducers] = [
                {"producer_id": p.producer_id, "producer_epoch": p.producer_epoch, "last_sequence": p.last_seq,
                 "last_timestamp": p.last_timestamp, "coordinator_epoch": p.coordinator_epoch,
                 "current_txn_start_offset": p.current_txn_first_offset}
                for p in partition.active_producers()]
            entry["active_producers"] = active
        topics.append({"name": t["name"], "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
