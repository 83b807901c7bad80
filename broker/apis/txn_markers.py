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

from collections.abc import Awaitable
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


# One marker to write: (topic, the partition's answer entry, producer id, producer epoch, commit, coordinator epoch).
Marker = tuple[str, "WriteTxnMarkersResponseMarkersTopicsPartitions", int, int, bool, int]


def _append_all(ctx: TxnMarkerDeps, markers: list[Marker]) -> tuple[list[tuple[str, int, int]], list[Marker]]:
    """Appends every marker now, in order (the markers of one producer keep their order per partition); sets the
    error of those refused. Returns what to wait for: (topic, partition, offset) and the marker of each."""
    rm = ctx.replica_manager
    waits: list[tuple[str, int, int]] = []
    waiting: list[Marker] = []
    for marker in markers:
        topic, entry, producer_id, producer_epoch, committed, coordinator_epoch = marker
        r = rm.append_marker(topic, entry["partition_index"], producer_id, producer_epoch, committed,
                             coordinator_epoch)
        if r.error != ErrorCode.NONE:
            entry["error_code"] = r.error
            continue
        waits.append((topic, entry["partition_index"], r.last_offset + 1))
        waiting.append(marker)
    return waits, waiting


async def _replicated(ctx: TxnMarkerDeps, waits: list[tuple[str, int, int]], waiting: list[Marker]) -> None:
    """Waits for the high watermarks to pass the appended markers, under one time-out; tells the listeners."""
    if not waits:
        return
    rm = ctx.replica_manager
    errors = await rm.wait_for_high_watermarks(waits, ctx.timeout_ms)
    for (topic, entry, producer_id, _, committed, _), error in zip(waiting, errors, strict=True):
        entry["error_code"] = error
        if error == ErrorCode.NONE:
            rm.transaction_marker_written(topic, entry["partition_index"], producer_id, committed)


async def _write_all(ctx: TxnMarkerDeps, markers: list[Marker]) -> None:
    """Appends every marker at once, then waits for their replication. No task per partition: a task started
    each append a turn of the event loop late and told the request a turn late again, twice on every
    transaction's way (its markers, and CompleteCommit after them)."""
    await _replicated(ctx, *_append_all(ctx, markers))


def write_markers_locally(ctx: TxnMarkerDeps, producer_id: int, producer_epoch: int, committed: bool,
                          coordinator_epoch: int, partitions: list[tuple[str, int]]
                          ) -> Awaitable[dict[tuple[str, int], int]]:
    """The markers of this broker's own transaction coordinator for the partitions this broker leads: the same
    writes as the handler's, without the request over the inter-broker listener (and its ClusterAction check:
    the coordinator is this broker). Appended when called; the awaitable gives each partition's error once
    they are replicated."""
    entries: dict[tuple[str, int], WriteTxnMarkersResponseMarkersTopicsPartitions] = {
        tp: {"partition_index": tp[1], "error_code": ErrorCode.NONE} for tp in partitions}
    appended = _append_all(ctx, [(tp[0], entry, producer_id, producer_epoch, committed, coordinator_epoch)
                                 for tp, entry in entries.items()])

    async def replicated() -> dict[tuple[str, int], int]:
        await _replicated(ctx, *appended)
        return {tp: entry["error_code"] for tp, entry in entries.items()}

    return replicated()


async def handle_write_txn_markers(ctx: TxnMarkerDeps, request: Request, body: WriteTxnMarkersRequest
                                   ) -> WriteTxnMarkersResponse:
    authorized = ctx.auth.cluster(request, Operation.CLUSTER_ACTION)
    markers: list[WriteTxnMarkersResponseMarkers] = []
    writes: list[Marker] = []
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
                    writes.append((t["name"], entry, m["producer_id"], m["producer_epoch"],
                                   m["transaction_result"], m["coordinator_epoch"]))
            topics.append({"name": t["name"], "partitions": partitions})
        markers.append({"producer_id": m["producer_id"], "topics": topics})
    if writes:
        await _write_all(ctx, writes)
    return {"markers": markers}
