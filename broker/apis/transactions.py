"""The transaction coordinator's APIs: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions,
ListTransactions (InitProducerId with a transactional id is in init_producer_id.py; FindCoordinator key type 1 in
group.py), and TxnOffsetCommit, which the group coordinator answers (offsets pending until the transaction's
marker; broker/coordinator/offsets.py).

ACLs as Kafka decides them: the producer APIs need Write on the TransactionalId (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED); AddPartitionsToTxn also Write on every topic (refused topics answer
TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED), AddOffsetsToTxn also Read on the group.
TxnOffsetCommit needs Write on the TransactionalId, Read on the group and Read on each topic.
DescribeTransactions needs Describe on each id; ListTransactions lists only the ids the principal may Describe.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.broker.apis.context import TxnDeps
from moldau.broker.coordinator.group import OffsetAndMetadata
from moldau.broker.coordinator.txn_metadata import TxnState
from moldau.broker.request_channel import Request
from moldau.broker.security.acl import Operation, ResourceType
from moldau.protocol.errors import ErrorCode
from moldau.protocol.types import TopicPartition

if TYPE_CHECKING:  # the message shapes are for mypy only: zero cost at run time
    from moldau.protocol.typed import (
        AddOffsetsToTxnRequest,
        AddOffsetsToTxnResponse,
        AddPartitionsToTxnRequest,
        AddPartitionsToTxnResponse,
        AddPartitionsToTxnResponseResultsByTopicV3AndBelow,
        AddPartitionsToTxnResponseResultsByTransaction,
        DescribeTransactionsRequest,
        DescribeTransactionsResponse,
        DescribeTransactionsResponseTransactionStates,
        EndTxnRequest,
        EndTxnResponse,
        ListTransactionsRequest,
        ListTransactionsResponse,
        TxnOffsetCommitRequest,
        TxnOffsetCommitResponse,
    )

OFFSETS_TOPIC = "__consumer_offsets"


def fenced_for_version(error: ErrorCode, version: int, first_with_fenced: int) -> ErrorCode:
    """PRODUCER_FENCED is new (KIP-588) in InitProducerId v4 and AddPartitionsToTxn/AddOffsetsToTxn/EndTxn v2;
    older requests hear INVALID_PRODUCER_EPOCH, as Kafka answers them."""
    return ErrorCode.INVALID_PRODUCER_EPOCH if error == ErrorCode.PRODUCER_FENCED and version < first_with_fenced \
        else error


def _may_write_id(ctx: TxnDeps, request: Request, transactional_id: str) -> bool:
    return ctx.auth.allowed(request, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)


def _by_topic(results: dict[TopicPartition, ErrorCode]) -> list[AddPartitionsToTxnResponseResultsByTopicV3AndBelow]:
    topics: dict[str, list[tuple[int, ErrorCode]]] = {}
    for (topic, partition), error in results.items():
        topics.setdefault(topic, []).append((partition, error))
    return [{"name": t, "results_by_partition": [{"partition_index": p, "partition_error_code": e} for p, e in ps]}
            for t, ps in topics.items()]


async def _add_partitions(ctx: TxnDeps, request: Request, transactional_id: str, producer_id: int, epoch: int,
                          wanted: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
    if not _may_write_id(ctx, request, transactional_id):
        return {tp: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED for tp in wanted}
    if not wanted:
        return {}  # nothing to add: the transaction's state stays as it is
    topics = {t for t, _ in wanted}
    writable = ctx.auth.allowed_names(request, Operation.WRITE, ResourceType.TOPIC, topics)
    refused: dict[TopicPartition, ErrorCode] = {}
    for topic, partition in wanted:
        meta = ctx.metadata.topic(topic)
        if topic not in writable:
            refused[(topic, partition)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif meta is None or partition not in meta.partitions:
            refused[(topic, partition)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if refused:
        return {tp: refused.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in wanted}
    error = await ctx.coordinator.add_partitions(transactional_id, producer_id, epoch, set(wanted))
    error = fenced_for_version(error, request.version, 2)
    return {tp: error for tp in wanted}


async def handle_add_partitions_to_txn(ctx: TxnDeps, request: Request, body: AddPartitionsToTxnRequest
                                       ) -> AddPartitionsToTxnResponse:
    if request.version >= 4:
        return await _add_partitions_batched(ctx, request, body)
    wanted = [(t["name"], p) for t in body["v3_and_below_topics"] for p in t["partitions"]]
    results = await _add_partitions(ctx, request, body["v3_and_below_transactional_id"],
                                    body["v3_and_below_producer_id"], body["v3_and_below_producer_epoch"], wanted)
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results_by_transaction": [],
            "results_by_topic_v3_and_below": _by_topic(results)}


async def _add_partitions_batched(ctx: TxnDeps, request: Request, body: AddPartitionsToTxnRequest
                                  ) -> AddPartitionsToTxnResponse:
    """v4+: several transactions, sent by brokers (ClusterAction on the cluster); with verify_only, the check of
    KIP-890 part 1 (are these partitions in the producer's ongoing transaction?)."""
    if not ctx.auth.cluster(request, Operation.CLUSTER_ACTION):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "results_by_transaction": [], "results_by_topic_v3_and_below": []}
    results: list[AddPartitionsToTxnResponseResultsByTransaction] = []
    for txn in body["transactions"]:
        wanted = [(t["name"], p) for t in txn["topics"] for p in t["partitions"]]
        if txn["verify_only"]:
            by_tp = ctx.coordinator.verify_partitions(txn["transactional_id"], txn["producer_id"],
                                                      txn["producer_epoch"], wanted)
        else:
            by_tp = await _add_partitions(ctx, request, txn["transactional_id"], txn["producer_id"],
                                          txn["producer_epoch"], wanted)
        results.append({"transactional_id": txn["transactional_id"], "topic_results": _by_topic(by_tp)})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results_by_transaction": results,
            "results_by_topic_v3_and_below": []}


