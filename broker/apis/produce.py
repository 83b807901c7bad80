"""Produce: check Write on each topic (TOPIC_AUTHORIZATION_FAILED per partition), validate acks, append each
partition's batches, answer (or stay silent for acks=0).

acks=all (-1) answers once the high watermark has passed every appended partition's last offset: the request
waits in the produce purgatory (Kafka's DelayedProduce), watched by its partitions, and is re-checked whenever
their HW moves or their leadership changes. At ``timeout_ms`` the partitions still waiting answer
REQUEST_TIMED_OUT. A partition whose ISR shrank below min.insync.replicas while waiting answers
NOT_ENOUGH_REPLICAS_AFTER_APPEND (the data is written, but not as durably as asked).
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from moldau.broker.apis.context import ReplicaDeps
from moldau.broker.purgatory import DelayedOperation
from moldau.broker.request_channel import Reply, Request
from moldau.broker.security.acl import Operation, ResourceType
from moldau.protocol.errors import ErrorCode
from moldau.protocol.records import ATTRIBUTES_OFFSET, TRANSACTIONAL_MASK

if TYPE_CHECKING:  # the message shapes are for mypy only: zero cost at run time
    from moldau.broker.replica_manager import AppendResult
    from moldau.protocol.typed import (
        ProduceRequest,
        ProduceResponse,
        ProduceResponseResponses,
        ProduceResponseResponsesPartitionResponses,
    )

# One partition's answer while it waits: (entry of the response, offset the HW must reach).
Waiting: TypeAlias = "list[tuple[str, ProduceResponseResponsesPartitionResponses, int]]"


def _check(ctx: ReplicaDeps, topic: str, entry: ProduceResponseResponsesPartitionResponses, required: int
           ) -> bool:
    """True once the partition's outcome is known; sets its error code then."""
    partition = ctx.replica_manager.get_partition(topic, entry["index"])
    if partition is None or not partition.is_leader:
        entry["error_code"] = ErrorCode.NOT_LEADER_OR_FOLLOWER
        return True
    if partition.high_watermark >= required:
        if len(partition.isr) < partition.min_insync_replicas:
            entry["error_code"] = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return True
    return False


class DelayedProduce(DelayedOperation):
    """An acks=all request waiting for the high watermark of each of its partitions. The partitions are settled in
    request order and a check stops at the first one still waiting, so the n wake-ups of a follower fetch that
    moves the HW of n partitions cost O(n) in all; re-checking every partition at each wake-up made a request
    over 3,333 partitions cost 3,333^2 checks per follower fetch.

    For the same reason the request watches only the partition it waits for (``waiting[_settled]``): nothing
    that happens to a later partition can complete it before that one is settled, and once it is, the check
    goes on from there (reading each later partition's state as it is then) and watches the next one still
    waiting (``Purgatory.rewatch``). Watching every partition cost a watch list entry per partition, made at
    the append and dropped at the completion, in every request."""

    __slots__ = ("ctx", "waiting", "response", "future", "_settled", "_watching")

    def __init__(self, ctx: ReplicaDeps, timeout_ms: int, waiting: Waiting, response: ProduceResponse,
                 future: asyncio.Future[Any]) -> None:
        super().__init__(timeout_ms)
        self.ctx = ctx
        self.waiting = waiting
        self.response = response
        self.future = future
        self._settled = 0  # waiting[:_settled] have their outcome
        self._watching = 0  # the watched partition is waiting[_watching]'s (once in the purgatory)

    def key(self, i: int) -> tuple[str, int]:
        """The watch key of ``waiting[i]``: its topic-partition."""
        name, entry, _ = self.waiting[i]
        return name, entry["index"]

    def try_complete(self) -> bool:
        if self.future.done():  # the client went away
            return self.force_complete()
        waiting, i = self.waiting, self._settled
        while i < len(waiting) and _check(self.ctx, *waiting[i]):
            i += 1
        self._settled = i
        if i == len(waiting):
            return self.force_complete()
        purgatory = self._purgatory
        if purgatory is not None and i != self._watching:  # settled up to another partition: watch that one
            self._watching = i
            purgatory.rewatch(self, [self.key(i)])
        return False

    def threshold(self, key: Hashable) -> int | None:
        i = self._watching
        return self.waiting[i][2] if i < len(self.waiting) and key == self.key(i) else None

    def blocked_on(self, key: Hashable) -> bool:
        """Still waiting for this partition's high watermark (not for a leadership change or another
        partition): the produce purgatory then skips the later watchers of the partition."""
        required = self.threshold(key)
        if required is None:
            return False
        topic, index = cast("tuple[str, int]", key)
        partition = self.ctx.replica_manager.get_partition(topic, index)
        return partition is not None and partition.is_leader and partition.high_watermark < required

    def on_complete(self) -> None:
        for name, entry, required in self.waiting[self._settled:]:
            if not _check(self.ctx, name, entry, required):  # the ones behind the first waiting may be done
                entry["error_code"] = ErrorCode.REQUEST_TIMED_OUT
                entry["base_offset"] = -1
        if not self.future.done():
            self.future.set_result(self.response)


