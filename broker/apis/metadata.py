"""Metadata: live brokers, the controller, topics with partition leaders/replicas/ISR; topic auto-creation.

With an authorizer, topics the principal may not Describe are left out of an all-topics answer and answered
TOPIC_AUTHORIZATION_FAILED when named; auto-creation needs Create on the cluster or on the topic. Asked for
(v8+), the authorized-operations bit fields (KIP-430) are filled from the ACLs; without an authorizer they stay
"unknown".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from moldau.broker.apis.context import TopicDeps
from moldau.broker.request_channel import EncodedBody, Request
from moldau.broker.security.acl import CLUSTER_NAME, Operation, ResourceType
from moldau.broker.topics import TopicCreationError, create_topic_with_defaults, topic_name_error
from moldau.protocol.errors import ErrorCode

if TYPE_CHECKING:  # the message shapes are for mypy only: zero cost at run time
    from moldau.protocol.typed import (
        MetadataRequest,
        MetadataResponse,
        MetadataResponseBrokers,
        MetadataResponseTopics,
        MetadataResponseTopicsPartitions,
    )

UNKNOWN_AUTHORIZED_OPERATIONS = -(1 << 31)
THROTTLE_VERSION = 3


def _topic_entry(ctx: TopicDeps, name: str, version: int, reachable: set[int]) -> MetadataResponseTopics:
    topic = ctx.metadata.topic(name)
    if topic is None:
        return {"error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "name": name, "partitions": [],
                "topic_authorized_operations": UNKNOWN_AUTHORIZED_OPERATIONS}
    live = {b.broker_id for b in ctx.metadata.live_brokers()}
    partitions: list[MetadataResponseTopicsPartitions] = []
    for p in sorted(topic.partitions.values(), key=lambda s: s.partition):
        offline = [r for r in p.replicas if r not in live]
        error = ErrorCode.NONE if p.leader in live else ErrorCode.LEADER_NOT_AVAILABLE
        if error == ErrorCode.NONE and p.leader not in reachable:
            error = ErrorCode.LISTENER_NOT_FOUND  # the leader has no endpoint on the client's listener
        partitions.append({"error_code": error, "partition_index": p.partition, "leader_id": p.leader,
                           "leader_epoch": p.leader_epoch, "replica_nodes": p.replicas, "isr_nodes": p.isr,
                           "offline_replicas": offline})
    return {"error_code": ErrorCode.NONE, "name": name, "topic_id": topic.topic_id,
            "is_internal": topic.is_internal, "partitions": partitions,
            "topic_authorized_operations": UNKNOWN_AUTHORIZED_OPERATIONS}


async def handle_metadata(ctx: TopicDeps, request: Request, body: MetadataRequest) -> MetadataResponse:
    version = request.version
    requested = body["topics"]
    if version == 0 and requested == []:
        requested = None  # v0: an empty list means every topic
    # Without an authorizer the answer depends only on the request's topics, version and listener and on the
    # metadata: answers naming only existing topics are kept encoded until the metadata changes.
    cache_key: tuple[object, ...] | None = None
    if not ctx.auth.enabled and (requested is None or all(t["name"] is not None for t in requested)):
        cache_key = (version, request.listener, ctx.metadata.controller_id,
                     None if requested is None else tuple(t["name"] for t in requested))
        cached = ctx.metadata.encoded_answers.get(cache_key)
        if cached is not None:
            return _encoded(cached, version)  # type: ignore[return-value]
    # The endpoints of the listener this request came in on (a client on EXTERNAL must not be told INTERNAL ones).
    live = ctx.metadata.live_brokers(request.listener or None)
    names: list[str]
    entries: list[MetadataResponseTopics] = []
    if requested is None:
        names = sorted(ctx.metadata.topics())
    else:
        names = []
        for t in requested:
            name = t["name"]
            if name is None:  # v10+ lookup by id
                topic = ctx.metadata.topic_by_id(t["topic_id"])
                if topic is None:
                    entries.append({"error_code": ErrorCode.UNKNOWN_TOPIC_ID, "name": None,
                                    "topic_id": t["topic_id"], "partitions": []})
                    continue
                name = topic.name
            names.append(name)
    auto_create = ctx.config.get("auto.create.topics.enable") and (version < 4 or body["allow_auto_topic_creation"])
    described = ctx.auth.allowed_names(request, Operation.DESCRIBE, ResourceType.TOPIC, names)
    if requested is None:  # "all topics" means all the principal may describe
        names = [n for n in names if n in described]
    may_create: bool | None = None  # Create on the cluster, asked at most once per request
    for name in names:
        if name not in described:
            entries.append({"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "name": name, "partitions": []})
            continue
        if ctx.metadata.topic(name) is None and requested is not None:
            error = topic_name_error(name)
            if error is not None:
                entries.append({"error_code": ErrorCode.INVALID_TOPIC_EXCEPTION, "name": name, "partitions": []})
                continue
            if auto_create and not name.startswith("__"):
                if may_create is None:
                    may_create = ctx.auth.cluster(request, Operation.CREATE)
                if not (may_create or ctx.auth.allowed(request, Operation.CREATE, ResourceType.TOPIC, name)):
                    entries.append({"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "name": name,
                                    "partitions": []})
                    continue
                try:
                    await create_topic_with_defaults(ctx, name)
                except TopicCreationError as exc:
                    entries.append({"error_code": exc.code, "name": name, "partitions": []})
                    continue
                # As Kafka: the request that creates a topic is answered LEADER_NOT_AVAILABLE with no partitions
                # (in ZooKeeper mode the controller is still electing leaders); the client asks again.
                entries.append({"error_code": ErrorCode.LEADER_NOT_AVAILABLE, "name": name, "partitions": []})
                continue
        entry = _topic_entry(ctx, name, version, {b.broker_id for b in live})
        if ctx.auth.enabled and version >= 8 and body["include_topic_authorized_operations"]:
            entry["topic_authorized_operations"] = ctx.auth.authorized_operations(request, ResourceType.TOPIC, name)
        entries.append(entry)
    brokers: list[MetadataResponseBrokers] = [{"node_id": b.broker_id, "host": b.host, "port": b.port,
                                               "rack": b.rack} for b in live]
    cluster_ops = UNKNOWN_AUTHORIZED_OPERATIONS
    if ctx.auth.enabled and 8 <= version <= 10 and body["include_cluster_authorized_operations"]:
        cluster_ops = ctx.auth.authorized_operations(request, ResourceType.CLUSTER, CLUSTER_NAME)
    response: MetadataResponse = {"throttle_time_ms": 0, "brokers": brokers, "cluster_id": ctx.metadata.cluster_id,
                                  "controller_id": ctx.metadata.controller_id, "topics": entries,
                                  "cluster_authorized_operations": cluster_ops}
    if cache_key is None or any(e["error_code"] != ErrorCode.NONE or any(
            p["error_code"] != ErrorCode.NONE for p in e["partitions"]) for e in entries):
        return response
    out = bytearray()
    request.api.response_encoder(version)(out, [], cast("dict[str, Any]", response))
    ctx.metadata.encoded_answers[cache_key] = data = bytes(out)
    return _encoded(data, version)  # type: ignore[return-value]


def _encoded(data: bytes, version: int) -> EncodedBody:
    return EncodedBody(data, 0 if version >= THROTTLE_VERSION else None)  # throttle_time_ms leads from v3
