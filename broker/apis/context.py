"""What each handler family depends on: small typed objects, built once the broker has started.

Handlers take the family object they need (``ReplicaDeps`` for Produce, ``GroupDeps`` for JoinGroup, ...) instead
of the whole server, so an IDE and mypy can follow a request from the route table into the components, and unit
tests build a handler's dependencies from real in-process components. ``ClusterControl`` is the one mode-neutral
face of "the cluster": standalone brokers refuse controller requests; ZooKeeper mode (broker/zk_mode.py) fences
them, reads topic configs from ZooKeeper and forwards controlled shutdowns to the controller. Handlers never talk
to ZooKeeper themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from moldau.broker.config import BrokerConfig
from moldau.broker.coordinator.coordinator import GroupCoordinator
from moldau.broker.coordinator.txn_coordinator import TransactionCoordinator
from moldau.broker.dynamic_config import DEFAULT_ENTITY, DynamicBrokerConfig
from moldau.broker.fetch_session import FetchSessionCache
from moldau.broker.metadata import MetadataStore, StandaloneMetadata
from moldau.broker.purgatory import Purgatory
from moldau.broker.quota_config import ZK_ENTITY_TYPES
from moldau.broker.quotas import BrokerQuotas
from moldau.broker.replica_manager import ReplicaManager
from moldau.broker.security.acl_store import AclStore
from moldau.broker.security.authorizer import NO_AUTHORIZER, Authorizer
from moldau.broker.security.credentials import CredentialStore
from moldau.protocol.errors import ErrorCode
from moldau.protocol.types import TopicPartition
from moldau.storage.config import Clock

if TYPE_CHECKING:  # the message shapes are for mypy only: zero cost at run time
    from moldau.broker.remote_log_manager import RemoteLogManager
    from moldau.protocol.typed import ApiVersionsResponseApiKeys


class ClusterControl(Protocol):
    """The controller-facing side of the broker, the same for standalone and ZooKeeper mode."""

    def fence(self, controller_id: int, controller_epoch: int, broker_epoch: int) -> ErrorCode:
        """NONE if a controller request of this epoch (for this broker epoch; -1: any) may be applied."""
        ...

    async def topic_configs(self, topic: str) -> dict[str, str]:
        """The topic's config overrides, for a LeaderAndIsr that creates its log."""
        ...

    def apply_update_metadata(self, body: Mapping[str, Any]) -> None: ...

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[ErrorCode, list[TopicPartition]]:
        """Run by the active controller: move the broker's leaderships away; (error, partitions still led)."""
        ...

    # --- partition admin (CreatePartitions, ElectLeaders): see broker/apis/partition_admin.py
    async def partition_assignment(self, topic: str) -> dict[int, list[int]] | None:
        """The topic's replica assignment as the cluster's source of truth has it (None: no such topic)."""
        ...

    async def create_partitions(self, topic: str, additions: dict[int, list[int]], timeout_ms: int | None) -> None:
        """Adds partitions; ``timeout_ms`` bounds the wait until they have leaders (None: do not wait). Raises
        TopicError."""
        ...

    async def elect_leaders(self, election_type: int, partitions: list[TopicPartition] | None
                            ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        """Run by the active controller: preferred (0) or unclean (1) election; None: every partition."""
        ...

    async def alter_reassignments(self, wanted: dict[TopicPartition, list[int] | None]
                                  ) -> dict[TopicPartition, tuple[ErrorCode, str | None]] | None:
        """Run by the active controller: start (replicas) or cancel (None); None when not the controller."""
        ...

    async def list_reassignments(self, wanted: list[TopicPartition] | None
                                 ) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]] | None:
        """(replicas, adding, removing) of the reassignments in progress; None when not the controller."""
        ...

    # --- dynamic configs (DescribeConfigs / AlterConfigs)
    async def entity_configs(self, entity_type: str, name: str) -> dict[str, str]:
        """The config overrides of an entity: ("topics", topic) or ("brokers", "<default>" | broker id)."""
        ...

    async def alter_entity_configs(self, entity_type: str, name: str, configs: dict[str, str]) -> None:
        """Replace an entity's overrides and make every broker apply them (ZooKeeper: a config change
        notification under /config/changes)."""
        ...

    async def list_entity_configs(self, entity_type: str) -> dict[str, dict[str, str]]:
        """Every entity of a type with its overrides; "users" includes "<user>/clients/<client-id>" (quotas)."""
        ...


