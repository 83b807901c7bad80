"""The cluster view handlers read, behind one interface for standalone and ZooKeeper mode (metadata_cache.py).

``MetadataStore`` is what handlers and the replica manager see: live brokers, the controller, topics with their
partition states, and topic creation/deletion. ``StandaloneMetadata`` is a single broker that is its own controller
and keeps topic metadata in a JSON file in its first log dir, so one broker needs nothing but Python.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from moldau.protocol.errors import ErrorCode

log = logging.getLogger("moldau.metadata")

METADATA_FILE = "moldau-topics.json"


@dataclass(slots=True)
class BrokerEndpoint:
    broker_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(slots=True)
class PartitionState:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int] = field(default_factory=list)
    zk_version: int = -1  # the state znode's version (LeaderAndIsr's partition epoch); -1 in standalone mode
    controller_epoch: int = 0


@dataclass(slots=True)
class TopicMetadata:
    name: str
    topic_id: bytes
    partitions: dict[int, PartitionState]
    configs: dict[str, str] = field(default_factory=dict)
    is_internal: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "topic_id": self.topic_id.hex(), "configs": self.configs,
                "is_internal": self.is_internal,
                "partitions": [{"partition": p.partition, "leader": p.leader, "leader_epoch": p.leader_epoch,
                                "replicas": p.replicas, "isr": p.isr} for p in self.partitions.values()]}

    @staticmethod
    def from_json(data: dict[str, Any]) -> TopicMetadata:
        parts = {int(p["partition"]): PartitionState(int(p["partition"]), int(p["leader"]), int(p["leader_epoch"]),
                                                     [int(r) for r in p["replicas"]], [int(r) for r in p["isr"]])
                 for p in data["partitions"]}
        return TopicMetadata(str(data["name"]), bytes.fromhex(data["topic_id"]), parts,
                             {str(k): str(v) for k, v in data.get("configs", {}).items()},
                             bool(data.get("is_internal", False)))


class TopicError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# Called with (topic metadata, partition ids) whenever partition states change, and (name, None) on deletion.
PartitionListener = Callable[[str, TopicMetadata | None], None]


class MetadataStore(ABC):
    broker_id: int
    cluster_id: str

    def __init__(self) -> None:
        self.listeners: list[PartitionListener] = []
        # Encoded Metadata answer bodies (broker/apis/metadata.py), dropped on every change of topics or brokers:
        # an all-topics answer of 10,000 partitions took ~150 ms to build and encode on a loaded 2-core machine.
        self.encoded_answers: dict[tuple[object, ...], bytes] = {}

    @property
    @abstractmethod
    def controller_id(self) -> int: ...

    @abstractmethod
    def live_brokers(self, listener: str | None = None) -> list[BrokerEndpoint]:
        """Live brokers with their endpoint for ``listener`` (None: the inter-broker listener). Kafka answers a
        client with the endpoints of the listener its request arrived on and leaves out brokers without it."""

    def live_broker_count(self) -> int:
        """How many brokers are live in this view, this one included (the metrics' moldau_live_brokers)."""
        return len(self.live_brokers())

    @abstractmethod
    def topics(self) -> dict[str, TopicMetadata]: ...

    def topic(self, name: str) -> TopicMetadata | None:
        return self.topics().get(name)

    def topic_by_id(self, topic_id: bytes) -> TopicMetadata | None:
        for t in self.topics().values():
            if t.topic_id == topic_id:
                return t
        return None

    @abstractmethod
    async def create_topic(self, name: str, assignment: dict[int, list[int]], configs: dict[str, str], *,
                           timeout_ms: int | None = None) -> TopicMetadata | None:
        """Create a topic. ZooKeeper mode: ``timeout_ms`` bounds the wait until its partitions have leaders
        (None: do not wait; the answer may then be None while the controller is still at work)."""

    @abstractmethod
    async def delete_topic(self, name: str) -> None: ...

    def is_controller(self) -> bool:
        return self.controller_id == self.broker_id

    def _notify(self, name: str, topic: TopicMetadata | None) -> None:
        self.encoded_answers.clear()
        for listener in self.listeners:
            listener(name, topic)


def new_topic_id() -> bytes:
    return uuid.uuid4().bytes


def new_cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_meta_broker_id(log_dirs: list[Path]) -> int | None:
    """The broker.id recorded in meta.properties (a generated id is reused after a restart), if any."""
    for d in log_dirs:
        p = d / "meta.properties"
        if p.exists():
            for line in p.read_text().splitlines():
                key, sep, value = line.partition("=")
                if sep and key.strip() == "broker.id" and value.strip().lstrip("-").isdigit():
                    return int(value.strip())
    return None


def ensure_meta_properties(log_dirs: list[Path], broker_id: int, cluster_id: str | None = None) -> str:
    """Kafka's meta.properties in every log dir: refuses a dir that belongs to another broker id or cluster.
    ``cluster_id`` (ZooKeeper mode: /cluster/id) must match what the dirs already record."""
    expected, cluster_id = cluster_id, None
    found: dict[Path, dict[str, str]] = {}
    for d in log_dirs:
        p = d / "meta.properties"
        if p.exists():
            props = {}
            for line in p.read_text().splitlines():
                if "=" in line and not line.startswith("#"):
                    k, v = line.split("=", 1)
                    props[k.strip()] = v.strip()
            found[d] = props
            if props.get("broker.id") not in (None, str(broker_id)):
                raise RuntimeError(f"log dir {d} belongs to broker.id {props.get('broker.id')}, "
                                   f"but this broker's broker.id is {broker_id} (see {p})")
            if cluster_id is not None and props.get("cluster.id") not in (None, cluster_id):
                raise RuntimeError(f"log dirs disagree on cluster.id ({p})")
            cluster_id = props.get("cluster.id", cluster_id)
    if expected is not None and cluster_id not in (None, expected):
        raise RuntimeError(f"the cluster id {expected} in ZooKeeper does not match the cluster.id {cluster_id} "
                           f"in meta.properties of {[str(d) for d in log_dirs]}; these log dirs belong to "
                           "another cluster")
    cluster_id = cluster_id or expected or new_cluster_id()
    for d in log_dirs:
        if d not in found:
            _write_atomic(d / "meta.properties",
                          f"#Written by Moldau\nversion=0\nbroker.id={broker_id}\ncluster.id={cluster_id}\n")
    return cluster_id


class StandaloneMetadata(MetadataStore):
    """A single broker: its own controller; topics persisted in ``<first log dir>/moldau-topics.json``."""

    def __init__(self, broker_id: int, cluster_id: str, endpoint: BrokerEndpoint, metadata_dir: Path,
                 by_listener: dict[str, BrokerEndpoint] | None = None) -> None:
        super().__init__()
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.endpoint = endpoint
        # Every advertised listener's endpoint; `endpoint` is the default (inter-broker) one.
        self.by_listener = dict(by_listener or {})
        self.path = metadata_dir / METADATA_FILE
        self._topics: dict[str, TopicMetadata] = {}
        # Dynamic broker configs by entity ("<default>" or a broker id), as Kafka keeps under /config/brokers.
        self.broker_configs: dict[str, dict[str, str]] = {}
        # Client quota entities by ZooKeeper entity path ("users/alice", "users/<default>/clients/app", ...).
        self.quota_configs: dict[str, dict[str, str]] = {}

    def load(self) -> None:
        if not self.path.exists():
            return
        try:
            data = json.loads(self.path.read_text())
            for t in data.get("topics", []):
                topic = TopicMetadata.from_json(t)
                self._topics[topic.name] = topic
            self.broker_configs = {str(e): {str(k): str(v) for k, v in c.items()}
                                   for e, c in data.get("broker_configs", {}).items()}
            self.quota_configs = {str(e): {str(k): str(v) for k, v in c.items()}
                                  for e, c in data.get("quota_configs", {}).items()}
        except (ValueError, KeyError, TypeError) as exc:
            raise RuntimeError(f"topic metadata file {self.path} is unreadable: {exc}") from exc
        for topic in self._topics.values():
            self._notify(topic.name, topic)

    def _save(self) -> None:
        _write_atomic(self.path, json.dumps({"version": 1, "topics": [t.to_json() for t in self._topics.values()],
                                             "broker_configs": self.broker_configs,
                                             "quota_configs": self.quota_configs}, indent=1))

    @property
    def controller_id(self) -> int:
        return self.broker_id

    def live_brokers(self, listener: str | None = None) -> list[BrokerEndpoint]:
        if listener is None:
            return [self.endpoint]
        return [self.by_listener.get(listener, self.endpoint)]

    def topics(self) -> dict[str, TopicMetadata]:
        return self._topics

    async def create_topic(self, name: str, assignment: dict[int, list[int]], configs: dict[str, str], *,
                           timeout_ms: int | None = None) -> TopicMetadata:
        if name in self._topics:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        parts = {p: PartitionState(p, replicas[0], 0, list(replicas), list(replicas))
                 for p, replicas in sorted(assignment.items())}
        topic = TopicMetadata(name, new_topic_id(), parts, dict(configs), is_internal=name.startswith("__"))
        self._topics[name] = topic
        self._save()
        self._notify(name, topic)
        log.info("created topic %s with %d partitions", name, len(parts))
        return topic

    async def add_partitions(self, name: str, additions: dict[int, list[int]]) -> None:
        """CreatePartitions: the new partitions are led by their first replica (the only broker)."""
        topic = self._topics.get(name)
        if topic is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic.")
        for p, replicas in sorted(additions.items()):
            topic.partitions[p] = PartitionState(p, replicas[0], 0, list(replicas), list(replicas))
        self._save()
        self._notify(name, topic)
        log.info("topic %s now has %d partitions", name, len(topic.partitions))

    async def delete_topic(self, name: str) -> None:
        if name not in self._topics:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic.")
        del self._topics[name]
        self._save()
        self._notify(name, None)
        log.info("deleted topic %s", name)

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace a topic's overrides; listeners (the replica manager) apply them to its partitions."""
        topic = self._topics.get(name)
        if topic is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist")
        topic.configs = dict(configs)
        self._save()
        self._notify(name, topic)
        log.info("topic %s configs are now %s", name, configs)

    def set_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        if configs:
            self.broker_configs[entity] = dict(configs)
        else:
            self.broker_configs.pop(entity, None)
        self._save()
        log.info("dynamic broker configs of %s are now %s", entity, configs)

    def set_quota_configs(self, entity_path: str, configs: dict[str, str]) -> None:
        if configs:
            self.quota_configs[entity_path] = dict(configs)
        else:
            self.quota_configs.pop(entity_path, None)
        self._save()
        log.info("quota configs of %s are now %s", entity_path, configs)
