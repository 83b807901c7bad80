"""Znode contents (Kafka's formats) and controller request bodies through the real codecs."""

from __future__ import annotations

import json

import pytest

from moldau.broker.controller import requests as R
from moldau.broker.controller import zk_data as Z
from moldau.broker.controller.zk import split_chroot
from moldau.protocol.api import REGISTRY, ApiKey


def test_broker_registration_round_trip() -> None:
    info = Z.BrokerInfo(3, "127.0.0.1", 9094, "r1", [("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9094)])
    raw = Z.broker_registration(info, {"PLAINTEXT": "PLAINTEXT"})
    data = json.loads(raw)
    assert data["version"] == 5 and data["endpoints"] == ["PLAINTEXT://127.0.0.1:9094"]
    assert data["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"} and data["jmx_port"] == -1
    assert data["rack"] == "r1" and data["host"] == "127.0.0.1" and data["port"] == 9094
    parsed = Z.parse_broker_registration("/brokers/ids/3", 3, raw, 77)
    assert (parsed.host, parsed.port, parsed.rack, parsed.epoch) == ("127.0.0.1", 9094, "r1", 77)


def test_topic_and_state_formats() -> None:
    tid = Z.new_topic_id()
    raw = Z.topic_assignment(tid, {0: [1, 2, 3], 1: [2, 3, 1]})
    data = json.loads(raw)
    assert data["version"] == 3 and data["partitions"] == {"0": [1, 2, 3], "1": [2, 3, 1]}
    assert data["adding_replicas"] == {} and data["removing_replicas"] == {} and len(data["topic_id"]) == 22
    parsed = Z.parse_topic_assignment("t", raw)
    assert parsed.topic_id == tid and parsed.partitions[1] == [2, 3, 1]
    state = json.loads(Z.partition_state(Z.LeaderIsr(2, 5, [2, 3], 7)))
    assert state == {"controller_epoch": 7, "leader": 2, "version": 1, "leader_epoch": 5, "isr": [2, 3]}
    # A topic written by an older tool (no topic_id) still loads.
    assert Z.parse_topic_assignment("old", b'{"version":1,"partitions":{"0":[1]}}').partitions == {0: [1]}


@pytest.mark.parametrize("state", [Z.LeaderIsr(2, 5, [2, 3], 7), Z.LeaderIsr(-1, 0, [], 0, 4),
                                   Z.LeaderIsr(1001, 2**31 - 1, [1001, 3, 2], 12, 9)])
def test_a_state_znode_is_compact_json_read_back_as_written(state: Z.LeaderIsr) -> None:
    raw = Z.partition_state(state)
    assert raw == json.dumps({"controller_epoch": state.controller_epoch, "leader": state.leader, "version": 1,
                              "leader_epoch": state.leader_epoch, "isr": state.isr}, separators=(",", ":")).encode()
    back = Z.parse_partition_state("t", 0, raw, 3)
    assert (back.leader, back.leader_epoch, back.isr, back.controller_epoch, back.zk_version) == \
        (state.leader, state.leader_epoch, state.isr, state.controller_epoch, 3)


@pytest.mark.parametrize("raw", [b"", b"nope", b"[]", b'{"partitions":{"x":[1]}}', b'{"partitions":{"0":"1"}}',
                                 b'{"partitions":{}}', b'{"partitions":{"0":[]}}'])
def test_malformed_topic_znodes_name_the_path(raw: bytes) -> None:
    with pytest.raises(Z.MalformedZnode, match="/brokers/topics/bad"):
        Z.parse_topic_assignment("bad", raw)


def test_malformed_state_and_broker() -> None:
    with pytest.raises(Z.MalformedZnode, match="partitions/0/state"):
        Z.parse_partition_state("t", 0, b'{"leader":"x"}', 0)
    with pytest.raises(Z.MalformedZnode, match="/brokers/ids/1"):
        Z.parse_broker_registration("/brokers/ids/1", 1, b'{"endpoints":["nonsense"]}', 0)
    assert Z.parse_controller_epoch(b"12") == 12
    with pytest.raises(Z.MalformedZnode):
        Z.parse_controller_epoch(b"x")


def test_split_chroot() -> None:
    assert split_chroot("a:1,b:2/moldau") == ("a:1,b:2", "/moldau")
    assert split_chroot("a:1") == ("a:1", "")
    assert split_chroot("a:1/") == ("a:1", "")


def _round_trip(key: ApiKey, version: int, body: dict[str, object]) -> dict[str, object]:
    api = REGISTRY[key]
    encoded = api.encode_request(version, body)
    decoded, _ = api.request_decoder(version)(memoryview(encoded), 0)
    return decoded


@pytest.mark.parametrize("version", [0, 1, 2, 4, 5, 7])
def test_leader_and_isr_body_reads_back_in_every_shape(version: int) -> None:
    info = R.PartitionInfo("t", b"\x01" * 16, 3, Z.LeaderIsr(2, 4, [2, 1], 9, 5), [1, 2], is_new=True)
    leader = Z.BrokerInfo(2, "h", 1, None, [("PLAINTEXT", "PLAINTEXT", "h", 1)])
    body = R.leader_and_isr(0, 9, 123, [info], [leader])
    decoded = _round_trip(ApiKey.LEADER_AND_ISR, version, body)
    states = list(R.partition_states(decoded))
    assert len(states) == 1
    topic, _, s = states[0]
    assert (topic, s["partition_index"], s["leader"], s["leader_epoch"], s["isr"], s["replicas"]) == \
        ("t", 3, 2, 4, [2, 1], [1, 2])
    assert decoded["controller_epoch"] == 9


@pytest.mark.parametrize("version", [0, 1, 3, 5, 7, 8])
def test_update_metadata_body_reads_back(version: int) -> None:
    info = R.PartitionInfo("t", b"\x02" * 16, 0, Z.LeaderIsr(1, 0, [1], 3, 0), [1, 2])
    live = [Z.BrokerInfo(1, "h1", 9092, "r", [("PLAINTEXT", "PLAINTEXT", "h1", 9092)])]
    decoded = _round_trip(ApiKey.UPDATE_METADATA, version, R.update_metadata(1, 3, 5, [info], live))
    assert [(b, h, p) for b, h, p, _ in R.live_brokers(decoded)] == [(1, "h1", 9092)]
    (_, _, s), = list(R.partition_states(decoded))
    assert s["leader"] == 1 and s["replicas"] == [1, 2]
    if version >= 4:
        assert s["offline_replicas"] == [2]


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_stop_replica_body_reads_back(version: int) -> None:
    decoded = _round_trip(ApiKey.STOP_REPLICA, version, R.stop_replica(1, 2, 3, [("t", 0), ("t", 1)], True))
    assert sorted(R.stop_replica_partitions(decoded)) == [("t", 0, True), ("t", 1, True)]


def test_reassignment_znodes_round_trip() -> None:
    raw = Z.topic_assignment(bytes(16), {0: [2, 3, 4, 1], 1: [1, 2]}, {0: [4]}, {0: [1]})
    parsed = Z.parse_topic_assignment("t", raw)
    assert parsed.partitions == {0: [2, 3, 4, 1], 1: [1, 2]}
    assert (parsed.adding, parsed.removing) == ({0: [4]}, {0: [1]})
    request = Z.reassign_partitions({("t", 0): [2, 3]})
    assert Z.parse_reassign_partitions(request) == {("t", 0): [2, 3]}
    with pytest.raises(Z.MalformedZnode):
        Z.parse_reassign_partitions(b'{"version": 1, "partitions": [{"topic": 5}]}')


@pytest.mark.parametrize("version", [1, 2, 3, 7])
def test_update_metadata_carries_every_listener(version: int) -> None:
    """v3+ names each endpoint's listener; v1-v2 only its security protocol (the listener is named after it)."""
    live = [Z.BrokerInfo(1, "int1", 19092, None, [("INTERNAL", "PLAINTEXT", "int1", 19092),
                                                   ("EXTERNAL", "PLAINTEXT", "ext1", 9092)])]
    decoded = _round_trip(ApiKey.UPDATE_METADATA, version, R.update_metadata(1, 3, 5, [], live))
    (broker_id, _, endpoints), = list(R.live_broker_endpoints(decoded))
    if version >= 3:
        assert (broker_id, endpoints) == (1, [("INTERNAL", "int1", 19092), ("EXTERNAL", "ext1", 9092)])
    else:
        assert (broker_id, endpoints) == (1, [("PLAINTEXT", "int1", 19092), ("PLAINTEXT", "ext1", 9092)])
