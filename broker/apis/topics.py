"""CreateTopics (Create on the cluster or on the topic) and DeleteTopics (Delete on the topic); refusals answer
TOPIC_AUTHORIZATION_FAILED. Both count their partitions against the client's controller_mutation_rate
(KIP-599, broker/quotas.py MutationBudget)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from moldau.broker.apis.context import TopicDeps
from moldau.broker.metadata import TopicError
from moldau.broker.request_channel import Request
from moldau.broker.security.acl import Operation, ResourceType
from moldau.broker.topics import TopicCreationError, create_topic, plan_topic
from moldau.protocol.errors import ErrorCode

if TYPE_CHECKING:  # the message shapes are for mypy only: zero cost at run time
    from moldau.protocol.typed import (
        CreateTopicsRequest,
        CreateTopicsResponse,
        CreateTopicsResponseTopics,
        DeleteTopicsRequest,
        DeleteTopicsResponse,
        DeleteTopicsResponseResponses,
    )

log = logging.getLogger("moldau.apis.topics")

THROTTLED = "The throttling quota has been exceeded."


async def handle_create_topics(ctx: TopicDeps, request: Request, body: CreateTopicsRequest
                               ) -> CreateTopicsResponse:
    results: list[CreateTopicsResponseTopics] = []
    seen: dict[str, int] = {}
    for t in body["topics"]:
        seen[t["name"]] = seen.get(t["name"], 0) + 1
    creatable = set(seen) if ctx.auth.cluster(request, Operation.CREATE) else \
        ctx.auth.allowed_names(request, Operation.CREATE, ResourceType.TOPIC, seen)
    budget = ctx.quotas.mutations(request) if ctx.quotas is not None else None
    for t in body["topics"]:
        name = t["name"]
        entry: CreateTopicsResponseTopics = {"name": name, "error_code": ErrorCode.NONE, "error_message": None,
                                             "num_partitions": -1, "replication_factor": -1, "configs": None}
        results.append(entry)
        if name not in creatable:
            entry["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            continue
        if not ctx.metadata.is_controller():
            entry["error_code"] = ErrorCode.NOT_CONTROLLER
            continue
        if seen[name] > 1:
            entry["error_code"] = ErrorCode.INVALID_REQUEST
            entry["error_message"] = f"Create topics request from client contains a duplicate topic {name}"
            continue
        configs = {c["name"]: c["value"] for c in t["configs"] if c["value"] is not None}
        try:
            plan = plan_topic(ctx, name, t["num_partitions"], t["replication_factor"], t["assignments"], configs)
            entry["num_partitions"] = len(plan)
            entry["replication_factor"] = len(plan[0]) if plan else -1
            if not body["validate_only"] and budget is not None:
                if budget.refused():
                    raise TopicCreationError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED)
                budget.record(len(plan))
            if not body["validate_only"]:
                topic = await create_topic(ctx, name, plan, configs,
                                           timeout_ms=body["timeout_ms"] if body["timeout_ms"] > 0 else None)
                if topic is not None:
                    entry["topic_id"] = topic.topic_id
            entry["configs"] = [{"name": k, "value": v, "read_only": False, "config_source": 1,
                                 "is_sensitive": False} for k, v in sorted(configs.items())]
        except TopicCreationError as exc:
            entry["error_code"] = exc.code
            entry["error_message"] = exc.message
            entry["num_partitions"] = entry["replication_factor"] = -1
    return {"throttle_time_ms": budget.throttle_ms() if budget is not None else 0, "topics": results}


async def handle_delete_topics(ctx: TopicDeps, request: Request, body: DeleteTopicsRequest
                               ) -> DeleteTopicsResponse:
    wanted: list[tuple[str | None, bytes | None]]
    if request.version >= 6:
        wanted = [(t["name"], t["topic_id"]) for t in body["topics"]]
    else:
        wanted = [(name, None) for name in body["topic_names"]]
    responses: list[DeleteTopicsResponseResponses] = []
    budget = ctx.quotas.mutations(request) if ctx.quotas is not None else None
    for name, topic_id in wanted:
        entry: DeleteTopicsResponseResponses = {"name": name, "error_code": ErrorCode.NONE, "error_message": None}
        responses.append(entry)
        if name is None and topic_id is not None:
            topic = ctx.metadata.topic_by_id(topic_id)
            if topic is None:
                entry["error_code"] = ErrorCode.UNKNOWN_TOPIC_ID
                entry["topic_id"] = topic_id
                continue
            name = entry["name"] = topic.name
        if name is None:  # v6+: neither a name nor an id
            entry["error_code"] = ErrorCode.INVALID_REQUEST
            continue
        if not ctx.auth.allowed(request, Operation.DELETE, ResourceType.TOPIC, name):
            entry["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            continue
        topic = ctx.metadata.topic(name)
        if topic is not None:
            entry["topic_id"] = topic.topic_id
        if not ctx.metadata.is_controller():
            entry["error_code"] = ErrorCode.NOT_CONTROLLER
            continue
        if not ctx.config.get("delete.topic.enable"):
            entry["error_code"] = ErrorCode.TOPIC_DELETION_DISABLED
            continue
        if budget is not None and topic is not None:
            if budget.refused():
                entry["error_code"], entry["error_message"] = ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED
                continue
            budget.record(len(topic.partitions))
        try:
            await ctx.metadata.delete_topic(name)
        except TopicError as exc:
            entry["error_code"] = exc.code
            entry["error_message"] = exc.message
    return {"throttle_time_ms": budget.throttle_ms() if budget is not None else 0, "responses": responses}
