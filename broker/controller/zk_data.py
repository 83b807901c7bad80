"""Kafka's znode layout and the JSON in each znode (ZkData in Kafka), as pure functions.

Parsers raise ``MalformedZnode`` (path + reason) on anything they cannot use; callers log it and skip the znode,
so a hand-edited znode never stops a broker or the controller.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from moldau.protocol.types import TopicPartition

# --- paths ------------------------------------------------------------------------------------------------
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
BROKER_SEQID = "/brokers/seqid"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CONFIG_TOPICS = "/config/topics"
CONFIG_CHANGES = "/config/changes"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"  # Kafka's ZooKeeper-era reassignment requests
ISR_CHANGE = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
LOG_DIR_FAILURE_EVENT = 1  # Kafka's LogDirEventNotificationHandler.LogDirFailureEvent
CLUSTER_ID = "/cluster/id"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
PERSISTENT_PATHS = (BROKER_IDS, BROKER_TOPICS, CONFIG_TOPICS, CONFIG_CHANGES, DELETE_TOPICS, ISR_CHANGE,
                    LOG_DIR_EVENT, "/admin", "/config")

SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}"


def state_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


class MalformedZnode(ValueError):
    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"malformed znode {path}: {reason}")
        self.path = path


def _now_ms() -> str:
    return str(int(time.time() * 1000))


def _dumps(data: dict[str, Any]) -> bytes:
    return json.dumps(data, separators=(",", ":")).encode()


def _loads(path: str, raw: bytes | None) -> dict[str, Any]:
    if not raw:
        raise MalformedZnode(path, "empty")
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedZnode(path, f"not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise MalformedZnode(path, "not a JSON object")
    return data


def _int_list(path: str, value: Any, what: str) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise MalformedZnode(path, f"{what} must be a list of integers")
    return list(value)


def _int(path: str, data: dict[str, Any], key: str) -> int:
    value = data.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise MalformedZnode(path, f"{key} must be an integer")
    return value


# --- topic ids: Kafka writes Uuid.toString(), URL-safe base64 without padding ----------------------------------
def topic_id_to_str(topic_id: bytes) -> str:
    return base64.urlsafe_b64encode(topic_id).decode().rstrip("=")


def topic_id_from_str(text: str) -> bytes:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError("a topic id has 16 bytes")
    return raw


def new_topic_id() -> bytes:
    return uuid.uuid4().bytes


# --- /brokers/ids/<id> -------------------------------------------------------------------------------------
@dataclass(slots=True)
class BrokerInfo:
    broker_id: int
    host: str
    port: int
    rack: str | None = None
    # (listener name, security protocol, host, port)
    endpoints: list[tuple[str, str, str, int]] = field(default_factory=list)
    # The czxid of the registration znode: changes each time the broker registers anew (its "broker epoch").
    epoch: int = -1


def broker_registration(info: BrokerInfo, protocol_map: dict[str, str]) -> bytes:
    data: dict[str, Any] = {
        "listener_security_protocol_map": {name: protocol_map.get(name, name) for name, *_ in info.endpoints},
        "endpoints": [f"{name}://{host}:{port}" for name, _, host, port in info.endpoints],
        "jmx_port": -1, "features": {}, "host": info.host, "port": info.port,
        "timestamp": _now_ms(), "version": 5,
    }
    if info.rack is not None:
        data["rack"] = info.rack
    return _dumps(data)


def parse_broker_registration(path: str, broker_id: int, raw: bytes | None, czxid: int) -> BrokerInfo:
    data = _loads(path, raw)
    endpoints: list[tuple[str, str, str, int]] = []
    protocols = data.get("listener_security_protocol_map") or {}
    if not isinstance(protocols, dict):
        raise MalformedZnode(path, "listener_security_protocol_map must be an object")
    raw_endpoints = data.get("endpoints")
    if not isinstance(raw_endpoints, list) or not raw_endpoints:
        raise MalformedZnode(path, "endpoints must be a non-empty list")
    for ep in raw_endpoints:
        if not isinstance(ep, str) or "://" not in ep:
            raise MalformedZnode(path, f"bad endpoint {ep!r}")
        name, rest = ep.split("://", 1)
        host, sep, port = rest.rpartition(":")
        if not sep or not port.isdigit():
            raise MalformedZnode(path, f"bad endpoint {ep!r}")
        endpoints.append((name, str(protocols.get(name, name)), host.strip("[]"), int(port)))
    rack = data.get("rack")
    if rack is not None and not isinstance(rack, str):
        raise MalformedZnode(path, "rack must be a string")
    _, _, first_host, first_port = endpoints[0]
    return BrokerInfo(broker_id, first_host, first_port, rack, endpoints, czxid)


# --- /controller, /controller_epoch ----------------------------------------------------------------------------
def controller_data(broker_id: int) -> bytes:
    return _dumps({"version": 1, "brokerid": broker_id, "timestamp": _now_ms()})


def parse_controller(raw: bytes | None) -> int:
    return _int(CONTROLLER, _loads(CONTROLLER, raw), "brokerid")


def parse_controller_epoch(raw: bytes | None) -> int:
    try:
        return int((raw or b"").decode().strip())
    except (ValueError, UnicodeDecodeError):
        raise MalformedZnode(CONTROLLER_EPOCH, f"not an integer: {raw!r}") from None


# --- /brokers/topics/<t> ----------------------------------------------------------------------------------------
@dataclass(slots=True)
class TopicAssignment:
    name: str
    topic_id: bytes
    partitions: dict[int, list[int]]
    # Reassignments in progress (KIP-455): replicas being added to / removed from each partition.
    adding: dict[int, list[int]] = field(default_factory=dict)
    removing: dict[int, list[int]] = field(default_factory=dict)


def topic_assignment(topic_id: bytes, partitions: dict[int, list[int]], adding: dict[int, list[int]] | None = None,
                     removing: dict[int, list[int]] | None = None) -> bytes:
    """Version 3 (KIP-455): ``adding_replicas``/``removing_replicas`` of partitions being reassigned."""
    return _dumps({"version": 3, "topic_id": topic_id_to_str(topic_id),
                   "partitions": {str(p): list(r) for p, r in sorted(partitions.items())},
                   "adding_replicas": {str(p): list(r) for p, r in sorted((adding or {}).items()) if r},
                   "removing_replicas": {str(p): list(r) for p, r in sorted((removing or {}).items()) if r}})


def parse_topic_assignment(topic: str, raw: bytes | None) -> TopicAssignment:
    path = topic_path(topic)
    data = _loads(path, raw)
    parts = data.get("partitions")
    if not isinstance(parts, dict) or not parts:
        raise MalformedZnode(path, "partitions must be a non-empty object")
    partitions: dict[int, list[int]] = {}
    for key, replicas in parts.items():
        if not str(key).isdigit():
            raise MalformedZnode(path, f"bad partition id {key!r}")
        partitions[int(key)] = _int_list(path, replicas, f"replicas of partition {key}")
        if not partitions[int(key)]:
            raise MalformedZnode(path, f"partition {key} has no replicas")
    text = data.get("topic_id")
    try:
        # Topics written by tools without an id (version 1/2 znodes) get a stable id derived from the name.
        topic_id = topic_id_from_str(text) if isinstance(text, str) else uuid.uuid5(uuid.NAMESPACE_URL,
                                                                                    topic).bytes
    except ValueError:
        raise MalformedZnode(path, f"bad topic_id {text!r}") from None
    moving: list[dict[int, list[int]]] = [{}, {}]
    for key, out in (("adding_replicas", moving[0]), ("removing_replicas", moving[1])):
        found = data.get(key) or {}
        if isinstance(found, dict):
            for p, replicas in found.items():
                if str(p).isdigit() and int(p) in partitions:
                    out[int(p)] = _int_list(path, replicas, f"{key} of partition {p}")
    return TopicAssignment(topic, topic_id, partitions, moving[0], moving[1])


def reassign_partitions(partitions: dict[TopicPartition, list[int]]) -> bytes:
    return _dumps({"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": list(r)}
                                                for (t, p), r in sorted(partitions.items())]})


def parse_reassign_partitions(raw: bytes | None) -> dict[TopicPartition, list[int]]:
    """/admin/reassign_partitions: ``{"version": 1, "partitions": [{"topic", "partition", "replicas"}]}``."""
    data = _loads(REASSIGN_PARTITIONS, raw)
    out: dict[TopicPartition, list[int]] = {}
    entries = data.get("partitions")
    if not isinstance(entries, list):
        raise MalformedZnode(REASSIGN_PARTITIONS, "partitions must be a list")
    for e in entries:
        if not isinstance(e, dict) or not isinstance(e.get("topic"), str) or not isinstance(e.get("partition"), int):
            raise MalformedZnode(REASSIGN_PARTITIONS, f"bad entry {e!r}")
        out[(e["topic"], e["partition"])] = _int_list(REASSIGN_PARTITIONS, e.get("replicas"), "replicas")
    return out


# --- /brokers/topics/<t>/partitions/<p>/state -------------------------------------------------------------------
@dataclass(slots=True)
class LeaderIsr:
    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int
    zk_version: int = 0  # the state znode's version ("partition epoch")


def partition_state(state: LeaderIsr) -> bytes:
    """The state znode's JSON (the bytes ``_dumps`` gives for the same object, a quarter of its cost: a broker
    death writes 10,010 of them)."""
    isr = ",".join([str(int(r)) for r in state.isr])
    return (f'{{"controller_epoch":{int(state.controller_epoch)},"leader":{int(state.leader)},"version":1,'
            f'"leader_epoch":{int(state.leader_epoch)},"isr":[{isr}]}}').encode()


def parse_partition_state(topic: str, partition: int, raw: bytes | None, zk_version: int) -> LeaderIsr:
    # A new controller reads 10,010 of these at once: a well-formed one is taken in one go, anything else goes
    # the checked way below, which names what is wrong.
    try:
        data = json.loads(raw) if raw else None
        if type(data) is dict:
            leader, epoch, isr, controller_epoch = (data.get("leader"), data.get("leader_epoch"), data.get("isr"),
                                                    data.get("controller_epoch"))
            if type(leader) is int and type(epoch) is int and type(controller_epoch) is int and type(isr) is list \
                    and all(type(r) is int for r in isr):
                return LeaderIsr(leader, epoch, isr, controller_epoch, zk_version)
    except (ValueError, UnicodeDecodeError):
        pass
    path = state_path(topic, partition)
    data = _loads(path, raw)
    return LeaderIsr(_int(path, data, "leader"), _int(path, data, "leader_epoch"),
                     _int_list(path, data.get("isr"), "isr"), _int(path, data, "controller_epoch"), zk_version)


# --- /config/topics/<t> -----------------------------------------------------------------------------------------
def topic_config(configs: dict[str, str]) -> bytes:
    return _dumps({"version": 1, "config": {k: str(v) for k, v in sorted(configs.items())}})


def parse_topic_config(topic: str, raw: bytes | None) -> dict[str, str]:
    if not raw:
        return {}
    path = topic_config_path(topic)
    data = _loads(path, raw)
    config = data.get("config", {})
    if not isinstance(config, dict):
        raise MalformedZnode(path, "config must be an object")
    return {str(k): str(v) for k, v in config.items()}


# --- /log_dir_event_notification/log_dir_event_<seq> ---------------------------------------------------------
def log_dir_event(broker_id: int) -> bytes:
    return _dumps({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})


def parse_log_dir_event(path: str, raw: bytes | None) -> int:
    """The broker that reported a failed log dir."""
    data = _loads(path, raw)
    broker = data.get("broker")
    if not isinstance(broker, int) or isinstance(broker, bool):
        raise MalformedZnode(path, "broker must be an integer")
    return broker


# --- /isr_change_notification/isr_change_<seq> ------------------------------------------------------------------
def isr_change(partitions: list[TopicPartition]) -> bytes:
    return _dumps({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})


def parse_isr_change(path: str, raw: bytes | None) -> list[TopicPartition]:
    data = _loads(path, raw)
    parts = data.get("partitions")
    if not isinstance(parts, list):
        raise MalformedZnode(path, "partitions must be a list")
    out = []
    for p in parts:
        if not isinstance(p, dict) or not isinstance(p.get("topic"), str) or not isinstance(p.get("partition"),
                                                                                            int):
            raise MalformedZnode(path, f"bad partition entry {p!r}")
        out.append((p["topic"], p["partition"]))
    return out


# --- /cluster/id, /latest_producer_id_block --------------------------------------------------------------------
def cluster_id_data(cluster_id: str) -> bytes:
    return _dumps({"version": "1", "id": cluster_id})


def parse_cluster_id(raw: bytes | None) -> str:
    data = _loads(CLUSTER_ID, raw)
    value = data.get("id")
    if not isinstance(value, str) or not value:
        raise MalformedZnode(CLUSTER_ID, "id must be a non-empty string")
    return value


def producer_id_block(broker_id: int, start: int, end: int) -> bytes:
    """Kafka's format: the block [start, end] (inclusive) belongs to ``broker_id``."""
    return _dumps({"version": 1, "broker": broker_id, "block_start": str(start), "block_end": str(end)})


def parse_producer_id_block(raw: bytes | None) -> int:
    """The block_end of the latest block."""
    data = _loads(PRODUCER_ID_BLOCK, raw)
    try:
        return int(data["block_end"])
    except (KeyError, ValueError, TypeError):
        raise MalformedZnode(PRODUCER_ID_BLOCK, "block_end must be an integer") from None
