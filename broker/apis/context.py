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
from moldau.broker.metadata import MetadataStore
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


class StandaloneCluster:
    """A standalone broker has no controller: every controller request is answered NOT_CONTROLLER."""

    def fence(self, controller_id: int, controller_epoch: int, broker_epoch: int) -> ErrorCode:
        return ErrorCode.NOT_CONTROLLER

    async def topic_configs(self, topic: str) -> dict[str, str]:
        return {}

    def apply_update_metadata(self, body: dict[str, Any]) -> None:
        raise RuntimeError("a standalone broker takes no UpdateMetadata (fence() refuses it)")

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[ErrorCode, list[tuple[str, int]]]:
        return ErrorCode.NOT_CONTROLLER, []


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
class BrokerContext:
    """Everything the route table hands out, one family object per handler family."""

    replicas: ReplicaDeps
    topics: TopicDeps
    groups: GroupDeps
    control: ControlDeps
    producer_ids: ProducerIdSource
    api_versions: list[dict[str, int]]
    scram: CredentialStore | None = None  # SCRAM users (ZooKeeper or the standalone users file)