def _transactional(body: ProduceRequest) -> bool:
    """Whether any partition's first batch is transactional (one attributes byte per partition, as Kafka)."""
    for t in body["topic_data"]:
        for p in t["partition_data"]:
            records = p["records"]
            if isinstance(records, (bytes, bytearray, memoryview)) and len(records) > ATTRIBUTES_OFFSET + 1 \
                    and records[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_MASK:
                return True
    return False


def _writable(ctx: ReplicaDeps, request: Request, body: ProduceRequest) -> tuple[set[str], ErrorCode]:
    """The request's topics the principal may write: Write on each topic (one decision per topic). Transactional
    records need a transactional id with Write on it, else every partition answers
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED (Kafka's handleProduceRequest)."""
    names = [t["name"] for t in body["topic_data"]]
    if _transactional(body):
        txn = body.get("transactional_id")
        if txn is None or not ctx.auth.allowed(request, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, txn):
            return set(), ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    return ctx.auth.allowed_names(request, Operation.WRITE, ResourceType.TOPIC, names), ErrorCode.NONE


def _refused(index: int, error: ErrorCode) -> ProduceResponseResponsesPartitionResponses:
    return {"index": index, "error_code": error, "base_offset": -1, "log_append_time_ms": -1, "log_start_offset": -1}


def _refusal(name: str, writable: set[str], refused: ErrorCode, valid_acks: bool) -> ErrorCode:
    """Why a partition of the request is not appended at all (NONE: it is)."""
    if name not in writable:
        return refused or ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return ErrorCode.NONE if valid_acks else ErrorCode.INVALID_REQUIRED_ACKS


def _appended(index: int, r: AppendResult) -> ProduceResponseResponsesPartitionResponses:
    return {"index": index, "error_code": r.error, "base_offset": r.base_offset,
            "log_append_time_ms": r.log_append_time, "log_start_offset": r.log_start_offset,
            "record_errors": [{"batch_index": i, "batch_index_error_message": m} for i, m in r.record_errors]
            if r.record_errors else [],
            "error_message": r.message}


def _answer(ctx: ReplicaDeps, request: Request, body: ProduceRequest, responses: list[ProduceResponseResponses],
            waiting: Waiting, failed: bool) -> ProduceResponse | asyncio.Future[ProduceResponse] | None:
    """The request's answer once its partitions are appended: none for acks=0, the response, or (acks=all with
    partitions still waiting for their high watermark) a future the produce purgatory completes."""
    if body["acks"] == 0:
        # No response for acks=0; on failure Kafka closes the connection so the client notices.
        if failed:
            request.close_connection = True
        return None
    response: ProduceResponse = {"responses": responses, "throttle_time_ms": 0}
    if not waiting:
        return response
    future: Reply[ProduceResponse] = Reply()
    op = DelayedProduce(ctx, body["timeout_ms"], waiting, response, future)
    ctx.produce_purgatory.try_complete_else_watch(op, [op.key(0)])  # the first partition: see DelayedProduce
    return future


def handle_produce(ctx: ReplicaDeps, request: Request, body: ProduceRequest
                   ) -> ProduceResponse | asyncio.Future[ProduceResponse] | None:
    acks = body["acks"]
    valid_acks = acks in (-1, 0, 1)
    responses: list[ProduceResponseResponses] = []
    waiting: Waiting = []
    failed = False
    writable, refused = _writable(ctx, request, body)
    for t in body["topic_data"]:
        name = t["name"]
        partitions: list[ProduceResponseResponsesPartitionResponses] = []
        for p in t["partition_data"]:
            error = _refusal(name, writable, refused, valid_acks)
            if error:
                partitions.append(_refused(p["index"], error))
                failed = True
                continue
            r = ctx.replica_manager.append(name, p["index"], p["records"], acks)
            failed = failed or r.error != ErrorCode.NONE
            entry = _appended(p["index"], r)
            partitions.append(entry)
            if acks == -1 and r.error == ErrorCode.NONE and not _check(ctx, name, entry, r.last_offset + 1):
                waiting.append((name, entry, r.last_offset + 1))
        responses.append({"name": name, "partition_responses": partitions})
    return _answer(ctx, request, body, responses, waiting, failed)


# One partition's append of one request: (request's position in the group, topic, the request's list of partition
# answers and the place of this one in it, records, acks).
_Slot: TypeAlias = "tuple[int, str, list[ProduceResponseResponsesPartitionResponses], int, Any, int]"


def handle_produce_many(ctx: ReplicaDeps, items: list[tuple[Request, ProduceRequest]]
                        ) -> list[ProduceResponse | asyncio.Future[ProduceResponse] | None]:
    """Several Produce requests of one connection, in the order they came (issue #21): each partition's records
    from all of them are appended with one log append (``ReplicaManager.append_many``: every request still gets
    the answer it would have had alone, with its own offsets and errors; producer sequences are checked in
    request order), then each request answers (or waits for acks=all) on its own, as ``handle_produce``."""
    slots: dict[tuple[str, int], list[_Slot]] = {}
    plans: list[tuple[list[ProduceResponseResponses], Waiting]] = []
    failed = [False] * len(items)
    for k, (request, body) in enumerate(items):
        acks = body["acks"]
        valid_acks = acks in (-1, 0, 1)
        responses: list[ProduceResponseResponses] = []
        writable, refused = _writable(ctx, request, body)
        for t in body["topic_data"]:
            name = t["name"]
            partitions: list[ProduceResponseResponsesPartitionResponses] = []
            for p in t["partition_data"]:
                error = _refusal(name, writable, refused, valid_acks)
                if error:
                    partitions.append(_refused(p["index"], error))
                    failed[k] = True
                    continue
                key = (name, p["index"])
                slot = (k, name, partitions, len(partitions), p["records"], acks)
                if key in slots:
                    slots[key].append(slot)
                else:
                    slots[key] = [slot]
                partitions.append(None)  # type: ignore[arg-type]  # the append's answer, below
            responses.append({"name": name, "partition_responses": partitions})
        plans.append((responses, []))
    rm = ctx.replica_manager
    for (name, index), group in slots.items():
        if len(group) == 1:
            results = [rm.append(name, index, group[0][4], group[0][5])]
        else:
            results = rm.append_many(name, index, [s[4] for s in group], [s[5] for s in group])
        for (k, _, partitions, at, _, acks), r in zip(group, results):
            entry = partitions[at] = _appended(index, r)
            if r.error != ErrorCode.NONE:
                failed[k] = True
            elif acks == -1 and not _check(ctx, name, entry, r.last_offset + 1):
                plans[k][1].append((name, entry, r.last_offset + 1))
    return [_answer(ctx, request, body, responses, waiting, failed[k])
            for k, ((request, body), (responses, waiting)) in enumerate(zip(items, plans))]