async def handle_add_offsets_to_txn(ctx: TxnDeps, request: Request, body: AddOffsetsToTxnRequest
                                    ) -> AddOffsetsToTxnResponse:
    tid = body["transactional_id"]
    if not _may_write_id(ctx, request, tid):
        error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not ctx.auth.allowed(request, Operation.READ, ResourceType.GROUP, body["group_id"]):
        error = ErrorCode.GROUP_AUTHORIZATION_FAILED
    else:
        partition = (OFFSETS_TOPIC, ctx.offsets_partition_for(body["group_id"]))
        error = await ctx.coordinator.add_partitions(tid, body["producer_id"], body["producer_epoch"], {partition})
        error = fenced_for_version(error, request.version, 2)
    return {"throttle_time_ms": 0, "error_code": error}


async def handle_end_txn(ctx: TxnDeps, request: Request, body: EndTxnRequest) -> EndTxnResponse:
    tid = body["transactional_id"]
    if not _may_write_id(ctx, request, tid):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    error = await ctx.coordinator.end_transaction(tid, body["producer_id"], body["producer_epoch"], body["committed"])
    return {"throttle_time_ms": 0, "error_code": fenced_for_version(error, request.version, 2)}


async def handle_txn_offset_commit(ctx: TxnDeps, request: Request, body: TxnOffsetCommitRequest
                                   ) -> TxnOffsetCommitResponse:
    group_id = body["group_id"]
    wanted = [(t["name"], p) for t in body["topics"] for p in t["partitions"]]
    errors: dict[TopicPartition, ErrorCode] = {}
    if not _may_write_id(ctx, request, body["transactional_id"]):
        errors = {(t, p["partition_index"]): ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED for t, p in wanted}
    elif not ctx.auth.allowed(request, Operation.READ, ResourceType.GROUP, group_id):
        errors = {(t, p["partition_index"]): ErrorCode.GROUP_AUTHORIZATION_FAILED for t, p in wanted}
    else:
        now = ctx.clock.time_ms()
        readable = ctx.auth.allowed_names(request, Operation.READ, ResourceType.TOPIC, {t for t, _ in wanted})
        offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        for topic, p in wanted:
            tp = (topic, p["partition_index"])
            meta = ctx.metadata.topic(topic)
            if topic not in readable:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif meta is None or tp[1] not in meta.partitions:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                metadata = p["committed_metadata"]
                offsets[tp] = OffsetAndMetadata(p["committed_offset"], p["committed_leader_epoch"],
                                                "" if metadata is None else metadata, now)
        coordinator = ctx.group_coordinator
        if not coordinator.active:
            errors.update({tp: ErrorCode.COORDINATOR_NOT_AVAILABLE for tp in offsets})
        elif offsets:
            committed = coordinator.commit_txn_offsets(group_id, body["producer_id"], body["producer_epoch"],
                                                       body["member_id"], body["group_instance_id"],
                                                       body["generation_id"], offsets)
            if any(e == ErrorCode.NONE for e in committed.values()):
                # Answered once replicated (acks=all), as Kafka's coordinator does.
                store = coordinator.store
                error = await store.replicated(store.partition_for(group_id), ctx.offsets_commit_timeout_ms)
                if error != ErrorCode.NONE:
                    committed = {tp: error if e == ErrorCode.NONE else e for tp, e in committed.items()}
            errors.update(committed)
    if request.version < 3:  # PRODUCER_FENCED is new in v3 (KIP-588)
        errors = {tp: fenced_for_version(e, request.version, 3) for tp, e in errors.items()}
    return {"throttle_time_ms": 0, "topics": [
        {"name": t["name"], "partitions": [{"partition_index": p["partition_index"],
                                            "error_code": errors[(t["name"], p["partition_index"])]}
                                           for p in t["partitions"]]} for t in body["topics"]]}


