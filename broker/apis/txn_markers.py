"""WriteTxnMarkers (27): a transaction coordinator tells partition leaders to end a producer's transaction.

For each marker and each partition: the leader appends a control batch (COMMIT or ABORT, the producer's id and
epoch, the coordinator epoch; ``Log.append_marker``), which ends the transaction in the producer state, adds an
abort to the ``.txnindex`` and lets the last stable offset move on. As Kafka's coordinator appends markers with
acks=all, the partition answers once the high watermark passed the marker (``request.timeout.ms`` at most:
REQUEST_TIMED_OUT), and only then are the registered ``txn_marker_listeners`` told (the group coordinator makes
the transaction's pending offset commits visible or drops them).

Errors per partition, as Kafka: CLUSTER_AUTHORIZATION_FAILED for all without ClusterAction on the cluster,
UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS (ISR below min.insync.replicas),
INVALID_PRODUCER_EPOCH (an epoch older than the partition's), TRANSACTION_COORDINATOR_FENCED (an older
coordinator epoch), KAFKA_STORAGE_ERROR, and NOT_ENOUGH_REPLICAS_AFTER_APPEND / REQUEST_TIMED_OUT from the wait.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from moldau.broker.replica_manager import ReplicaManager
from moldau.broker.request_channel import Request
from moldau.broker.security.acl import Operation
from moldau.broker.security.authorizer import NO_AUTHORIZER, Authorizer
from moldau.protocol.errors import ErrorCode

if TYPE_CHECKING:  # the message shapes are for mypy only: zero cost at run time
    from moldau.protocol.typed import (
        WriteTxnMarkersRequest,
        WriteTxnMarkersResponse,
        WriteTxnMarkersResponseMarkers,
        WriteTxnMarkersResponseMarkersTopics,
        WriteTxnMarkersResponseMarkersTopicsPartitions,
    )


@dataclass(slots=True)
class TxnMarkerDeps:
    """WriteTxnMarkers: the partitions (append and the high-watermark wait), the authorizer, the wait bound."""

    replica_manager: ReplicaManager
    auth: Authorizer = NO_AUTHORIZER
    timeout_ms: int = 30000  # request.timeout.ms, as Kafka's marker appends


async def _write(ctx: TxnMarkerDeps, topic: str, entry: WriteTxnMarkersResponseMarkersTopicsPartitions,
                 producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int) -> None:
    rm = ctx.replica_manager
    index = entry["partition_index"]
    r = rm.append_marker(topic, index, producer_id, producer_epoch, committed, coordinator_epoch)
    if r.error != ErrorCode.NONE:
        entry["error_code"] = r.error
        return
    error = await rm.wait_for_high_watermark(topic, index, r.last_offset + 1, ctx.timeout_ms)
    entry["error_code"] = error
    if error == ErrorCode.NONE:
        rm.transaction_marker_written(topic, index, producer_id, committed)


async def write_markers_locally(ctx: TxnMarkerDeps, producer_id: int, producer_epoch: int, committed: bool,
                                coordinator_epoch: int, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """The markers of this broker's own transaction coordinator for the partitions this broker leads: the same
    writes as the handler's, without the request over the inter-broker listener (and its ClusterAction check:
    the coordinator is this broker)."""
    entries: dict[tuple[str, int], WriteTxnMarkersResponseMarkersTopicsPartitions] = {
        tp: {"partition_index": tp[1], "error_code": ErrorCode.NONE} for tp in partitions}
    await asyncio.gather(*(_write(ctx, tp[0], entry, producer_id, producer_epoch, committed, coordinator_epoch)
                           for tp, entry in entries.items()))
    return {tp: entry["error_code"] for tp, entry in entries.items()}


async def handle_write_txn_markers(ctx: TxnMarkerDeps, request: Request, body: WriteTxnMarkersRequest
                                   ) -> WriteTxnMarkersResponse:
    authorized = ctx.auth.cluster(request, Operation.CLUSTER_ACTION)
    markers: list[WriteTxnMarkersResponseMarkers] = []
    writes = []
    for m in body["markers"]:
        topics: list[WriteTxnMarkersResponseMarkersTopics] = []
        for t in m["topics"]:
            partitions: list[WriteTxnMarkersResponseMarkersTopicsPartitions] = []
            for index in t["partition_indexes"]:
                entry: WriteTxnMarkersResponseMarkersTopicsPartitions = {
                    "partition_index": index,
                    "error_code": ErrorCode.NONE if authorized else ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
                partitions.append(entry)
                if authorized:
                    # Appended in request order (the markers of one producer keep their order per partition).
                    writes.append(_write(ctx, t["name"], entry, m["producer_id"], m["producer_epoch"],
                                         m["transaction_result"], m["coordinator_epoch"]))
            topics.append({"name": t["name"], "partitions": partitions})
        markers.append({"producer_id": m["producer_id"], "topics": topics})
    if writes:
        await asyncio.gather(*writes)
    return {"markers": markers}
