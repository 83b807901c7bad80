"""InitProducerId. Idempotent producers (no transactional id): with an authorizer it needs IdempotentWrite on the
cluster or, as Kafka 2.8+ allows (KIP-679), Write on some topic (else CLUSTER_AUTHORIZATION_FAILED).
Transactional producers: Write on the TransactionalId (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then the
transaction coordinator (epoch bump, fencing; broker/coordinator/txn_coordinator.py)."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from moldau.broker.apis.context import ProducerIdDeps
from moldau.broker.producer_ids import ProducerIdsUnavailable
from moldau.broker.request_channel import Request
from moldau.broker.security.acl import Operation, ResourceType
from moldau.protocol.errors import ErrorCode

if TYPE_CHECKING:  # the message shapes are for mypy only: zero cost at run time
    from moldau.protocol.typed import (
        InitProducerIdRequest,
        InitProducerIdResponse,
    )

MAX_EPOCH = 32767


async def _transactional(ctx: ProducerIdDeps, request: Request, body: InitProducerIdRequest
                         ) -> InitProducerIdResponse:
    tid = body["transactional_id"]
    assert tid is not None
    if not ctx.auth.allowed(request, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
        error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif ctx.transactions is None:
        error = ErrorCode.COORDINATOR_NOT_AVAILABLE
    else:
        producer_id, epoch = body.get("producer_id", -1), body.get("producer_epoch", -1)
        expected = (producer_id, epoch) if producer_id >= 0 else None
        error, producer_id, epoch = await ctx.transactions.init_producer_id(tid, body["transaction_timeout_ms"],
                                                                            expected)
        if error == ErrorCode.NONE:
            return {"throttle_time_ms": 0, "error_code": error, "producer_id": producer_id, "producer_epoch": epoch}
        if error == ErrorCode.PRODUCER_FENCED and request.version < 4:
            error = ErrorCode.INVALID_PRODUCER_EPOCH  # PRODUCER_FENCED is new in v4 (KIP-588)
    return {"throttle_time_ms": 0, "error_code": error, "producer_id": -1, "producer_epoch": -1}


def handle_init_producer_id(ctx: ProducerIdDeps, request: Request, body: InitProducerIdRequest
                            ) -> InitProducerIdResponse | Coroutine[Any, Any, InitProducerIdResponse]:
    if body["transactional_id"] is None and not (ctx.auth.cluster(request, Operation.IDEMPOTENT_WRITE)
                                                 or ctx.auth.may_write_some_topic(request)):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "producer_id": -1, "producer_epoch": -1}
    if body["transactional_id"] is not None:
        return _transactional(ctx, request, body)
    producer_id, epoch = body.get("producer_id", -1), body.get("producer_epoch", -1)
    if producer_id >= 0 and 0 <= epoch < MAX_EPOCH - 1:
        # KIP-360: an idempotent producer may bump its own epoch to reset its sequences.
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": producer_id,
                "producer_epoch": epoch + 1}
    try:
        producer_id = ctx.source.next_id()
    except ProducerIdsUnavailable:  # ZooKeeper mode, block not fetched yet: retriable
        return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, "producer_id": -1,
                "producer_epoch": -1}
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": producer_id, "producer_epoch": 0}
