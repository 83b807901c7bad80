"""Error paths of the data-path and admin handlers, on real in-process components, through the strict codecs."""

from __future__ import annotations

from pathlib import Path

from moldau.protocol.api import ApiKey
from moldau.protocol.errors import ErrorCode as E
from moldau.protocol.records import build_batch
from tests.unit.broker.apis.handler_env import make_env

NO_AUTO_CREATE = {"auto.create.topics.enable": "false", "offsets.topic.num.partitions": "1"}


def _batch(n: int = 1) -> bytes:
    return build_batch([(None, f"v{i}".encode(), [], 1000) for i in range(n)])


def _produce(topic: str, acks: int = 1, index: int = 0) -> dict[str, object]:
    return {"acks": acks, "timeout_ms": 1000,
            "topic_data": [{"name": topic, "partition_data": [{"index": index, "records": _batch()}]}]}


async def test_produce_errors(tmp_path: Path) -> None:
    env = make_env(tmp_path, NO_AUTO_CREATE)
    await env.create_topic("t")
    answer = await env.call(ApiKey.PRODUCE, 7, _produce("nope"))
    assert answer["responses"][0]["partition_responses"][0]["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
    answer = await env.call(ApiKey.PRODUCE, 7, _produce("t", acks=2))
    part = answer["responses"][0]["partition_responses"][0]
    assert part["error_code"] == E.INVALID_REQUIRED_ACKS and part["base_offset"] == -1
    answer = await env.call(ApiKey.PRODUCE, 9, _produce("t"))
    part = answer["responses"][0]["partition_responses"][0]
    assert part["error_code"] == E.NONE and part["base_offset"] == 0 and part["log_start_offset"] == 0


async def test_fetch_errors(tmp_path: Path) -> None:
    env = make_env(tmp_path, NO_AUTO_CREATE)
    await env.create_topic("t")
    await env.call(ApiKey.PRODUCE, 7, _produce("t"))

    def fetch(topic: str, offset: int) -> dict[str, object]:
        return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
                "topics": [{"topic": topic, "partitions": [
                    {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}]}]}

    for version in (4, 11, 12):
        answer = await env.call(ApiKey.FETCH, version, fetch("nope", 0))
        assert answer["responses"][0]["partitions"][0]["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
        answer = await env.call(ApiKey.FETCH, version, fetch("t", 5))
        part = answer["responses"][0]["partitions"][0]
        assert part["error_code"] == E.OFFSET_OUT_OF_RANGE and part["high_watermark"] == 1
        assert part["records"] is not None and len(part["records"]) == 0


async def test_list_offsets_errors(tmp_path: Path) -> None:
    env = make_env(tmp_path, NO_AUTO_CREATE)
    await env.create_topic("t")

    def body(topic: str, ts: int) -> dict[str, object]:
        return {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "timestamp": ts, "max_num_offsets": 1}]}]}

    answer = await env.call(ApiKey.LIST_OFFSETS, 5, body("nope", -1))
    assert answer["topics"][0]["partitions"][0]["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
    answer = await env.call(ApiKey.LIST_OFFSETS, 6, body("t", -3))  # max timestamp needs v7
    assert answer["topics"][0]["partitions"][0]["error_code"] == E.UNSUPPORTED_VERSION
    answer = await env.call(ApiKey.LIST_OFFSETS, 0, body("t", -1))
    part = answer["topics"][0]["partitions"][0]
    assert part["error_code"] == E.NONE and part["old_style_offsets"] == [0]


async def test_metadata_errors(tmp_path: Path) -> None:
    env = make_env(tmp_path, NO_AUTO_CREATE)
    for version in (1, 9, 12):
        names = [{"name": "nope", "topic_id": bytes(16)}, {"name": "bad name!", "topic_id": bytes(16)}]
        answer = await env.call(ApiKey.METADATA, version, {"topics": names, "allow_auto_topic_creation": True})
        codes = {t["name"]: t["error_code"] for t in answer["topics"]}
        assert codes == {"nope": E.UNKNOWN_TOPIC_OR_PARTITION, "bad name!": E.INVALID_TOPIC_EXCEPTION}
        assert [b["node_id"] for b in answer["brokers"]] == [0] and answer["controller_id"] == 0


async def test_create_and_delete_topic_errors(tmp_path: Path) -> None:
    env = make_env(tmp_path, NO_AUTO_CREATE)
    await env.create_topic("t")

    def create(*names: str, partitions: int = 1) -> dict[str, object]:
        return {"topics": [{"name": n, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
                            "configs": []} for n in names], "timeout_ms": 1000, "validate_only": False}

    for version in (2, 5):
        answer = await env.call(ApiKey.CREATE_TOPICS, version, create("t", "d", "d", "x"))
        codes = [(t["name"], t["error_code"]) for t in answer["topics"]]
        assert codes == [("t", E.TOPIC_ALREADY_EXISTS), ("d", E.INVALID_REQUEST), ("d", E.INVALID_REQUEST),
                         ("x", E.NONE if version == 2 else E.TOPIC_ALREADY_EXISTS)]
    answer = await env.call(ApiKey.CREATE_TOPICS, 5, create("zero", partitions=0))
    assert answer["topics"][0]["error_code"] == E.INVALID_PARTITIONS
    answer = await env.call(ApiKey.DELETE_TOPICS, 4, {"topic_names": ["nope"], "timeout_ms": 1000})
    assert answer["responses"][0]["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION


async def test_group_errors(tmp_path: Path) -> None:
    env = make_env(tmp_path, NO_AUTO_CREATE)
    found = await env.call(ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
    assert found["error_code"] == E.NONE and found["node_id"] == 0  # created __consumer_offsets, leads it
    found = await env.call(ApiKey.FIND_COORDINATOR, 4, {"key_type": 2, "coordinator_keys": ["tx"]})
    assert found["coordinators"][0]["error_code"] == E.INVALID_REQUEST  # no such key type
    beat = {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None}
    for version in (0, 4):
        answer = await env.call(ApiKey.HEARTBEAT, version, beat)
        assert answer["error_code"] in (E.UNKNOWN_MEMBER_ID, E.COORDINATOR_LOAD_IN_PROGRESS)
    leave = await env.call(ApiKey.LEAVE_GROUP, 3, {"group_id": "g", "members": [
        {"member_id": "m", "group_instance_id": None}]})
    assert leave["error_code"] in (E.NONE, E.UNKNOWN_MEMBER_ID, E.COORDINATOR_LOAD_IN_PROGRESS)
    env.coordinator.shutdown()
    answer = await env.call(ApiKey.HEARTBEAT, 4, beat)
    assert answer["error_code"] == E.COORDINATOR_NOT_AVAILABLE
    described = await env.call(ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["g"], "include_authorized_operations": False})
    assert described["groups"][0]["error_code"] == E.COORDINATOR_NOT_AVAILABLE
    listed = await env.call(ApiKey.LIST_GROUPS, 4, {"states_filter": []})
    assert listed["error_code"] == E.COORDINATOR_NOT_AVAILABLE


async def test_offsets_errors(tmp_path: Path) -> None:
    env = make_env(tmp_path, NO_AUTO_CREATE)
    commit = {"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
              "retention_time_ms": -1, "topics": [{"name": "nope", "partitions": [
                  {"partition_index": 0, "committed_offset": 5, "committed_leader_epoch": -1,
                   "committed_metadata": None}]}]}
    answer = await env.call(ApiKey.OFFSET_COMMIT, 8, commit)
    assert answer["topics"][0]["partitions"][0]["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
    env.coordinator.shutdown()
    answer = await env.call(ApiKey.OFFSET_COMMIT, 2, commit)
    assert answer["topics"][0]["partitions"][0]["error_code"] == E.COORDINATOR_NOT_AVAILABLE
    fetched = await env.call(ApiKey.OFFSET_FETCH, 5, {"group_id": "g", "topics": None, "require_stable": False})
    assert fetched["error_code"] == E.COORDINATOR_NOT_AVAILABLE
    fetched = await env.call(ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": "g", "topics": None}],
                                                      "require_stable": False})
    assert fetched["groups"][0]["error_code"] == E.COORDINATOR_NOT_AVAILABLE
    deleted = await env.call(ApiKey.OFFSET_DELETE, 0, {"group_id": "g", "topics": []})
    assert deleted["error_code"] == E.COORDINATOR_NOT_AVAILABLE


async def test_init_producer_id_and_api_versions(tmp_path: Path) -> None:
    env = make_env(tmp_path, NO_AUTO_CREATE)
    answer = await env.call(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": "tx", "transaction_timeout_ms": 1000,
                                                         "producer_id": -1, "producer_epoch": -1})
    assert answer["error_code"] == E.NOT_COORDINATOR  # __transaction_state not created yet (FindCoordinator does)
    answer = await env.call(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": "tx", "transaction_timeout_ms": 10**9,
                                                         "producer_id": -1, "producer_epoch": -1})
    assert answer["error_code"] == E.INVALID_TRANSACTION_TIMEOUT  # checked first, as Kafka does
    answer = await env.call(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    assert {k["api_key"] for k in answer["api_keys"]} >= {ApiKey.PRODUCE, ApiKey.LEADER_AND_ISR}


async def test_inter_broker_requests_to_a_standalone_broker(tmp_path: Path) -> None:
    env = make_env(tmp_path, NO_AUTO_CREATE)
    body = {"controller_id": 1, "controller_epoch": 1, "broker_epoch": -1, "ungrouped_partition_states": [],
            "topic_states": [], "live_brokers": []}
    answer = await env.call(ApiKey.UPDATE_METADATA, 7, body)
    assert answer["error_code"] == E.NOT_CONTROLLER
    answer = await env.call(ApiKey.CONTROLLED_SHUTDOWN, 3, {"broker_id": 0, "broker_epoch": 1})
    assert answer["error_code"] == E.NOT_CONTROLLER and answer["remaining_partitions"] == []


async def test_metadata_auto_create_answers_leader_not_available_first(tmp_path: Path) -> None:
    """As Kafka: the Metadata request that creates a topic gets LEADER_NOT_AVAILABLE and no partitions; the
    client's next request sees the partitions. A request that may not create gets UNKNOWN_TOPIC_OR_PARTITION."""
    env = make_env(tmp_path, {"offsets.topic.num.partitions": "1", "num.partitions": "2"})

    def body(create: bool) -> dict[str, object]:
        return {"topics": [{"name": "fresh"}], "allow_auto_topic_creation": create,
                "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False}

    answer = await env.call(ApiKey.METADATA, 9, body(False))
    assert answer["topics"][0]["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
    answer = await env.call(ApiKey.METADATA, 9, body(True))
    (topic,) = answer["topics"]
    assert (topic["name"], topic["error_code"], topic["partitions"]) == ("fresh", E.LEADER_NOT_AVAILABLE, [])
    answer = await env.call(ApiKey.METADATA, 9, body(True))
    (topic,) = answer["topics"]
    assert topic["error_code"] == E.NONE and [p["partition_index"] for p in topic["partitions"]] == [0, 1]


async def test_metadata_answers_are_kept_encoded_until_the_metadata_changes(tmp_path: Path) -> None:
    env = make_env(tmp_path, NO_AUTO_CREATE)
    await env.create_topic("a", partitions=3)
    all_topics = {"topics": None, "allow_auto_topic_creation": False, "include_cluster_authorized_operations": False,
                  "include_topic_authorized_operations": False}
    first = await env.call(ApiKey.METADATA, 12, all_topics)
    assert len(env.metadata.encoded_answers) == 1
    assert await env.call(ApiKey.METADATA, 12, all_topics) == first
    await env.create_topic("b")  # a change drops the kept answers: the next one names the new topic
    assert env.metadata.encoded_answers == {}
    answer = await env.call(ApiKey.METADATA, 12, all_topics)
    assert sorted(t["name"] for t in answer["topics"]) == ["a", "b"]
    named = {**all_topics, "topics": [{"name": "nope", "topic_id": bytes(16)}]}
    await env.call(ApiKey.METADATA, 12, named)  # an answer with an error is not kept
    assert len(env.metadata.encoded_answers) == 1