class StandaloneCluster:
    """A standalone broker has no controller: every controller request is answered NOT_CONTROLLER. Its topics
    live in ``metadata`` (StandaloneMetadata), where CreatePartitions adds partitions; with one broker every
    leader is already the preferred and only replica, so ElectLeaders has nothing to do. Dynamic configs live in
    its metadata file and apply at once."""

    def __init__(self, metadata: StandaloneMetadata | None = None, dynamic: DynamicBrokerConfig | None = None,
                 on_quota_change: Callable[[str, str, dict[str, str]], None] | None = None) -> None:
        self.metadata = metadata
        self.dynamic = dynamic
        self.on_quota_change = on_quota_change  # client quotas apply at once (broker/quotas.py)

    def fence(self, controller_id: int, controller_epoch: int, broker_epoch: int) -> ErrorCode:
        return ErrorCode.NOT_CONTROLLER

    async def topic_configs(self, topic: str) -> dict[str, str]:
        return {}

    def apply_update_metadata(self, body: Mapping[str, Any]) -> None:
        raise RuntimeError("a standalone broker takes no UpdateMetadata (fence() refuses it)")

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[ErrorCode, list[TopicPartition]]:
        return ErrorCode.NOT_CONTROLLER, []

    async def partition_assignment(self, topic: str) -> dict[int, list[int]] | None:
        t = self.metadata.topic(topic) if self.metadata is not None else None
        return None if t is None else {p: list(s.replicas) for p, s in t.partitions.items()}

    async def create_partitions(self, topic: str, additions: dict[int, list[int]], timeout_ms: int | None) -> None:
        if self.metadata is None:
            raise RuntimeError("StandaloneCluster was built without its metadata")
        await self.metadata.add_partitions(topic, additions)

    async def elect_leaders(self, election_type: int, partitions: list[TopicPartition] | None
                            ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        topics = self.metadata.topics() if self.metadata is not None else {}
        wanted = [(t, p) for t in topics for p in topics[t].partitions] if partitions is None else partitions
        return {tp: (ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.")
                if tp[0] in topics and tp[1] in topics[tp[0]].partitions
                else (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.") for tp in wanted}

    async def alter_reassignments(self, wanted: dict[TopicPartition, list[int] | None]
                                  ) -> dict[TopicPartition, tuple[ErrorCode, str | None]] | None:
        """One broker: its replicas can only stay where they are."""
        topics = self.metadata.topics() if self.metadata is not None else {}
        out: dict[TopicPartition, tuple[ErrorCode, str | None]] = {}
        for (t, p), target in wanted.items():
            if t not in topics or p not in topics[t].partitions:
                out[(t, p)] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
            elif target is None:
                out[(t, p)] = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No reassignment in progress.")
            elif target != topics[t].partitions[p].replicas:
                out[(t, p)] = (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                               f"Replica assignment has brokers that are not alive: "
                               f"{[r for r in target if r not in topics[t].partitions[p].replicas] or target}")
            else:
                out[(t, p)] = (ErrorCode.NONE, None)
        return out

    async def list_reassignments(self, wanted: list[TopicPartition] | None
                                 ) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]] | None:
        return {}

    async def entity_configs(self, entity_type: str, name: str) -> dict[str, str]:
        if self.metadata is None:
            return {}
        if entity_type == "topics":
            topic = self.metadata.topic(name)
            return dict(topic.configs) if topic is not None else {}
        if entity_type in ZK_ENTITY_TYPES:
            return dict(self.metadata.quota_configs.get(f"{entity_type}/{name}", {}))
        return dict(self.metadata.broker_configs.get(name, {}))

    async def list_entity_configs(self, entity_type: str) -> dict[str, dict[str, str]]:
        if self.metadata is None:
            return {}
        prefix = f"{entity_type}/"
        return {path[len(prefix):]: dict(c) for path, c in self.metadata.quota_configs.items()
                if path.startswith(prefix)}

    async def alter_entity_configs(self, entity_type: str, name: str, configs: dict[str, str]) -> None:
        if self.metadata is None:
            raise RuntimeError("this broker keeps no dynamic configs")
        if entity_type == "topics":
            self.metadata.set_topic_configs(name, configs)  # the replica manager re-reads them (topic listener)
            return
        if entity_type in ZK_ENTITY_TYPES:
            self.metadata.set_quota_configs(f"{entity_type}/{name}", configs)
            if self.on_quota_change is not None:
                self.on_quota_change(entity_type, name, configs)
            return
        self.metadata.set_broker_configs(name, configs)
        if self.dynamic is not None:
            self.dynamic.update(self.metadata.broker_configs.get(DEFAULT_ENTITY, {}),
                                self.metadata.broker_configs.get(str(self.dynamic.broker_id), {}))


class ProducerIdSource(Protocol):
    def next_id(self) -> int: ...


@dataclass(slots=True)
class ProducerIdDeps:
    """InitProducerId: the id source, and the authorizer (IdempotentWrite on the cluster or Write on a topic);
    with a transactional id, the transaction coordinator (None: not running, COORDINATOR_NOT_AVAILABLE)."""

    source: ProducerIdSource
    auth: Authorizer = NO_AUTHORIZER
    transactions: TransactionCoordinator | None = None


@dataclass(slots=True)
class TxnDeps:
    """AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, DescribeTransactions, ListTransactions."""

    coordinator: TransactionCoordinator
    metadata: MetadataStore
    group_coordinator: GroupCoordinator  # AddOffsetsToTxn (the group's partition) and TxnOffsetCommit
    clock: Clock
    auth: Authorizer = NO_AUTHORIZER
    offsets_commit_timeout_ms: int = 5000

    def offsets_partition_for(self, group_id: str) -> int:
        """The group's __consumer_offsets partition (AddOffsetsToTxn adds it to the transaction)."""
        return self.group_coordinator.store.partition_for(group_id)


@dataclass(slots=True)
class ReplicaDeps:
    """Produce, Fetch, ListOffsets, OffsetForLeaderEpoch."""

    replica_manager: ReplicaManager
    produce_purgatory: Purgatory
    fetch_purgatory: Purgatory
    auth: Authorizer = NO_AUTHORIZER  # ACL checks (authorizer.class.name); allows everything when unset
    quotas: BrokerQuotas | None = None  # client quotas: Fetch sizes a throttled consumer's answer by them
    remote: RemoteLogManager | None = None  # tiered storage (remote.log.storage.system.enable)
    fetch_sessions: FetchSessionCache | None = None  # incremental fetch sessions (KIP-227)


@dataclass(slots=True)
class TopicDeps:
    """Metadata, CreateTopics, DeleteTopics (and the offsets topic created by FindCoordinator)."""

    broker_id: int
    config: BrokerConfig
    metadata: MetadataStore
    auth: Authorizer = NO_AUTHORIZER  # ACL checks (authorizer.class.name); allows everything when unset
    quotas: BrokerQuotas | None = None  # controller_mutation_rate of CreateTopics/DeleteTopics/CreatePartitions


@dataclass(slots=True)
class GroupDeps:
    """FindCoordinator, the membership and group admin APIs, OffsetCommit/Fetch/Delete."""

    topics: TopicDeps
    coordinator: GroupCoordinator
    clock: Clock
    transactions: TransactionCoordinator | None = None  # FindCoordinator key type 1

    def active_coordinator(self) -> GroupCoordinator | None:
        """The coordinator, or None after it stopped (shutdown): callers answer COORDINATOR_NOT_AVAILABLE."""
        return self.coordinator if self.coordinator.active else None


@dataclass(slots=True)
class ControlDeps:
    """LeaderAndIsr, UpdateMetadata, StopReplica, ControlledShutdown."""

    broker_id: int
    replica_manager: ReplicaManager
    cluster: ClusterControl
    auth: Authorizer = NO_AUTHORIZER  # ACL checks (authorizer.class.name); allows everything when unset


@dataclass(slots=True)
class PartitionAdminDeps:
    """CreatePartitions, DeleteRecords, ElectLeaders, DescribeLogDirs (broker/apis/partition_admin.py)."""

    topics: TopicDeps
    cluster: ClusterControl
    replica_manager: ReplicaManager
    delete_records_purgatory: Purgatory


@dataclass(slots=True)
class ConfigDeps:
    """DescribeConfigs, AlterConfigs, IncrementalAlterConfigs."""

    broker_id: int
    dynamic: DynamicBrokerConfig
    metadata: MetadataStore
    cluster: ClusterControl
    auth: Authorizer = NO_AUTHORIZER  # ACL checks (authorizer.class.name); allows everything when unset


@dataclass(slots=True)
class QuotaDeps:
    """DescribeClientQuotas (DescribeConfigs on the cluster), AlterClientQuotas (AlterConfigs on it)."""

    cluster: ClusterControl
    auth: Authorizer = NO_AUTHORIZER


@dataclass(slots=True)
class ScramDeps:
    """DescribeUserScramCredentials (Describe on the cluster), AlterUserScramCredentials (Alter on it)."""

    store: CredentialStore | None
    auth: Authorizer = NO_AUTHORIZER


@dataclass(slots=True)
class AclDeps:
    """DescribeAcls, CreateAcls, DeleteAcls: the authorizer (its cache answers DescribeAcls) and the store the
    changes go to (ZooKeeper or the standalone acls.json); store None = no authorizer configured."""

    auth: Authorizer = NO_AUTHORIZER
    store: AclStore | None = None


@dataclass(slots=True)
class BrokerContext:
    """Everything the route table hands out, one family object per handler family."""

    replicas: ReplicaDeps
    topics: TopicDeps
    groups: GroupDeps
    control: ControlDeps
    producer_ids: ProducerIdSource
    api_versions: list[ApiVersionsResponseApiKeys]
    partition_admin: PartitionAdminDeps
    configs: ConfigDeps
    transactions: TxnDeps  # the transaction coordinator's APIs
    scram: CredentialStore | None = None  # SCRAM users (ZooKeeper or the standalone users file)
    acls: AclDeps = field(default_factory=AclDeps)
