"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics and brokers.

Storage goes through ``ClusterControl`` (ZooKeeper znodes + change notifications, or the standalone metadata
file); validation uses the declarations in broker/config.py. Errors are Kafka's: INVALID_CONFIG naming the key
for an unknown key or a bad value, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST for a bad resource type, a broker
id that is not this broker's (describe), duplicate keys or an unknown operation. As in Kafka's ZooKeeper mode,
any broker accepts an alter (it writes ZooKeeper and every broker applies the notification). ACLs: DescribeConfigs
or AlterConfigs on the topic (TOPIC_AUTHORIZATION_FAILED) or on the cluster for broker configs
(CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from moldau.broker.apis.context import ConfigDeps
from moldau.broker.config import ConfigError
from moldau.broker.dynamic_config import (
    DEFAULT_CONFIG,
    DEFAULT_ENTITY,
    Described,
    apply_incremental,
    broker_setting,
    topic_setting,
    validate_broker_configs,
    validate_topic_overrides,
)
from moldau.broker.metadata import TopicError
from moldau.broker.remote_log_config import validate_remote_storage
from moldau.broker.request_channel import Request
from moldau.broker.security.acl import Operation, ResourceType
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.configs import RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_TOPIC

if TYPE_CHECKING:  # the message shapes are for mypy only: zero cost at run time
    from moldau.protocol.typed import (
        AlterConfigsRequest,
        AlterConfigsRequestResourcesConfigs,
        AlterConfigsResponse,
        AlterConfigsResponseResponses,
        DescribeConfigsRequest,
        DescribeConfigsResponse,
        DescribeConfigsResponseResults,
        DescribeConfigsResponseResultsConfigs,
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsRequestResourcesConfigs,
        IncrementalAlterConfigsResponse,
    )

log = logging.getLogger("moldau.apis.configs")


class ResourceError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _authorize(ctx: ConfigDeps, request: Request, rtype: int, name: str, operation: Operation) -> None:
    if rtype == RESOURCE_TOPIC:
        if not ctx.auth.allowed(request, operation, ResourceType.TOPIC, name):
            raise ResourceError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"Not authorized for topic {name}")
    elif not ctx.auth.cluster(request, operation):
        raise ResourceError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Not authorized for broker configs")


def _entity(ctx: ConfigDeps, rtype: int, name: str) -> tuple[str, str]:
    """(ZooKeeper entity type, entity name) of a resource, or ResourceError."""
    if rtype == RESOURCE_TOPIC:
        if ctx.metadata.topic(name) is None:
            raise ResourceError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        return "topics", name
    if rtype == RESOURCE_BROKER:
        if name == "":
            return "brokers", DEFAULT_ENTITY
        if not name.isdigit():
            raise ResourceError(ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}")
        return "brokers", str(int(name))
    if rtype == RESOURCE_BROKER_LOGGER:
        raise ResourceError(ErrorCode.INVALID_REQUEST, "Broker logger configs are not supported by Moldau")
    raise ResourceError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {rtype}")


def _error_entry(rtype: int, name: str, code: ErrorCode = ErrorCode.NONE, message: str | None = None
                 ) -> AlterConfigsResponseResponses:
    # Also the head of a DescribeConfigs result and of an IncrementalAlterConfigs response (same fields).
    return {"error_code": code, "error_message": message, "resource_type": rtype, "resource_name": name}


# ------------------------------------------------------------------ DescribeConfigs

def _shape(d: Described, synonyms: bool, documentation: bool) -> DescribeConfigsResponseResultsConfigs:
    return {"name": d.name, "value": d.value, "read_only": d.read_only, "is_default": d.source == DEFAULT_CONFIG,
            "config_source": d.source, "is_sensitive": d.sensitive,
            "synonyms": [{"name": n, "value": v, "source": s} for n, v, s in d.synonyms] if synonyms else [],
            "config_type": d.type_code, "documentation": d.doc if documentation else None}


async def _describe(ctx: ConfigDeps, rtype: int, name: str) -> list[Described]:
    entity_type, entity = _entity(ctx, rtype, name)
    if entity_type == "topics":
        return ctx.dynamic.describe_topic(await ctx.cluster.entity_configs("topics", entity))
    if entity == DEFAULT_ENTITY:  # read from the store: an alter just made is visible at once
        return ctx.dynamic.describe_broker_default(await ctx.cluster.entity_configs("brokers", DEFAULT_ENTITY))
    if entity != str(ctx.broker_id):
        raise ResourceError(ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {ctx.broker_id} or empty "
                            f"string, but received {name}")
    return ctx.dynamic.describe_broker()


async def handle_describe_configs(ctx: ConfigDeps, request: Request, body: DescribeConfigsRequest
                                  ) -> DescribeConfigsResponse:
    version = request.version
    synonyms = version >= 1 and bool(body["include_synonyms"])
    documentation = version >= 3 and bool(body["include_documentation"])
    results: list[DescribeConfigsResponseResults] = []
    for r in body["resources"]:
        rtype, name, keys = r["resource_type"], r["resource_name"], r["configuration_keys"]
        entry: DescribeConfigsResponseResults = {**_error_entry(rtype, name), "configs": []}
        results.append(entry)
        try:
            _authorize(ctx, request, rtype, name, Operation.DESCRIBE_CONFIGS)
            described = await _describe(ctx, rtype, name)
        except ResourceError as exc:
            entry.update({"error_code": exc.code, "error_message": exc.message})
            continue
        except Exception as exc:  # ZooKeeper unreachable
            log.warning("describing %s %r failed: %r", rtype, name, exc)
            entry.update({"error_code": ErrorCode.UNKNOWN_SERVER_ERROR, "error_message": str(exc)})
            continue
        wanted = None if keys is None else set(keys)  # null: every config; [] none (as Kafka)
        entry["configs"] = [_shape(d, synonyms, documentation) for d in described
                            if wanted is None or d.name in wanted]
    return {"throttle_time_ms": 0, "results": results}


