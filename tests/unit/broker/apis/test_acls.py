"""ACLs end to end in-process: CreateAcls/DescribeAcls/DeleteAcls through the strict codecs into the standalone
ACL store (acls.json), and the handlers' decisions for principals with and without permissions."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from moldau.broker.apis import ROUTES
from moldau.broker.request_channel import Request
from moldau.broker.security.acl import Operation as Op
from moldau.broker.security.acl import PatternType as P
from moldau.broker.security.acl import Permission, ResourceType
from moldau.broker.security.acl_store import ACLS_FILE, FileAclStore
from moldau.protocol.api import REGISTRY, ApiKey
from moldau.protocol.errors import ErrorCode as E
from moldau.protocol.header import RequestHeader
from moldau.protocol.records import build_batch
from tests.unit.broker.apis.handler_env import Env, make_env

ADMIN, ALICE, BOB = "User:admin", "User:alice", "User:bob"
CONFIG = {"auto.create.topics.enable": "false", "offsets.topic.num.partitions": "1", "super.users": ADMIN}
T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER


def creation(rtype: ResourceType, name: str, principal: str, op: Op, pattern: P = P.LITERAL,
             perm: Permission = Permission.ALLOW) -> dict[str, Any]:
    return {"resource_type": rtype, "resource_name": name, "resource_pattern_type": pattern,
            "principal": principal, "host": "*", "operation": op, "permission_type": perm}


def acl_filter(rtype: ResourceType = ResourceType.ANY, name: str | None = None, pattern: P = P.ANY,
               principal: str | None = None) -> dict[str, Any]:
    return {"resource_type_filter": rtype, "resource_name_filter": name, "pattern_type_filter": pattern,
            "principal_filter": principal, "host_filter": None, "operation": Op.ANY,
            "permission_type": Permission.ANY}


def produce(topic: str) -> dict[str, Any]:
    batch = build_batch([(None, b"v", [], 1000)])
    return {"acks": 1, "timeout_ms": 1000, "transactional_id": None,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}


def fetch(*topics: str) -> dict[str, Any]:
    """From offset 1, the end of the one-record logs: the answer carries no file region (which the in-process
    codec cannot encode), and its error code and high watermark still tell whether the read was allowed."""
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "topics": [{"topic": t, "partitions": [{"partition": 0, "fetch_offset": 1,
                                                    "partition_max_bytes": 1 << 20}]} for t in topics]}


def join(group: str) -> dict[str, Any]:
    return {"group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
            "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b"\x00"}]}


async def secured(tmp_path: Path) -> Env:
    store = FileAclStore(tmp_path / ACLS_FILE)
    await store.start()
    env = make_env(tmp_path, CONFIG, acls=store)
    for name in ("orders", "logs-app", "secret"):
        await env.create_topic(name)
    created = await env.call(ApiKey.CREATE_ACLS, 3, {"creations": [
        creation(T, "orders", ALICE, Op.WRITE),
        creation(T, "logs-", ALICE, Op.READ, P.PREFIXED),
        creation(G, "app", ALICE, Op.READ),
    ]}, principal=ADMIN)
    assert [r["error_code"] for r in created["results"]] == [E.NONE] * 3
    return env


async def test_without_an_authorizer_the_acl_apis_answer_security_disabled(tmp_path: Path) -> None:
    env = make_env(tmp_path, CONFIG)
    answer = await env.call(ApiKey.DESCRIBE_ACLS, 1, acl_filter())
    assert answer["error_code"] == E.SECURITY_DISABLED
    answer = await env.call(ApiKey.CREATE_ACLS, 0, {"creations": [creation(T, "t", ALICE, Op.READ)]})
    assert answer["results"][0]["error_code"] == E.SECURITY_DISABLED
    await env.create_topic("t")  # and every request is allowed, as before
    answer = await env.call(ApiKey.PRODUCE, 7, produce("t"), principal=BOB)
    assert answer["responses"][0]["partition_responses"][0]["error_code"] == E.NONE


async def test_write_without_read_and_prefixed_read(tmp_path: Path) -> None:
    env = await secured(tmp_path)
    answer = await env.call(ApiKey.PRODUCE, 8, produce("orders"), principal=ALICE)
    assert answer["responses"][0]["partition_responses"][0]["error_code"] == E.NONE
    answer = await env.call(ApiKey.PRODUCE, 8, produce("orders"), principal=BOB)
    assert answer["responses"][0]["partition_responses"][0]["error_code"] == E.TOPIC_AUTHORIZATION_FAILED
    await env.call(ApiKey.PRODUCE, 8, produce("logs-app"), principal=ADMIN)
    answer = await env.call(ApiKey.FETCH, 11, fetch("orders", "logs-app"), principal=ALICE)
    errors = {r["topic"]: r["partitions"][0]["error_code"] for r in answer["responses"]}
    assert errors == {"orders": E.TOPIC_AUTHORIZATION_FAILED, "logs-app": E.NONE}
    readable = next(r for r in answer["responses"] if r["topic"] == "logs-app")["partitions"][0]
    assert readable["high_watermark"] == 1
    follower = dict(fetch("orders"), replica_id=1)  # a follower needs ClusterAction
    answer = await env.call(ApiKey.FETCH, 11, follower, principal=ALICE)
    assert answer["responses"][0]["partitions"][0]["error_code"] == E.TOPIC_AUTHORIZATION_FAILED


async def test_metadata_hides_topics_without_describe(tmp_path: Path) -> None:
    env = await secured(tmp_path)
    everything = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
    answer = await env.call(ApiKey.METADATA, 9, everything, principal=ALICE)
    assert sorted(t["name"] for t in answer["topics"]) == ["logs-app", "orders"]  # Write/Read imply Describe
    answer = await env.call(ApiKey.METADATA, 9, dict(everything, topics=[{"name": "secret"}]), principal=ALICE)
    assert answer["topics"][0]["error_code"] == E.TOPIC_AUTHORIZATION_FAILED
    with_ops = dict(everything, topics=[{"name": "orders"}], include_topic_authorized_operations=True,
                    include_cluster_authorized_operations=True)
    answer = await env.call(ApiKey.METADATA, 9, with_ops, principal=ALICE)
    assert answer["topics"][0]["topic_authorized_operations"] == 1 << Op.WRITE | 1 << Op.DESCRIBE  # KIP-430
    assert answer["cluster_authorized_operations"] == 0
    answer = await env.call(ApiKey.METADATA, 9, everything, principal=ADMIN)  # super user
    assert {"logs-app", "orders", "secret"} <= {t["name"] for t in answer["topics"]}


async def test_group_read_is_needed_to_join(tmp_path: Path) -> None:
    env = await secured(tmp_path)
    answer = await env.call(ApiKey.JOIN_GROUP, 5, join("other"), principal=ALICE)
    assert answer["error_code"] == E.GROUP_AUTHORIZATION_FAILED
    found = await env.call(ApiKey.FIND_COORDINATOR, 3, {"key": "other", "key_type": 0}, principal=ALICE)
    assert found["error_code"] == E.GROUP_AUTHORIZATION_FAILED
    found = await env.call(ApiKey.FIND_COORDINATOR, 3, {"key": "app", "key_type": 0}, principal=ALICE)
    assert found["error_code"] == E.NONE
    commit = {"group_id": "app", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
              "retention_time_ms": -1, "topics": [
                  {"name": n, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                              "committed_leader_epoch": -1, "committed_metadata": ""}]}
                  for n in ("logs-app", "orders")]}
    answer = await env.call(ApiKey.OFFSET_COMMIT, 7, commit, principal=ALICE)
    errors = {t["name"]: t["partitions"][0]["error_code"] for t in answer["topics"]}
    assert errors == {"logs-app": E.NONE, "orders": E.TOPIC_AUTHORIZATION_FAILED}  # Write does not give Read
    answer = await env.call(ApiKey.OFFSET_COMMIT, 7, commit, principal=BOB)
    assert {t["partitions"][0]["error_code"] for t in answer["topics"]} == {E.GROUP_AUTHORIZATION_FAILED}


async def test_acl_apis_need_cluster_permissions_and_persist(tmp_path: Path) -> None:
    env = await secured(tmp_path)
    answer = await env.call(ApiKey.CREATE_ACLS, 2, {"creations": [creation(T, "x", BOB, Op.READ)]},
                            principal=ALICE)
    assert answer["results"][0]["error_code"] == E.CLUSTER_AUTHORIZATION_FAILED
    answer = await env.call(ApiKey.DESCRIBE_ACLS, 3, acl_filter(), principal=ALICE)
    assert answer["error_code"] == E.CLUSTER_AUTHORIZATION_FAILED
    bad = await env.call(ApiKey.CREATE_ACLS, 3, {"creations": [creation(T, "x", BOB, Op.READ, P.MATCH),
                                                               creation(C, "other", BOB, Op.ALTER),
                                                               creation(T, "x", "bob", Op.READ)]},
                         principal=ADMIN)
    assert [r["error_code"] for r in bad["results"]] == [E.INVALID_REQUEST] * 3
    # MATCH: every pattern that covers logs-app (the prefixed logs-), not the literal orders.
    answer = await env.call(ApiKey.DESCRIBE_ACLS, 3, acl_filter(T, "logs-app", P.MATCH), principal=ADMIN)
    assert [(r["resource_name"], r["pattern_type"]) for r in answer["resources"]] == [("logs-", P.PREFIXED)]
    answer = await env.call(ApiKey.DESCRIBE_ACLS, 0, acl_filter(rtype=T, pattern=P.LITERAL), principal=ADMIN)
    assert [r["resource_name"] for r in answer["resources"]] == ["orders"]  # v0: literal patterns only
    on_disk = json.loads((tmp_path / ACLS_FILE).read_text())["acls"]
    assert {(a["name"], a["patternType"], a["operation"]) for a in on_disk} == {
        ("orders", "LITERAL", "Write"), ("logs-", "PREFIXED", "Read"), ("app", "LITERAL", "Read")}
    deleted = await env.call(ApiKey.DELETE_ACLS, 3, {"filters": [acl_filter(T, "logs-", P.PREFIXED)]},
                             principal=ADMIN)
    matching = deleted["filter_results"][0]["matching_acls"]
    assert [(m["resource_name"], m["principal"], m["operation"]) for m in matching] == [("logs-", ALICE, Op.READ)]
    answer = await env.call(ApiKey.FETCH, 11, fetch("logs-app"), principal=ALICE)
    assert answer["responses"][0]["partitions"][0]["error_code"] == E.TOPIC_AUTHORIZATION_FAILED
    reloaded = FileAclStore(tmp_path / ACLS_FILE)
    await reloaded.start()
    assert {b.name for b in reloaded.cache.all()} == {"orders", "app"}


async def test_cluster_level_apis(tmp_path: Path) -> None:
    env = await secured(tmp_path)
    update = {"controller_id": 1, "controller_epoch": 1, "broker_epoch": -1, "ungrouped_partition_states": [],
              "live_brokers": []}
    answer = await env.call(ApiKey.UPDATE_METADATA, 5, update, principal=ALICE)
    assert answer["error_code"] == E.CLUSTER_AUTHORIZATION_FAILED
    answer = await env.call(ApiKey.UPDATE_METADATA, 5, update, principal=ADMIN)
    assert answer["error_code"] == E.NOT_CONTROLLER  # authorized; a standalone broker takes no controller
    create = {"topics": [{"name": "new", "num_partitions": 1, "replication_factor": 1, "assignments": [],
                          "configs": []}], "timeout_ms": 1000, "validate_only": False}
    answer = await env.call(ApiKey.CREATE_TOPICS, 5, create, principal=ALICE)
    assert answer["topics"][0]["error_code"] == E.TOPIC_AUTHORIZATION_FAILED
    answer = await env.call(ApiKey.DELETE_TOPICS, 4, {"topic_names": ["orders"], "timeout_ms": 1000},
                            principal=ALICE)
    assert answer["responses"][0]["error_code"] == E.TOPIC_AUTHORIZATION_FAILED
    init = {"transactional_id": None, "transaction_timeout_ms": 1000, "producer_id": -1, "producer_epoch": -1}
    answer = await env.call(ApiKey.INIT_PRODUCER_ID, 4, init, principal=ALICE)
    assert answer["error_code"] == E.NONE  # KIP-679: Write on some topic is enough for idempotence
    answer = await env.call(ApiKey.INIT_PRODUCER_ID, 4, init, principal=BOB)
    assert answer["error_code"] == E.CLUSTER_AUTHORIZATION_FAILED


async def test_a_store_that_cannot_write_answers_unknown_server_error(tmp_path: Path) -> None:
    store = FileAclStore(tmp_path / "missing-dir" / ACLS_FILE)  # its directory does not exist: writes fail
    await store.start()
    env = make_env(tmp_path, CONFIG, acls=store)
    answer = await env.call(ApiKey.CREATE_ACLS, 3, {"creations": [creation(T, "t", ALICE, Op.READ)]},
                            principal=ADMIN)
    assert answer["results"][0]["error_code"] == E.UNKNOWN_SERVER_ERROR
    assert store.cache.all() == []  # nothing half-applied


async def test_a_waiting_fetch_answers_the_unauthorized_topics_with_the_readable_ones(tmp_path: Path) -> None:
    env = await secured(tmp_path)
    await env.call(ApiKey.PRODUCE, 8, produce("logs-app"), principal=ADMIN)
    body = dict(fetch("orders", "logs-app"), max_wait_ms=500)  # nothing new to read at offset 1: it waits
    request = Request(RequestHeader(ApiKey.FETCH, 11, 1, "t"), REGISTRY[ApiKey.FETCH], b"", 0, "127.0.0.1",
                      principal=ALICE)
    waiting = ROUTES[ApiKey.FETCH](env.ctx, request, body)
    assert isinstance(waiting, asyncio.Future) and not waiting.done()
    env.timer.advance(500)
    answer = await asyncio.wait_for(waiting, 10)
    errors = {r["topic"]: r["partitions"][0]["error_code"] for r in answer["responses"]}
    assert errors == {"orders": E.TOPIC_AUTHORIZATION_FAILED, "logs-app": E.NONE}


async def describe_group(env: Env, version: int, body: dict[str, Any], principal: str) -> dict[str, Any]:
    """DescribeGroups' one group, once the coordinator has loaded its offsets partition (bounded wait)."""
    for _ in range(100):
        answer = await env.call(ApiKey.DESCRIBE_GROUPS, version, body, principal=principal)
        if answer["groups"][0]["error_code"] != E.COORDINATOR_LOAD_IN_PROGRESS:
            return dict(answer["groups"][0])
        await asyncio.sleep(0.05)
    raise AssertionError(f"the group coordinator did not load within 5 s: {answer}")


