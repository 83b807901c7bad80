"""LeaderAndIsr, UpdateMetadata, StopReplica (controller -> broker) and ControlledShutdown (broker -> controller).

Fencing is the cluster's (``ClusterControl.fence``, see broker/zk_mode.py): a request from a controller epoch lower
than the highest this broker has seen is refused with STALE_CONTROLLER_EPOCH (a zombie controller), and one
addressed to an earlier registration of this broker (its broker epoch, the czxid of /brokers/ids/<id>, is older
than ours) with STALE_BROKER_EPOCH. A standalone broker (no ZooKeeper, no controller) answers all of them with
NOT_CONTROLLER.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from moldau.broker.apis.context import ControlDeps
from moldau.broker.controller import requests as R
from moldau.broker.log_summary import partition_examples
from moldau.broker.metadata import PartitionState
from moldau.broker.request_channel import Request
from moldau.broker.security.acl import Operation
from moldau.protocol.errors import ErrorCode
from moldau.protocol.types import TopicPartition

if TYPE_CHECKING:  # the message shapes are for mypy only: zero cost at run time
    from moldau.protocol.typed import (
        ControlledShutdownRequest,
        ControlledShutdownResponse,
        LeaderAndIsrRequest,
        LeaderAndIsrResponse,
        LeaderAndIsrResponseTopicsPartitionErrors,
        StopReplicaRequest,
        StopReplicaResponse,
        StopReplicaResponsePartitionErrors,
        UpdateMetadataRequest,
        UpdateMetadataResponse,
    )

log = logging.getLogger("moldau.apis.inter_broker")


def _fence(ctx: ControlDeps, request: Request, body: Mapping[str, Any]) -> ErrorCode:
    if not ctx.auth.cluster(request, Operation.CLUSTER_ACTION):  # only brokers (super users) may send these
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return ctx.cluster.fence(body["controller_id"], body["controller_epoch"], body.get("broker_epoch", -1))


async def handle_leader_and_isr(ctx: ControlDeps, request: Request, body: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
    error = _fence(ctx, request, body)
    results: list[tuple[str, bytes | None, int, ErrorCode]] = []
    states = list(R.partition_states(body))
    if error == ErrorCode.NONE:
        # Every topic's config first, read side by side; then the states are applied without a pause in between,
        # so no request sees this broker halfway through a LeaderAndIsr (a read per topic in the loop made
        # 11 round trips, and the loop served fetches in between, after a broker death at 10,000 partitions).
        topics = list(dict.fromkeys(topic for topic, _, _ in states))
        configs = dict(zip(topics, await asyncio.gather(*(ctx.cluster.topic_configs(t) for t in topics))))
        became: dict[str, list[TopicPartition]] = {}
        for topic, topic_id, s in states:
            state = PartitionState(s["partition_index"], s["leader"], s["leader_epoch"], list(s["replicas"]),
                                   list(s["isr"]), zk_version=s["partition_epoch"],
                                   controller_epoch=s["controller_epoch"])
            code = ctx.replica_manager.become_leader_or_follower(topic, state, configs[topic], became)
            results.append((topic, topic_id, s["partition_index"], code))
        led = sum(1 for t, _, s in states if s["leader"] == ctx.broker_id)
        # One line per request; each partition's change is logged at DEBUG by the replica manager.
        changes = "".join(f"; {role} now: {len(tps)} partitions ({partition_examples(tps)})"
                          for role, tps in sorted(became.items()))
        log.info("LeaderAndIsr from controller %d (epoch %d): %d partitions, %d led here%s", body["controller_id"],
                 body["controller_epoch"], len(states), led, changes)
    else:
        results = [(t, tid, s["partition_index"], error) for t, tid, s in states]
    by_id: dict[bytes, list[LeaderAndIsrResponseTopicsPartitionErrors]] = {}
    for _, topic_id, index, code in results:
        by_id.setdefault(topic_id or bytes(16), []).append({"partition_index": index, "error_code": code})
    return {"error_code": error,
            "partition_errors": [{"topic_name": t, "partition_index": i, "error_code": c} for t, _, i, c in results],
            "topics": [{"topic_id": tid, "partition_errors": errs} for tid, errs in by_id.items()]}


def handle_update_metadata(ctx: ControlDeps, request: Request, body: UpdateMetadataRequest) -> UpdateMetadataResponse:
    error = _fence(ctx, request, body)
    if error == ErrorCode.NONE:
        ctx.cluster.apply_update_metadata(body)
    return {"error_code": error}


def handle_stop_replica(ctx: ControlDeps, request: Request, body: StopReplicaRequest) -> StopReplicaResponse:
    error = _fence(ctx, request, body)
    partitions = list(R.stop_replica_partitions(body))
    out: list[StopReplicaResponsePartitionErrors] = []
    for topic, index, delete in partitions:
        code = error if error != ErrorCode.NONE else ctx.replica_manager.stop_replica(topic, index, delete)
        out.append({"topic_name": topic, "partition_index": index, "error_code": code})
    if error == ErrorCode.NONE and partitions:
        log.info("StopReplica from controller %d: %d partitions (delete: %s)", body["controller_id"],
                 len(partitions), any(d for _, _, d in partitions))
    return {"error_code": error, "partition_errors": out}


async def handle_controlled_shutdown(ctx: ControlDeps, request: Request, body: ControlledShutdownRequest
                                     ) -> ControlledShutdownResponse:
    if not ctx.auth.cluster(request, Operation.CLUSTER_ACTION):
        return {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "remaining_partitions": []}
    error, remaining = await ctx.cluster.controlled_shutdown(body["broker_id"], body.get("broker_epoch", -1))
    return {"error_code": error,
            "remaining_partitions": [{"topic_name": t, "partition_index": p} for t, p in remaining]}
