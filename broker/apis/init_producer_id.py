"""InitProducerId for idempotent producers (transactions come later). With an authorizer it needs IdempotentWrite
on the cluster or, as Kafka 2.8+ allows (KIP-679), Write on some topic (else CLUSTER_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.broker.apis.context import ProducerIdDeps
from moldau.broker.producer_ids import ProducerIdsUnavailable
from moldau.broker.request_channel import Request
from moldau.broker.security.acl import Operation
from moldau.protocol.errors import ErrorCode

if TYPE_CHECKING:  # the message shapes are for mypy only: zero cost at run time
    from moldau.protocol.typed import (
        InitProducerIdRequest,
        InitProducerIdResponse,
    )

MAX_EPOCH = 32767


def handle_init_producer_id(ctx: ProducerIdDeps, request: Request, body: InitProducerIdRequest
                            ) -> InitProducerIdResponse:
    if body["transactional_id"] is None and not (ctx.auth.cluster(request, Operation.IDEMPOTENT_WRITE)
                                                 or ctx.auth.may_write_some_topic(request)):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "producer_id": -1, "producer_epoch": -1}
    if body["transactional_id"] is not None:
        # No transaction coordinator yet: refuse clearly rather than pretend.
        return {"throttle_time_ms": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "producer_id": -1, "producer_epoch": -1}
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
