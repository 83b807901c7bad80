"""CreatePartitions, DeleteRecords, ElectLeaders, DescribeLogDirs handlers on a real standalone broker's components,
through the strict codecs of every version."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from moldau.protocol.api import ApiKey
from moldau.protocol.errors import ErrorCode as E
from moldau.protocol.records import build_batch
from tests.unit.broker.apis.handler_env import Env, make_env

NO_AUTO_CREATE = {"auto.create.topics.enable": "false", "offsets.topic.num.partitions": "1"}


def _create(name: str, count: int, assignments: list[list[int]] | None = None,
            validate_only: bool = False) -> dict[str, Any]:
    return {"topics": [{"name": name, "count": count,
                        "assignments": None if assignments is None else [{"broker_ids": a} for a in assignments]}],
            "timeout_ms": 5000, "validate_only": validate_only}


async def _produce(env: Env, topic: str, n: int, partition: int = 0) -> None:
    batch = build_batch([(None, f"v{i}".encode(), [], 1000) for i in range(n)])
    answer = await env.call(ApiKey.PRODUCE, 9, {"acks": 1, "timeout_ms": 1000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]})
    assert answer["responses"][0]["partition_responses"][0]["error_code"] == E.NONE


async def test_create_partitions_adds_partitions_with_logs(tmp_path: Path) -> None:
    env = make_env(tmp_path, NO_AUTO_CREATE)
    await env.create_topic("t", 2)
    for version in (0, 1, 2, 3):
        answer = await env.call(ApiKey.CREATE_PARTITIONS, version, _create("t", 3 + version))
        assert answer["results"] == [{"name": "t", "error_code": E.NONE, "error_message": None}]
    topic = env.metadata.topic("t")
    assert topic is not None and sorted(topic.partitions) == [0, 1, 2, 3, 4, 5]
    assert all(s.leader == 0 and s.replicas == [0] for s in topic.partitions.values())
    assert env.log_manager.get_log("t", 5) is not None
    await _produce(env, "t", 3, partition=5)
    meta = await env.call(ApiKey.METADATA, 9, {"topics": [{"name": "t"}], "allow_auto_topic_creation": False})
    assert len(meta["topics"][0]["partitions"]) == 6


async def test_create_partitions_errors(tmp_path: Path) -> None:
    env = make_env(tmp_path, NO_AUTO_CREATE)
    await env.create_topic("t", 3)

    async def result(body: dict[str, Any], version: int = 3) -> tuple[int, str | None]:
        r = (await env.call(ApiKey.CREATE_PARTITIONS, version, body))["results"][0]
        return r["error_code"], r["error_message"]

    assert await result(_create("t", 2)) == (
        E.INVALID_PARTITIONS, "Topic currently has 3 partitions, which is higher than the requested 2.")
    assert await result(_create("t", 3)) == (E.INVALID_PARTITIONS, "Topic already has 3 partitions.")
    assert (await result(_create("nope", 5)))[0] == E.UNKNOWN_TOPIC_OR_PARTITION
    code, message = await result(_create("t", 5, [[0]]))
    assert code == E.INVALID_REPLICA_ASSIGNMENT and "by 2 but 1 assignments" in (message or "")
    code, message = await result(_create("t", 4, [[7]]))
    assert code == E.INVALID_REPLICA_ASSIGNMENT and "Unknown broker(s) in replica assignment: 7" in (message or "")
    assert (await result(_create("t", 4, [[0, 0]])))[0] == E.INVALID_REPLICA_ASSIGNMENT
    dup = {"topics": _create("t", 4)["topics"] * 2, "timeout_ms": 0, "validate_only": False}
    answer = await env.call(ApiKey.CREATE_PARTITIONS, 0, dup)
    assert [r["error_code"] for r in answer["results"]] == [E.INVALID_REQUEST, E.INVALID_REQUEST]
    # validate_only checks but changes nothing; an explicit assignment is then taken as given
    assert await result(_create("t", 5, validate_only=True)) == (E.NONE, None)
    topic = env.metadata.topic("t")
    assert topic is not None and len(topic.partitions) == 3
    assert await result(_create("t", 4, [[0]])) == (E.NONE, None)
    assert len(topic.partitions) == 4


async def test_delete_records_moves_the_log_start_offset(tmp_path: Path) -> None:
    env = make_env(tmp_path, NO_AUTO_CREATE)
    await env.create_topic("t", 2)
    await _produce(env, "t", 10)

    def body(offset: int, partition: int = 0, topic: str = "t") -> dict[str, Any]:
        return {"topics": [{"name": topic, "partitions": [{"partition_index": partition, "offset": offset}]}],
                "timeout_ms": 1000}

    async def result(b: dict[str, Any], version: int = 2) -> dict[str, Any]:
        r: dict[str, Any] = (await env.call(ApiKey.DELETE_RECORDS, version, b))["topics"][0]["partitions"][0]
        return r

    assert await result(body(4), 0) == {"partition_index": 0, "low_watermark": 4, "error_code": E.NONE}
    assert (await result(body(2), 1))["low_watermark"] == 4  # never moves back
    assert (await result(body(11)))["error_code"] == E.OFFSET_OUT_OF_RANGE  # above the high watermark
    assert (await result(body(-5)))["error_code"] == E.OFFSET_OUT_OF_RANGE
    assert (await result(body(0, partition=7)))["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
    assert (await result(body(0, topic="nope")))["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
    assert (await result(body(-1)))["low_watermark"] == 10  # -1: up to the high watermark

    listed = await env.call(ApiKey.LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "timestamp": -2}]}]})
    assert listed["topics"][0]["partitions"][0]["offset"] == 10
    fetched = await env.call(ApiKey.FETCH, 12, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "topics": [{"topic": "t", "partitions": [
            {"partition": 0, "fetch_offset": 3, "partition_max_bytes": 1 << 20}]}]})
    part = fetched["responses"][0]["partitions"][0]
    assert part["error_code"] == E.OFFSET_OUT_OF_RANGE and part["log_start_offset"] == 10
    # persisted: a reload of the log dirs starts at the new offset
    env.log_manager.shutdown()
    again = make_env(tmp_path, NO_AUTO_CREATE)
    log_ = again.log_manager.get_log("t", 0)
    assert log_ is not None and log_.log_start_offset == 10


async def test_elect_leaders_standalone(tmp_path: Path) -> None:
    env = make_env(tmp_path, NO_AUTO_CREATE)
    await env.create_topic("t", 2)
    answer = await env.call(ApiKey.ELECT_LEADERS, 0, {"topic_partitions": [{"topic": "t", "partitions": [0, 9]}],
                                                      "timeout_ms": 1000})
    results = answer["replica_election_results"][0]["partition_result"]
    assert [(r["partition_id"], r["error_code"]) for r in results] == [
        (0, E.ELECTION_NOT_NEEDED), (9, E.UNKNOWN_TOPIC_OR_PARTITION)]
    answer = await env.call(ApiKey.ELECT_LEADERS, 2, {"election_type": 1, "topic_partitions": None,
                                                      "timeout_ms": 1000})
    assert answer["error_code"] == E.NONE
    got = {(t["topic"], r["partition_id"]) for t in answer["replica_election_results"] for r in t["partition_result"]}
    assert got == {("t", 0), ("t", 1)}
    answer = await env.call(ApiKey.ELECT_LEADERS, 1, {"election_type": 5, "topic_partitions": None})
    assert answer["error_code"] == E.INVALID_REQUEST


async def test_describe_log_dirs(tmp_path: Path) -> None:
    env = make_env(tmp_path, NO_AUTO_CREATE)
    await env.create_topic("t", 2)
    await _produce(env, "t", 5, partition=1)
    size = env.log_manager.get_log("t", 1).size  # type: ignore[union-attr]
    assert size > 0
    for version in (0, 1, 2, 3, 4):
        answer = await env.call(ApiKey.DESCRIBE_LOG_DIRS, version, {"topics": None})
        [result] = answer["results"]
        assert result["error_code"] == E.NONE and result["log_dir"] == str((tmp_path / "logs").resolve())
        parts = {p["partition_index"]: p for t in result["topics"] if t["name"] == "t" for p in t["partitions"]}
        assert parts[1] == {"partition_index": 1, "partition_size": size, "offset_lag": 0, "is_future_key": False}
        assert parts[0]["partition_size"] == 0
        if version >= 4:
            assert result["total_bytes"] > 0 and 0 <= result["usable_bytes"] <= result["total_bytes"]
    answer = await env.call(ApiKey.DESCRIBE_LOG_DIRS, 2, {"topics": [{"topic": "t", "partitions": [1]}]})
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in answer["results"][0]["topics"]] \
        == [("t", [1])]
    env.log_manager.mark_dir_offline(tmp_path / "logs")
    answer = await env.call(ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None})
    assert answer["results"][0]["error_code"] == E.KAFKA_STORAGE_ERROR and answer["results"][0]["topics"] == []


async def test_delete_records_waits_for_the_in_sync_followers(tmp_path: Path) -> None:
    env = make_env(tmp_path, NO_AUTO_CREATE)
    # partition 0 replicated to a follower (broker 1) in the ISR: its fetches report its log start offset
    await env.metadata.create_topic("r", {0: [0, 1]}, {})
    await _produce(env, "r", 10)
    rm = env.replica_manager
    rm.update_follower("r", 0, 1, 10, 0)
    partition = rm.get_partition("r", 0)
    assert partition is not None and partition.high_watermark == 10
    body = {"topics": [{"name": "r", "partitions": [{"partition_index": 0, "offset": 6}]}], "timeout_ms": 5000}
    answer = asyncio.ensure_future(env.call(ApiKey.DELETE_RECORDS, 2, body))
    await asyncio.sleep(0)
    assert not answer.done() and partition.log.log_start_offset == 6  # deleted on the leader, waiting
    rm.update_follower("r", 0, 1, 10, 3)  # the follower has not caught up with the deletion yet
    await asyncio.sleep(0)
    assert not answer.done()
    rm.update_follower("r", 0, 1, 10, 6)
    result = await asyncio.wait_for(answer, 5)
    assert result["topics"][0]["partitions"][0] == {"partition_index": 0, "low_watermark": 6, "error_code": E.NONE}
    # a follower that never catches up: REQUEST_TIMED_OUT once the timeout runs out (manual timer)
    body["topics"][0]["partitions"][0]["offset"] = 8
    answer = asyncio.ensure_future(env.call(ApiKey.DELETE_RECORDS, 2, body))
    await asyncio.sleep(0)
    assert not answer.done()
    env.timer.advance(5000)
    result = await asyncio.wait_for(answer, 5)
    assert result["topics"][0]["partitions"][0]["error_code"] == E.REQUEST_TIMED_OUT
    assert partition.log.log_start_offset == 8


async def test_reassignment_apis_standalone(tmp_path: Path) -> None:
    env = make_env(tmp_path, NO_AUTO_CREATE)
    await env.create_topic("t", 1)
    body = {"timeout_ms": 1000, "topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "replicas": [0]}, {"partition_index": 1, "replicas": [0]},
        {"partition_index": 0, "replicas": None}]}]}
    answer = await env.call(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, body)
    assert answer["error_code"] == E.NONE
    # the last entry for partition 0 (a cancel) wins, as a map keyed by partition
    codes = {p["partition_index"]: p["error_code"] for p in answer["responses"][0]["partitions"]}
    assert codes == {0: E.NO_REASSIGNMENT_IN_PROGRESS, 1: E.UNKNOWN_TOPIC_OR_PARTITION}
    body["topics"][0]["partitions"] = [{"partition_index": 0, "replicas": [5]}]
    answer = await env.call(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, body)
    assert answer["responses"][0]["partitions"][0]["error_code"] == E.INVALID_REPLICA_ASSIGNMENT
    listed = await env.call(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 1000, "topics": None})
    assert listed == {"throttle_time_ms": 0, "error_code": E.NONE, "error_message": None, "topics": []}
