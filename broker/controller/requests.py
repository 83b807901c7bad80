"""Bodies of the controller-to-broker requests, and their reading on the broker side.

The builders fill both the old (ungrouped, v0-v1/v0-v4) and the new (grouped by topic) shapes; the encoder writes
only the fields of the version the connection negotiated, so the controller does not care which one that is. The
readers accept either shape likewise.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from moldau.broker.controller.zk_data import SECURITY_PROTOCOL_IDS, BrokerInfo, LeaderIsr
from moldau.protocol.types import TopicPartition

_PROTOCOL_NAMES = {v: k for k, v in SECURITY_PROTOCOL_IDS.items()}
LEADER_DURING_DELETE = -2  # UpdateMetadata: the partition is being deleted


@dataclass(slots=True)
class PartitionInfo:
    topic: str
    topic_id: bytes
    partition: int
    state: LeaderIsr
    replicas: list[int]
    is_new: bool = False


def _group(states: list[dict[str, Any]], ids: dict[str, bytes]) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for s in states:
        by_topic.setdefault(s["topic_name"], []).append(s)
    return [{"topic_name": t, "topic_id": ids.get(t, bytes(16)), "partition_states": ps}
            for t, ps in by_topic.items()]


def leader_and_isr_state(topic: str, partition: int, state: LeaderIsr, replicas: list[int],
                         is_new: bool = False) -> dict[str, Any]:
    """One partition's entry of a LeaderAndIsr body. The entries are only read afterwards, so one entry may go
    into the bodies of several brokers (a broker death changes every partition of all of them)."""
    return {"topic_name": topic, "partition_index": partition, "controller_epoch": state.controller_epoch,
            "leader": state.leader, "leader_epoch": state.leader_epoch, "isr": list(state.isr),
            "partition_epoch": state.zk_version, "replicas": list(replicas), "adding_replicas": [],
            "removing_replicas": [], "is_new": is_new, "leader_recovery_state": 0}


def leader_and_isr(controller_id: int, controller_epoch: int, broker_epoch: int, partitions: list[PartitionInfo],
                   leaders: list[BrokerInfo]) -> dict[str, Any]:
    states = [leader_and_isr_state(p.topic, p.partition, p.state, p.replicas, p.is_new) for p in partitions]
    return leader_and_isr_body(controller_id, controller_epoch, broker_epoch, states,
                               {p.topic: p.topic_id for p in partitions}, leaders)


def leader_and_isr_body(controller_id: int, controller_epoch: int, broker_epoch: int, states: list[dict[str, Any]],
                        topic_ids: dict[str, bytes], leaders: list[BrokerInfo]) -> dict[str, Any]:
    """A LeaderAndIsr body from entries of :func:`leader_and_isr_state` (``topic_ids``: at least their topics')."""
    return {"controller_id": controller_id, "controller_epoch": controller_epoch, "broker_epoch": broker_epoch,
            "type": 0, "ungrouped_partition_states": states, "topic_states": _group(states, topic_ids),
            "live_leaders": [{"broker_id": b.broker_id, "host_name": b.host, "port": b.port} for b in leaders]}


def update_metadata(controller_id: int, controller_epoch: int, broker_epoch: int, partitions: list[PartitionInfo],
                    live: list[BrokerInfo]) -> dict[str, Any]:
    live_ids = {b.broker_id for b in live}
    states = [{"topic_name": p.topic, "partition_index": p.partition, "controller_epoch": p.state.controller_epoch,
               "leader": p.state.leader, "leader_epoch": p.state.leader_epoch, "isr": list(p.state.isr),
               "zk_version": p.state.zk_version, "replicas": list(p.replicas),
               "offline_replicas": [r for r in p.replicas if r not in live_ids]} for p in partitions]
    brokers = [{"id": b.broker_id, "v0_host": b.host, "v0_port": b.port, "rack": b.rack,
                "endpoints": [{"port": port, "host": host, "listener": name,
                               "security_protocol": SECURITY_PROTOCOL_IDS.get(proto, 0)}
                              for name, proto, host, port in (b.endpoints or [("PLAINTEXT", "PLAINTEXT", b.host,
                                                                                b.port)])]}
               for b in live]
    return {"controller_id": controller_id, "controller_epoch": controller_epoch, "broker_epoch": broker_epoch,
            "ungrouped_partition_states": states,
            "topic_states": _group(states, {p.topic: p.topic_id for p in partitions}), "live_brokers": brokers}


def stop_replica(controller_id: int, controller_epoch: int, broker_epoch: int, partitions: list[TopicPartition],
                 delete: bool) -> dict[str, Any]:
    by_topic: dict[str, list[int]] = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append(p)
    return {"controller_id": controller_id, "controller_epoch": controller_epoch, "broker_epoch": broker_epoch,
            "delete_partitions": delete,
            "ungrouped_partitions": [{"topic_name": t, "partition_index": p} for t, p in partitions],
            "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()],
            "topic_states": [{"topic_name": t, "partition_states": [{"partition_index": p, "leader_epoch": -1,
                                                                     "delete_partition": delete} for p in ps]}
                             for t, ps in by_topic.items()]}


# --------------------------------------------------------------------------------------------- broker side
def partition_states(body: Mapping[str, Any]) -> Iterator[tuple[str, bytes | None, dict[str, Any]]]:
    """(topic, topic id or None, partition state) from a LeaderAndIsr or UpdateMetadata body of any version
    (a body that carries both shapes, as built here before encoding, yields each partition once)."""
    seen: set[TopicPartition] = set()
    for t in body.get("topic_states") or []:
        topic_id = t.get("topic_id")
        for s in t.get("partition_states") or []:
            seen.add((t["topic_name"], s["partition_index"]))
            yield t["topic_name"], topic_id if topic_id and any(topic_id) else None, s
    for s in body.get("ungrouped_partition_states") or []:
        if (s["topic_name"], s["partition_index"]) not in seen:
            yield s["topic_name"], None, s


def stop_replica_partitions(body: Mapping[str, Any]) -> Iterator[tuple[str, int, bool]]:
    """(topic, partition, delete) from a StopReplica body of any version (each partition once)."""
    delete = bool(body.get("delete_partitions", False))
    found: dict[TopicPartition, bool] = {}
    for t in body.get("topic_states") or []:
        for s in t.get("partition_states") or []:
            found.setdefault((t["topic_name"], s["partition_index"]), bool(s.get("delete_partition", False)))
    for t in body.get("topics") or []:
        for index in t.get("partition_indexes") or []:
            found.setdefault((t["name"], index), delete)
    for p in body.get("ungrouped_partitions") or []:
        found.setdefault((p["topic_name"], p["partition_index"]), delete)
    for (topic, index), d in found.items():
        yield topic, index, d


def live_brokers(body: Mapping[str, Any]) -> Iterator[tuple[int, str, int, str | None]]:
    """(id, host, port, rack) of each live broker in an UpdateMetadata body of any version."""
    for b in body.get("live_brokers") or []:
        endpoints = b.get("endpoints") or []
        if endpoints:
            host, port = endpoints[0]["host"], endpoints[0]["port"]
        else:
            host, port = b.get("v0_host", ""), b.get("v0_port", -1)
        yield b["id"], host, port, b.get("rack")


def live_broker_endpoints(body: Mapping[str, Any]) -> Iterator[tuple[int, str | None, list[tuple[str, str, int]]]]:
    """(id, rack, [(listener, host, port), ...]) of each live broker in an UpdateMetadata body of any version;
    v1-v2 endpoints carry no listener name (the listener is named after its security protocol, as in Kafka); v0
    carries one host/port: it is reported as listener PLAINTEXT."""
    for b in body.get("live_brokers") or []:
        endpoints = [(e.get("listener") or _PROTOCOL_NAMES.get(e.get("security_protocol", 0), "PLAINTEXT"),
                      e["host"], e["port"]) for e in b.get("endpoints") or []]
        if not endpoints:
            endpoints = [("PLAINTEXT", b.get("v0_host", ""), b.get("v0_port", -1))]
        yield b["id"], b.get("rack"), endpoints
