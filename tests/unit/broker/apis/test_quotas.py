"""DescribeClientQuotas / AlterClientQuotas on a standalone broker's real components (metadata file)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from moldau.broker.apis.context import StandaloneCluster
from moldau.broker.metadata import METADATA_FILE
from moldau.broker.quota_config import QuotaEntity
from moldau.broker.quotas import BrokerQuotas
from moldau.broker.security.acl import Operation as Op
from moldau.broker.security.acl import PatternType, Permission, ResourceType
from moldau.broker.security.acl_store import ACLS_FILE, FileAclStore
from moldau.protocol.api import ApiKey
from moldau.protocol.errors import ErrorCode as E
from tests.unit.broker.apis.handler_env import Env, make_env

U, C = "user", "client-id"


def entity(*parts: tuple[str, str | None]) -> list[dict[str, Any]]:
    return [{"entity_type": t, "entity_name": n} for t, n in parts]


async def alter(env: Env, parts: list[tuple[str, str | None]], ops: dict[str, float | None],
                version: int = 1, validate_only: bool = False, principal: str = "User:ANONYMOUS") -> dict[str, Any]:
    out = await env.call(ApiKey.ALTER_CLIENT_QUOTAS, version, {"entries": [{
        "entity": entity(*parts),
        "ops": [{"key": k, "value": v or 0.0, "remove": v is None} for k, v in ops.items()]}],
        "validate_only": validate_only}, principal=principal)
    result: dict[str, Any] = out["entries"][0]
    return result


async def describe(env: Env, components: list[tuple[str, int, str | None]], strict: bool = False,
                   version: int = 1, principal: str = "User:ANONYMOUS") -> dict[str, Any]:
    return await env.call(ApiKey.DESCRIBE_CLIENT_QUOTAS, version, {
        "components": [{"entity_type": t, "match_type": m, "match": n} for t, m, n in components],
        "strict": strict}, principal=principal)


def shown(answer: dict[str, Any]) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    return {tuple((e["entity_type"], e["entity_name"]) for e in entry["entity"]):
            {v["key"]: v["value"] for v in entry["values"]} for entry in answer["entries"]}


async def test_alter_describe_and_persist(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    quotas = BrokerQuotas()
    cluster = env.ctx.configs.cluster
    assert isinstance(cluster, StandaloneCluster)
    cluster.on_quota_change = quotas.apply
    for version in (0, 1):
        assert (await alter(env, [(U, "alice")], {"producer_byte_rate": 1048576}, version))["error_code"] == E.NONE
    assert (await alter(env, [(U, "alice"), (C, None)], {"request_percentage": 12.5}))["error_code"] == E.NONE
    assert (await alter(env, [(C, None)], {"consumer_byte_rate": 2048}))["error_code"] == E.NONE
    everything = shown(await describe(env, []))
    assert everything == {
        (("user", "alice"),): {"producer_byte_rate": 1048576.0},
        (("user", "alice"), ("client-id", None)): {"request_percentage": 12.5},
        (("client-id", None),): {"consumer_byte_rate": 2048.0},
    }
    # Filters: exact, default, any specified; strict excludes entities with other parts.
    assert set(shown(await describe(env, [(U, 0, "alice")]))) == {(("user", "alice"),),
                                                                 (("user", "alice"), ("client-id", None))}
    assert set(shown(await describe(env, [(U, 0, "alice")], strict=True))) == {(("user", "alice"),)}
    assert set(shown(await describe(env, [(C, 1, None)], strict=True, version=0))) == {(("client-id", None),)}
    assert set(shown(await describe(env, [(C, 2, None)]))) == {(("user", "alice"), ("client-id", None)),
                                                              (("client-id", None),)}
    # Kafka's layout in the metadata file, and the broker's quotas applied at once.
    on_disk = json.loads((tmp_path / "logs" / METADATA_FILE).read_text())["quota_configs"]
    assert on_disk["users/alice"] == {"producer_byte_rate": "1048576"}
    assert on_disk["users/alice/clients/<default>"] == {"request_percentage": "12.5"}
    assert quotas.configs.resolve("producer_byte_rate", "alice", "x") is not None
    assert quotas.configs.entries[QuotaEntity(None, "<default>")] == {"consumer_byte_rate": 2048.0}
    # Removing the last key removes the entity.
    assert (await alter(env, [(C, None)], {"consumer_byte_rate": None}))["error_code"] == E.NONE
    assert (("client-id", None),) not in shown(await describe(env, []))
    assert QuotaEntity(None, "<default>") not in quotas.configs.entries


async def test_invalid_alters_and_filters(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    assert (await alter(env, [(U, "a")], {"retention.ms": 1.0}))["error_code"] == E.INVALID_REQUEST
    assert (await alter(env, [(U, "a")], {"producer_byte_rate": -5.0}))["error_code"] == E.INVALID_CONFIG
    assert (await alter(env, [("ip", "1.2.3.4"), (U, "a")], {"producer_byte_rate": 5.0}))["error_code"] \
        == E.INVALID_REQUEST
    assert (await alter(env, [(U, "a")], {"producer_byte_rate": 5.0}, validate_only=True))["error_code"] == E.NONE
    assert shown(await describe(env, [])) == {}
    bad = await describe(env, [(U, 0, None)])
    assert bad["error_code"] == E.INVALID_REQUEST and bad["entries"] is None


async def test_acls_cluster_alter_and_describe_configs(tmp_path: Path) -> None:
    store = FileAclStore(tmp_path / ACLS_FILE)
    await store.start()
    env = make_env(tmp_path, {"super.users": "User:admin"}, acls=store)
    denied = await alter(env, [(U, "a")], {"producer_byte_rate": 5.0}, principal="User:bob")
    assert denied["error_code"] == E.CLUSTER_AUTHORIZATION_FAILED
    assert (await describe(env, [], principal="User:bob"))["error_code"] == E.CLUSTER_AUTHORIZATION_FAILED
    created = await env.call(ApiKey.CREATE_ACLS, 3, {"creations": [
        {"resource_type": ResourceType.CLUSTER, "resource_name": "kafka-cluster",
         "resource_pattern_type": PatternType.LITERAL, "principal": "User:bob", "host": "*",
         "operation": Op.DESCRIBE_CONFIGS, "permission_type": Permission.ALLOW}]}, principal="User:admin")
    assert created["results"][0]["error_code"] == E.NONE
    assert (await alter(env, [(U, "a")], {"producer_byte_rate": 5.0}, principal="User:admin"))["error_code"] \
        == E.NONE
    assert shown(await describe(env, [], principal="User:bob")) == {(("user", "a"),): {"producer_byte_rate": 5.0}}


async def test_quota_alter_keeps_a_users_scram_credentials(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    env.metadata.set_quota_configs("users/alice", {"SCRAM-SHA-256": "salt=x,stored_key=y,server_key=z,iterations=4096"})
    assert (await alter(env, [(U, "alice")], {"producer_byte_rate": 10.0}))["error_code"] == E.NONE
    assert set(env.metadata.quota_configs["users/alice"]) == {"SCRAM-SHA-256", "producer_byte_rate"}
    assert shown(await describe(env, [])) == {(("user", "alice"),): {"producer_byte_rate": 10.0}}
