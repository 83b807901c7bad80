"""DescribeConfigs / AlterConfigs / IncrementalAlterConfigs on a standalone broker's real components."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from moldau.broker.dynamic_config import (
    DEFAULT_CONFIG,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    DYNAMIC_TOPIC_CONFIG,
    STATIC_BROKER_CONFIG,
)
from moldau.protocol.api import ApiKey
from moldau.protocol.errors import ErrorCode as E
from moldau.protocol.records import build_batch
from tests.unit.broker.apis.handler_env import Env, make_env

TOPIC, BROKER = 2, 4


async def describe(env: Env, rtype: int, name: str, keys: list[str] | None = None, version: int = 4,
                   synonyms: bool = True) -> dict[str, Any]:
    out = await env.call(ApiKey.DESCRIBE_CONFIGS, version, {
        "resources": [{"resource_type": rtype, "resource_name": name, "configuration_keys": keys}],
        "include_synonyms": synonyms, "include_documentation": True})
    result: dict[str, Any] = out["results"][0]
    return result


def by_name(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in result["configs"]}


async def alter(env: Env, rtype: int, name: str, configs: dict[str, str | None], validate_only: bool = False,
                version: int = 2) -> dict[str, Any]:
    out = await env.call(ApiKey.ALTER_CONFIGS, version, {
        "resources": [{"resource_type": rtype, "resource_name": name,
                       "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
        "validate_only": validate_only})
    result: dict[str, Any] = out["responses"][0]
    return result


async def incremental(env: Env, rtype: int, name: str, ops: list[tuple[str, int, str | None]],
                      validate_only: bool = False, version: int = 1) -> dict[str, Any]:
    out = await env.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, version, {
        "resources": [{"resource_type": rtype, "resource_name": name,
                       "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in ops]}],
        "validate_only": validate_only})
    result: dict[str, Any] = out["responses"][0]
    return result


async def test_describe_topic_sources_and_synonyms(tmp_path: Path) -> None:
    env = make_env(tmp_path, {"log.retention.hours": "48"})
    await env.create_topic("t")
    env.metadata.set_topic_configs("t", {"segment.bytes": "1048576"})
    configs = by_name(await describe(env, TOPIC, "t"))
    seg = configs["segment.bytes"]
    assert (seg["value"], seg["config_source"], seg["read_only"], seg["is_sensitive"]) == (
        "1048576", DYNAMIC_TOPIC_CONFIG, False, False)
    assert [(s["name"], s["source"]) for s in seg["synonyms"]] == [
        ("segment.bytes", DYNAMIC_TOPIC_CONFIG), ("log.segment.bytes", DEFAULT_CONFIG)]
    ret = configs["retention.ms"]
    assert ret["value"] == str(48 * 3600 * 1000) and ret["config_source"] == STATIC_BROKER_CONFIG
    assert ("log.retention.hours", "48", STATIC_BROKER_CONFIG) in [
        (s["name"], s["value"], s["source"]) for s in ret["synonyms"]]
    assert configs["cleanup.policy"]["config_source"] == DEFAULT_CONFIG
    assert configs["cleanup.policy"]["documentation"]
    assert (await describe(env, TOPIC, "t", keys=[]))["configs"] == []  # [] names no key; null means all
    only = await describe(env, TOPIC, "t", keys=["segment.bytes"], version=0)
    assert [c["name"] for c in only["configs"]] == ["segment.bytes"] and only["configs"][0]["is_default"] is False


async def test_describe_errors(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    assert (await describe(env, TOPIC, "missing"))["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
    assert (await describe(env, 3, "x"))["error_code"] == E.INVALID_REQUEST
    other = await describe(env, BROKER, "7")
    assert other["error_code"] == E.INVALID_REQUEST and "expected 0" in other["error_message"]


async def test_describe_broker_read_only_and_sensitive(tmp_path: Path) -> None:
    env = make_env(tmp_path, {"ssl.key.password": "s3cr3t-pw", "num.io.threads": "4"})
    configs = by_name(await describe(env, BROKER, "0"))
    assert configs["ssl.key.password"]["is_sensitive"] and configs["ssl.key.password"]["value"] is None
    assert configs["num.io.threads"]["read_only"] and configs["num.io.threads"]["config_source"] == STATIC_BROKER_CONFIG
    assert not configs["log.retention.ms"]["read_only"]
    assert "s3cr3t-pw" not in json.dumps(configs)


async def test_alter_topic_takes_effect_and_replaces(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    await env.create_topic("t")
    log_ = env.replica_manager.partitions[("t", 0)].log
    assert (await alter(env, TOPIC, "t", {"segment.bytes": "1024", "min.insync.replicas": "2"}))["error_code"] == 0
    assert log_.config.segment_bytes == 1024
    assert env.replica_manager.partitions[("t", 0)].min_insync_replicas == 2
    # AlterConfigs replaces the whole set: min.insync.replicas goes back to the default.
    assert (await alter(env, TOPIC, "t", {"max.message.bytes": "100"}))["error_code"] == 0
    assert env.metadata.topic("t").configs == {"max.message.bytes": "100"}  # type: ignore[union-attr]
    assert env.replica_manager.partitions[("t", 0)].min_insync_replicas == 1
    assert log_.config.segment_bytes == 1073741824 and log_.config.max_message_bytes == 100
    big = build_batch([(b"k", b"v" * 200, [], None)])
    out = await env.call(ApiKey.PRODUCE, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 1000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": big}]}]})
    assert out["responses"][0]["partition_responses"][0]["error_code"] == E.MESSAGE_TOO_LARGE


async def test_alter_errors_and_validate_only(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    await env.create_topic("t")
    unknown = await alter(env, TOPIC, "t", {"retention.msx": "1"})
    assert unknown["error_code"] == E.INVALID_CONFIG and "retention.msx" in unknown["error_message"]
    bad = await alter(env, TOPIC, "t", {"retention.ms": "soon"})
    assert bad["error_code"] == E.INVALID_CONFIG and "retention.ms" in bad["error_message"]
    assert (await alter(env, TOPIC, "nope", {"retention.ms": "1"}))["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
    assert (await alter(env, 1, "t", {}))["error_code"] == E.INVALID_REQUEST
    assert (await alter(env, TOPIC, "t", {"retention.ms": "5"}, validate_only=True))["error_code"] == 0
    assert env.metadata.topic("t").configs == {}  # type: ignore[union-attr]
    static = await alter(env, BROKER, "0", {"num.io.threads": "3"})
    assert static["error_code"] == E.INVALID_CONFIG and "num.io.threads" in static["error_message"]


async def test_incremental_ops(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    await env.create_topic("t")
    r = await incremental(env, TOPIC, "t", [("retention.ms", 0, "1000"), ("cleanup.policy", 2, "compact")])
    assert r["error_code"] == 0
    assert env.metadata.topic("t").configs == {"retention.ms": "1000",  # type: ignore[union-attr]
                                               "cleanup.policy": "delete,compact"}
    assert env.replica_manager.partitions[("t", 0)].log.config.compact_enabled
    r = await incremental(env, TOPIC, "t", [("cleanup.policy", 3, "delete"), ("retention.ms", 1, None)])
    assert r["error_code"] == 0
    assert env.metadata.topic("t").configs == {"cleanup.policy": "compact"}  # type: ignore[union-attr]
    r = await incremental(env, TOPIC, "t", [("retention.ms", 2, "5")])
    assert r["error_code"] == E.INVALID_CONFIG and "retention.ms" in r["error_message"]
    r = await incremental(env, TOPIC, "t", [("retention.ms", 0, "1"), ("retention.ms", 1, None)])
    assert r["error_code"] == E.INVALID_REQUEST
    r = await incremental(env, TOPIC, "t", [("retention.ms", 0, "1")], validate_only=True, version=0)
    assert r["error_code"] == 0 and env.metadata.topic("t").configs == {  # type: ignore[union-attr]
        "cleanup.policy": "compact"}


async def test_dynamic_broker_configs(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    await env.create_topic("t")
    log_ = env.replica_manager.partitions[("t", 0)].log
    assert (await incremental(env, BROKER, "", [("log.retention.ms", 0, "60000")]))["error_code"] == 0
    assert log_.config.retention_ms == 60000
    assert (await incremental(env, BROKER, "0", [("log.retention.ms", 0, "30000")]))["error_code"] == 0
    assert log_.config.retention_ms == 30000
    ret = by_name(await describe(env, BROKER, "0"))["log.retention.ms"]
    assert ret["value"] == "30000" and ret["config_source"] == DYNAMIC_BROKER_CONFIG
    assert [s["source"] for s in ret["synonyms"]][:2] == [DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG]
    default = await describe(env, BROKER, "")
    assert [(c["name"], c["value"], c["config_source"]) for c in default["configs"]] == [
        ("log.retention.ms", "60000", DYNAMIC_DEFAULT_BROKER_CONFIG)]
    topic_ret = by_name(await describe(env, TOPIC, "t"))["retention.ms"]
    assert topic_ret["config_source"] == DYNAMIC_BROKER_CONFIG
    # persisted in the metadata file
    saved = json.loads(env.metadata.path.read_text())["broker_configs"]
    assert saved == {"<default>": {"log.retention.ms": "60000"}, "0": {"log.retention.ms": "30000"}}
    assert (await incremental(env, BROKER, "0", [("log.retention.ms", 1, None)]))["error_code"] == 0
    assert log_.config.retention_ms == 60000
