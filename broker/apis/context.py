"""What each handler family depends on: small typed objects, built once the broker has started.

Handlers take the family object they need (``ReplicaDeps`` for Produce, ``GroupDeps`` for JoinGroup, ...) instead
of the whole server, so an IDE and mypy can follow a request from the route table into the components, and unit
tests build a handler's dependencies from real in-process components. ``ClusterControl`` is the one mode-neutral
face of "the cluster": standalone brokers refuse controller requests; ZooKeeper mode (broker/zk_mode.py) fences
them, reads topic configs from ZooKeeper and forwards controlled shutdowns to the controller. Handlers never talk
to ZooKeeper themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from moldau.broker.config import BrokerConfig
from moldau.broker.coordinator.coordinator import GroupCoordinator
from moldau.broker.dynamic_config import DEFAULT_ENTITY, DynamicBrokerConfig
from moldau.broker.metadata import MetadataStore, StandaloneMetadata
from moldau.broker.purgatory import Purgatory
from moldau.broker.replica_manager import ReplicaManager
from moldau.broker.security.credentials import CredentialStore
from moldau.protocol.errors import ErrorCode
from moldau.storage.config import Clock


class ClusterControl(Protocol):
    """The controller-facing side of the broker, the same for standalone and ZooKeeper mode."""

    def fence(self, controller_id: int, controller_epoch: int, broker_epoch: int) -> ErrorCode:
        """NONE if a controller request of this epoch (for this broker epoch; -1: any) may be applied."""
        ...

    async def topic_configs(self, topic: str) -> dict[str, str]:
        """The topic's config overrides, for a LeaderAndIsr that creates its log."""
        ...

    def apply_update_metadata(self, body: dict[str, Any]) -> None: ...

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[ErrorCode, list[tuple[str, int]]]:
        """Run by the active controller: move the broker's leaderships away; (error, partitions still led)."""
        ...

    # --- dynamic configs (DescribeConfigs / AlterConfigs)
    async def entity_configs(self, entity_type: str, name: str) -> dict[str, str]:
        """The config overrides of an entity: ("topics", topic) or ("brokers", "<default>" | broker id)."""
        ...

    async def alter_entity_configs(self, entity_type: str, name: str, configs: dict[str, str]) -> None:
        """Replace an entity's overrides and make every broker apply them (ZooKeeper: a config change
        notification under /config/changes)."""
        ...


class StandaloneCluster:
    """A standalone broker has no controller: every controller request is answered NOT_CONTROLLER. Dynamic
    configs live in its metadata file and apply at once."""

    def __init__(self, metadata: StandaloneMetadata | None = None, dynamic: DynamicBrokerConfig | None = None) -> None:
        self.metadata = metadata
        self.dynamic = dynamic

    def fence(self, controller_id: int, controller_epoch: int, broker_epoch: int) -> ErrorCode:
        return ErrorCode.NOT_CONTROLLER

    async def topic_configs(self, topic: str) -> dict[str, str]:
        return {}

    def apply_update_metadata(self, body: dict[str, Any]) -> None:
        raise RuntimeError("a standalone broker takes no UpdateMetadata (fence() refuses it)")

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[ErrorCode, list[tuple[str, int]]]:
        return ErrorCode.NOT_CONTROLLER, []

    async def entity_configs(self, entity_type: str, name: str) -> dict[str, str]:
        if self.metadata is None:
            return {}
        if entity_type == "topics":
            topic = self.metadata.topic(name)
            return dict(topic.configs) if topic is not None else {}
        return dict(self.metadata.broker_configs.get(name, {}))

    async def alter_entity_configs(self, entity_type: str, name: str, configs: dict[str, str]) -> None:
        if self.metadata is None:
            raise RuntimeError("this broker keeps no dynamic configs")
        if entity_type == "topics":
            self.metadata.set_topic_configs(name, configs)  # the replica manager re-reads them (topic listener)
            return
        self.metadata.set_broker_configs(name, configs)
        if self.dynamic is not None:
            self.dynamic.update(self.metadata.broker_configs.get(DEFAULT_ENTITY, {}),
                                self.metadata.broker_configs.get(str(self.dynamic.broker_id), {}))


class ProducerIdSource(Protocol):
    def next_id(self) -> int: ...


@dataclass(slots=True)
class ReplicaDeps:
    """Produce, Fetch, ListOffsets, OffsetForLeaderEpoch."""

    replica_manager: ReplicaManager
    produce_purgatory: Purgatory
    fetch_purgatory: Purgatory


@dataclass(slots=True)
class TopicDeps:
    """Metadata, CreateTopics, DeleteTopics (and the offsets topic created by FindCoordinator)."""

    broker_id: int
    config: BrokerConfig
    metadata: MetadataStore


@dataclass(slots=True)
class GroupDeps:
    """FindCoordinator, the membership and group admin APIs, OffsetCommit/Fetch/Delete."""

    topics: TopicDeps
    coordinator: GroupCoordinator
    clock: Clock

    def active_coordinator(self) -> GroupCoordinator | None:
        """The coordinator, or None after it stopped (shutdown): callers answer COORDINATOR_NOT_AVAILABLE."""
        return self.coordinator if self.coordinator.active else None


@dataclass(slots=True)
class ControlDeps:
    """LeaderAndIsr, UpdateMetadata, StopReplica, ControlledShutdown."""

    broker_id: int
    replica_manager: ReplicaManager
    cluster: ClusterControl


@dataclass(slots=True)
class ConfigDeps:
    """DescribeConfigs, AlterConfigs, IncrementalAlterConfigs."""

    broker_id: int
    dynamic: DynamicBrokerConfig
    metadata: MetadataStore
    cluster: ClusterControl


@dataclass(slots=True)
class BrokerContext:
    """Everything the route table hands out, one family object per handler family."""

    replicas: ReplicaDeps
    topics: TopicDeps
    groups: GroupDeps
    control: ControlDeps
    producer_ids: ProducerIdSource
    api_versions: list[dict[str, int]]
    configs: ConfigDeps
    scram: CredentialStore | None = None  # SCRAM users (ZooKeeper or the standalone users file)