# ------------------------------------------------------------------ AlterConfigs / IncrementalAlterConfigs

async def _validate(ctx: ConfigDeps, entity_type: str, entity: str, configs: dict[str, str]) -> None:
    if entity_type == "topics":
        validate_topic_overrides(configs)
        previous = await ctx.cluster.entity_configs(entity_type, entity)
        validate_remote_storage(ctx.dynamic.current, entity, configs, previous)
    else:
        validate_broker_configs(configs)


async def _write(ctx: ConfigDeps, entity_type: str, entity: str, configs: dict[str, str], validate_only: bool
                 ) -> None:
    await _validate(ctx, entity_type, entity, configs)
    if not validate_only:
        await ctx.cluster.alter_entity_configs(entity_type, entity, configs)
        log.info("%s/%s configs set to %s", entity_type, entity, configs)


async def _alter_one(ctx: ConfigDeps, request: Request, rtype: int, name: str,
                     run: Callable[[str, str], Awaitable[None]]) -> AlterConfigsResponseResponses:
    entry = _error_entry(rtype, name)
    try:
        _authorize(ctx, request, rtype, name, Operation.ALTER_CONFIGS)
        entity_type, entity = _entity(ctx, rtype, name)
        await run(entity_type, entity)
    except ResourceError as exc:
        entry.update({"error_code": exc.code, "error_message": exc.message})
    except ConfigError as exc:
        entry.update({"error_code": ErrorCode.INVALID_CONFIG, "error_message": str(exc)})
    except TopicError as exc:
        entry.update({"error_code": exc.code, "error_message": exc.message})
    except Exception as exc:  # ZooKeeper unreachable
        log.warning("altering configs of %s %r failed: %r", rtype, name, exc)
        entry.update({"error_code": ErrorCode.UNKNOWN_SERVER_ERROR, "error_message": str(exc)})
    return entry


def _duplicates(names: list[str]) -> ResourceError | None:
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        return ResourceError(ErrorCode.INVALID_REQUEST, f"Error due to duplicate config keys: {', '.join(dup)}")
    return None


async def handle_alter_configs(ctx: ConfigDeps, request: Request, body: AlterConfigsRequest
                               ) -> AlterConfigsResponse:
    """The whole set of overrides is replaced by the given one (null values are dropped, as in Kafka)."""
    validate_only = bool(body["validate_only"])
    responses: list[AlterConfigsResponseResponses] = []
    for r in body["resources"]:
        entries = r["configs"]

        async def run(entity_type: str, entity: str,
                      entries: list[AlterConfigsRequestResourcesConfigs] = entries) -> None:
            dup = _duplicates([c["name"] for c in entries])
            if dup is not None:
                raise dup
            configs = {c["name"]: c["value"] for c in entries if c["value"] is not None}
            await _write(ctx, entity_type, entity, configs, validate_only)

        responses.append(await _alter_one(ctx, request, r["resource_type"], r["resource_name"], run))
    return {"throttle_time_ms": 0, "responses": responses}


def _current_text(ctx: ConfigDeps, entity_type: str, name: str) -> str | None:
    """The effective value of a setting as text, the base of an APPEND/SUBTRACT without an override."""
    cfg = ctx.dynamic.current
    if entity_type == "topics":
        setting = topic_setting(name)
        return setting.format(cfg.topic_default(name)) if setting is not None else None
    setting = broker_setting(name)
    return setting.format(cfg.get(name)) if setting is not None else None


async def handle_incremental_alter_configs(ctx: ConfigDeps, request: Request, body: IncrementalAlterConfigsRequest
                                           ) -> IncrementalAlterConfigsResponse:
    validate_only = bool(body["validate_only"])
    responses: list[AlterConfigsResponseResponses] = []  # the same shape as IncrementalAlterConfigs' entries
    for r in body["resources"]:
        entries = r["configs"]

        async def run(entity_type: str, entity: str,
                      entries: list[IncrementalAlterConfigsRequestResourcesConfigs] = entries) -> None:
            dup = _duplicates([c["name"] for c in entries])
            if dup is not None:
                raise dup
            bad = [c for c in entries if c["config_operation"] not in (0, 1, 2, 3)]
            if bad:
                raise ResourceError(ErrorCode.INVALID_REQUEST, f"Unknown config operation "
                                    f"{bad[0]['config_operation']} for {bad[0]['name']}")
            lookup = topic_setting if entity_type == "topics" else broker_setting
            current = await ctx.cluster.entity_configs(entity_type, entity)
            ops = [(c["name"], int(c["config_operation"]), c["value"]) for c in entries]
            updated = apply_incremental(current, ops, lookup, lambda n: _current_text(ctx, entity_type, n))
            await _write(ctx, entity_type, entity, updated, validate_only)

        responses.append(await _alter_one(ctx, request, r["resource_type"], r["resource_name"], run))
    return {"throttle_time_ms": 0, "responses": responses}
