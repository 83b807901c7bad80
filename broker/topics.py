"""Topic validation and creation shared by CreateTopics, Metadata auto-creation and the controller."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from moldau.broker.config import ConfigError, validate_topic_configs
from moldau.broker.controller.assignment import AssignmentError, assign_replicas
from moldau.broker.metadata import TopicError
from moldau.broker.remote_log_config import validate_remote_storage
from moldau.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from moldau.protocol.typed import CreateTopicsRequestTopicsAssignments

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


class TopicCreationError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def topic_name_error(name: str | None) -> str | None:
    """Kafka's rules for topic names; the error message, or None when the name is legal."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return "Topic name cannot be \".\" or \"..\""
    if len(name) > MAX_NAME_LENGTH:
        return f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, topic name: {name}"
    if not _LEGAL.match(name):
        return (f"Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, "
                "'.', '_' and '-'")
    return None


def _collides(ctx: Any, name: str) -> str | None:
    folded = name.replace(".", "_")
    for existing in ctx.metadata.topics():
        if existing != name and existing.replace(".", "_") == folded:
            return existing
    return None


def plan_topic(ctx: Any, name: str, num_partitions: int, replication_factor: int,
               assignments: list[CreateTopicsRequestTopicsAssignments], configs: dict[str, str]
               ) -> dict[int, list[int]]:
    """Validate a creation request and return its replica assignment; raises TopicCreationError."""
    error = topic_name_error(name)
    if error is not None:
        raise TopicCreationError(ErrorCode.INVALID_TOPIC_EXCEPTION, error)
    if ctx.metadata.topic(name) is not None:
        raise TopicCreationError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    other = _collides(ctx, name)
    if other is not None:
        raise TopicCreationError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                 f"Topic '{name}' collides with existing topic: {other}")
    try:
        validate_topic_configs(configs)
        validate_remote_storage(ctx.config, name, configs)
    except ConfigError as exc:
        raise TopicCreationError(ErrorCode.INVALID_CONFIG, str(exc)) from None
    brokers = {b.broker_id: b.rack for b in ctx.metadata.live_brokers()}
    live = sorted(brokers)
    if assignments:
        if num_partitions != -1 or replication_factor != -1:
            raise TopicCreationError(ErrorCode.INVALID_REQUEST,
                                     "Both numPartitions or replicationFactor and replicasAssignments were set.")
        plan: dict[int, list[int]] = {}
        for a in assignments:
            replicas = list(a["broker_ids"])
            if not replicas or len(set(replicas)) != len(replicas):
                raise TopicCreationError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                         f"Invalid replica assignment for partition {a['partition_index']}")
            unknown = [r for r in replicas if r not in live]
            if unknown:
                raise TopicCreationError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                         f"Unknown broker(s) {unknown} in the replica assignment")
            plan[a["partition_index"]] = replicas
        if sorted(plan) != list(range(len(plan))):
            raise TopicCreationError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     "Partitions should be a consecutive 0-based integer sequence")
        return plan
    if num_partitions == -1:
        num_partitions = int(ctx.config.get("num.partitions"))
    if replication_factor == -1:
        replication_factor = int(ctx.config.get("default.replication.factor"))
    if num_partitions <= 0:
        raise TopicCreationError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise TopicCreationError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                 "Replication factor must be larger than 0.")
    if replication_factor > len(live):
        raise TopicCreationError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                 f"Replication factor: {replication_factor} larger than available brokers: "
                                 f"{len(live)}.")
    try:
        return assign_replicas(brokers, num_partitions, replication_factor)
    except AssignmentError as exc:
        raise TopicCreationError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, str(exc)) from None


async def create_topic(ctx: Any, name: str, plan: dict[int, list[int]], configs: dict[str, str],
                       timeout_ms: int | None = None) -> Any:
    """Create through the metadata store; in ZooKeeper mode ``timeout_ms`` bounds the wait for leaders."""
    try:
        return await ctx.metadata.create_topic(name, plan, configs, timeout_ms=timeout_ms)
    except TopicError as exc:
        raise TopicCreationError(exc.code, exc.message) from None


async def create_topic_with_defaults(ctx: Any, name: str) -> None:
    """Auto-creation (Metadata for an unknown topic): num.partitions, default.replication.factor."""
    try:
        plan = plan_topic(ctx, name, -1, -1, [], {})
        await create_topic(ctx, name, plan, {})
    except TopicCreationError as exc:
        if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
            raise
