"""DescribeClientQuotas and AlterClientQuotas (KIP-546) over the entity configs of ClusterControl.

Quotas are entity configs (broker/quota_config.py): ZooKeeper ``/config/users|clients|ips/...`` with a change
notification that every broker applies, or the standalone metadata file. An alter reads the entity's configs,
changes only the quota keys (a user's znode also holds its SCRAM credentials) and writes them back. ACLs as
Kafka's: DescribeConfigs on the cluster to describe, AlterConfigs on the cluster to alter
(CLUSTER_AUTHORIZATION_FAILED). Errors: INVALID_REQUEST for a bad entity, filter or key, INVALID_CONFIG for a bad
value.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from moldau.broker.apis.context import QuotaDeps
from moldau.broker.quota_config import (
    CLIENT_KEYS,
    CONNECTION_CREATION_RATE,
    DEFAULT,
    IP,
    ZK_ENTITY_TYPES,
    QuotaEntity,
    QuotaError,
    format_value,
    parse_values,
    validate_ops,
)
from moldau.broker.request_channel import Request
from moldau.broker.security.acl import Operation
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.quotas import MATCH_DEFAULT, MATCH_EXACT, MATCH_SPECIFIED

if TYPE_CHECKING:  # the message shapes are for mypy only: zero cost at run time
    from moldau.protocol.typed import (
        AlterClientQuotasRequest,
        AlterClientQuotasResponse,
        AlterClientQuotasResponseEntries,
        DescribeClientQuotasRequest,
        DescribeClientQuotasResponse,
        DescribeClientQuotasResponseEntries,
    )

log = logging.getLogger("moldau.apis.quotas")

QUOTA_KEYS = frozenset(CLIENT_KEYS + (CONNECTION_CREATION_RATE,))


def _filter(components: list[tuple[str, int, str | None]]) -> list[tuple[str, int, str | None]]:
    seen: set[str] = set()
    for etype, match_type, match in components:
        if etype in seen:
            raise QuotaError(f"Duplicate entity type in filter: {etype}")
        seen.add(etype)
        if etype not in ("user", "client-id", IP):
            raise QuotaError(f"Custom entity type '{etype}' not supported")
        if match_type == MATCH_EXACT and match is None:
            raise QuotaError(f"Exact match of {etype} needs a name")
        if match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            raise QuotaError(f"Unknown match type {match_type}")
    return components


def matches(entity: QuotaEntity, components: list[tuple[str, int, str | None]], strict: bool) -> bool:
    """Kafka's filter: every component matches a part of the entity; strict: and the entity has no other part."""
    parts = {etype: (DEFAULT if name is None else name) for etype, name in entity.components()}
    for etype, match_type, match in components:
        name = parts.get(etype)
        if name is None:
            return False
        if match_type == MATCH_EXACT and name != match:
            return False
        if match_type == MATCH_DEFAULT and name != DEFAULT:
            return False
    return not strict or set(parts) == {c[0] for c in components}


async def _all_entities(ctx: QuotaDeps) -> dict[QuotaEntity, dict[str, float]]:
    out: dict[QuotaEntity, dict[str, float]] = {}
    for entity_type in ZK_ENTITY_TYPES:
        for name, configs in (await ctx.cluster.list_entity_configs(entity_type)).items():
            entity = QuotaEntity.from_zk(entity_type, name)
            values = parse_values(configs)
            if entity is not None and values:
                out[entity] = values
    return out


async def handle_describe_client_quotas(ctx: QuotaDeps, request: Request, body: DescribeClientQuotasRequest
                                        ) -> DescribeClientQuotasResponse:
    def error(code: ErrorCode, message: str) -> DescribeClientQuotasResponse:
        return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "entries": None}

    if not ctx.auth.cluster(request, Operation.DESCRIBE_CONFIGS):
        return error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Not authorized to describe client quotas")
    try:
        components = _filter([(c["entity_type"], c["match_type"], c["match"]) for c in body["components"]])
        found = await _all_entities(ctx)
    except QuotaError as exc:
        return error(ErrorCode.INVALID_REQUEST, exc.message)
    except Exception as exc:  # ZooKeeper unreachable
        log.warning("describing client quotas failed: %r", exc)
        return error(ErrorCode.UNKNOWN_SERVER_ERROR, str(exc))
    entries: list[DescribeClientQuotasResponseEntries] = [
        {"entity": [{"entity_type": t, "entity_name": n} for t, n in entity.components()],
         "values": [{"key": k, "value": v} for k, v in sorted(values.items())]}
        for entity, values in sorted(found.items(), key=lambda kv: repr(kv[0]))
        if matches(entity, components, bool(body["strict"]))]
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "entries": entries}


async def handle_alter_client_quotas(ctx: QuotaDeps, request: Request, body: AlterClientQuotasRequest
                                     ) -> AlterClientQuotasResponse:
    allowed = ctx.auth.cluster(request, Operation.ALTER_CONFIGS)
    validate_only = bool(body["validate_only"])
    results: list[AlterClientQuotasResponseEntries] = []
    for entry in body["entries"]:
        result: AlterClientQuotasResponseEntries = {
            "error_code": ErrorCode.NONE, "error_message": None,
            "entity": [{"entity_type": e["entity_type"], "entity_name": e["entity_name"]} for e in entry["entity"]]}
        results.append(result)
        if not allowed:
            result.update({"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                           "error_message": "Not authorized to alter client quotas"})
            continue
        try:
            entity = QuotaEntity.from_components((e["entity_type"], e["entity_name"]) for e in entry["entity"])
            ops = [(op["key"], None if op["remove"] else float(op["value"])) for op in entry["ops"]]
            keys = [k for k, _ in ops]
            if len(set(keys)) != len(keys):
                raise QuotaError(f"Duplicate quota keys: {', '.join(sorted({k for k in keys if keys.count(k) > 1}))}")
            validate_ops(entity, ops)
            if validate_only:
                continue
            entity_type, name = entity.zk_entity()
            configs = await ctx.cluster.entity_configs(entity_type, name)
            for key, value in ops:
                if value is None:
                    configs.pop(key, None)
                else:
                    configs[key] = format_value(key, value)
            await ctx.cluster.alter_entity_configs(entity_type, name, configs)
            log.info("client quotas of %s/%s set to %s", entity_type, name,
                     {k: v for k, v in configs.items() if k in QUOTA_KEYS})
        except QuotaError as exc:
            result.update({"error_code": ErrorCode.INVALID_CONFIG if exc.invalid_config else ErrorCode.INVALID_REQUEST,
                           "error_message": exc.message})
        except Exception as exc:  # ZooKeeper unreachable
            log.warning("altering client quotas failed: %r", exc)
            result.update({"error_code": ErrorCode.UNKNOWN_SERVER_ERROR, "error_message": str(exc)})
    return {"throttle_time_ms": 0, "entries": results}