def handle_describe_transactions(ctx: TxnDeps, request: Request, body: DescribeTransactionsRequest
                                 ) -> DescribeTransactionsResponse:
    states: list[DescribeTransactionsResponseTransactionStates] = []
    for tid in body["transactional_ids"]:
        entry: DescribeTransactionsResponseTransactionStates = {
            "error_code": ErrorCode.NONE, "transactional_id": tid, "transaction_state": "",
            "transaction_timeout_ms": 0, "transaction_start_time_ms": -1, "producer_id": -1, "producer_epoch": -1,
            "topics": []}
        if not ctx.auth.allowed(request, Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid):
            entry["error_code"] = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            states.append(entry)
            continue
        error, meta = ctx.coordinator.describe_transaction(tid)
        entry["error_code"] = error
        if meta is not None:
            topics: dict[str, list[int]] = {}
            for topic, partition in sorted(meta.partitions):
                topics.setdefault(topic, []).append(partition)
            describable = ctx.auth.allowed_names(request, Operation.DESCRIBE, ResourceType.TOPIC, topics)
            entry.update({"transaction_state": meta.state.display, "transaction_timeout_ms": meta.txn_timeout_ms,
                          "transaction_start_time_ms": meta.txn_start_timestamp, "producer_id": meta.producer_id,
                          "producer_epoch": meta.producer_epoch,
                          "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items() if t in describable]})
        states.append(entry)
    return {"throttle_time_ms": 0, "transaction_states": states}


def handle_list_transactions(ctx: TxnDeps, request: Request, body: ListTransactionsRequest
                             ) -> ListTransactionsResponse:
    filters = list(body["state_filters"])
    unknown = [s for s in filters if TxnState.from_display(s) is None]
    known = {s for s in filters if s not in unknown}
    duration = body["duration_filter"] if request.version >= 1 else -1
    error, metas = ctx.coordinator.list_transactions(known, set(body["producer_id_filters"]), duration)
    if filters and not known:
        metas = []  # only unknown states asked for: nothing matches
    visible = ctx.auth.allowed_names(request, Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                     [m.transactional_id for m in metas])
    return {"throttle_time_ms": 0, "error_code": error, "unknown_state_filters": unknown,
            "transaction_states": [{"transactional_id": m.transactional_id, "producer_id": m.producer_id,
                                    "transaction_state": m.state.display}
                                   for m in metas if m.transactional_id in visible]}