async def test_describe_groups_authorized_operations(tmp_path: Path) -> None:
    """KIP-430 for groups: the bits of the group operations (Read, Describe, Delete) the principal may do."""
    env = await secured(tmp_path)
    found = await env.call(ApiKey.FIND_COORDINATOR, 3, {"key": "app", "key_type": 0}, principal=ALICE)
    assert found["error_code"] == E.NONE  # creates __consumer_offsets
    commit = {"group_id": "app", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
              "retention_time_ms": -1, "topics": [{"name": "logs-app", "partitions": [
                  {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                   "committed_metadata": ""}]}]}
    for _ in range(100):  # the group exists (Empty) once a simple commit went in
        answer = await env.call(ApiKey.OFFSET_COMMIT, 7, commit, principal=ALICE)
        if answer["topics"][0]["partitions"][0]["error_code"] != E.COORDINATOR_LOAD_IN_PROGRESS:
            break
        await asyncio.sleep(0.05)
    assert answer["topics"][0]["partitions"][0]["error_code"] == E.NONE
    asked = {"groups": ["app"], "include_authorized_operations": True}

    group = await describe_group(env, 5, asked, ALICE)  # Read on the group; Read implies Describe
    assert (group["error_code"], group["group_state"]) == (E.NONE, "Empty")
    assert group["authorized_operations"] == 1 << Op.READ | 1 << Op.DESCRIBE
    group = await describe_group(env, 3, asked, ADMIN)  # a super user: every group operation
    assert group["authorized_operations"] == 1 << Op.READ | 1 << Op.DESCRIBE | 1 << Op.DELETE
    unknown = -(1 << 31)  # Kafka's "not asked for" sentinel, INT32_MIN
    group = await describe_group(env, 5, dict(asked, include_authorized_operations=False), ALICE)
    assert (group["error_code"], group["authorized_operations"]) == (E.NONE, unknown)
    group = await describe_group(env, 5, asked, BOB)  # may not Describe: refused, no bits
    assert (group["error_code"], group["authorized_operations"]) == (E.GROUP_AUTHORIZATION_FAILED, unknown)
    group = await describe_group(env, 2, {"groups": ["app"]}, ALICE)  # before v3 (not on the wire): the default
    assert (group["error_code"], group["authorized_operations"]) == (E.NONE, unknown)


async def test_describe_groups_without_an_authorizer_leaves_operations_unknown(tmp_path: Path) -> None:
    env = make_env(tmp_path, CONFIG)
    found = await env.call(ApiKey.FIND_COORDINATOR, 3, {"key": "app", "key_type": 0})
    assert found["error_code"] == E.NONE
    group = await describe_group(env, 5, {"groups": ["app"], "include_authorized_operations": True}, ALICE)
    assert (group["error_code"], group["authorized_operations"]) == (E.NONE, -(1 << 31))
