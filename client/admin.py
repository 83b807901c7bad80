"""The asyncio AdminClient: topics, cluster description and offsets, as far as the broker serves them.

Topic changes go to the controller (retried on NOT_CONTROLLER after a metadata refresh). Every method raises
:class:`KafkaError` (with Kafka's error code and ``retriable``) for the first failed item unless
``raise_errors=False``, in which case a dict of per-item errors (None for success) is returned.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from moldau.admin_acls import AclsAdmin
from moldau.admin_configs import ConfigsAdmin
from moldau.admin_groups import (  # noqa: F401  (MemberDescription re-exported)
    ConsumerGroupDescription,
    ConsumerGroupListing,
    GroupAdmin,
    MemberDescription,
)
from moldau.admin_quotas import QuotasAdmin
from moldau.admin_scram import ScramAdmin
from moldau.admin_txn import TransactionsAdmin
from moldau.cluster import BrokerInfo, Cluster, PartitionInfo
from moldau.config import admin_config
from moldau.connection import BrokerConnection
from moldau.errors import KafkaError
from moldau.fetcher import TopicPartition
from moldau.group import OffsetAndMetadata
from moldau.partition_admin import (  # noqa: F401  (re-exported: moldau.admin.NewPartitions, ...)
    LogDirDescription,
    NewPartitions,
    PartitionAdmin,
    ReplicaInfo,
)
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.create_topics import CREATE_TOPICS
from moldau.protocol.messages.delete_topics import DELETE_TOPICS
from moldau.protocol.messages.list_offsets import LIST_OFFSETS
from moldau.protocol.messages.metadata import METADATA
from moldau.protocol.schema import P, Resp, Sendable

if TYPE_CHECKING:  # the message shapes are for mypy only: zero cost at run time
    from moldau.protocol.typed import (
        CreateTopicsRequestTopics,
        CreateTopicsRequestTopicsAssignments,
        DeleteTopicsRequest,
        ListOffsetsRequestTopicsPartitions,
    )

EARLIEST = -2  # ListOffsets' special timestamps
LATEST = -1
_CONTROLLER_RETRIES = 5


@dataclass(slots=True)
class NewTopic:
    name: str
    num_partitions: int = -1  # -1: the broker's num.partitions
    replication_factor: int = -1  # -1: the broker's default.replication.factor
    replica_assignment: Mapping[int, list[int]] | None = None
    config: Mapping[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class TopicDescription:
    name: str
    is_internal: bool
    partitions: list[PartitionInfo]
    error: KafkaError | None = None


@dataclass(slots=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    brokers: list[BrokerInfo]


@dataclass(slots=True, frozen=True)
class OffsetResult:
    offset: int
    timestamp: int
    leader_epoch: int


class AdminClient(PartitionAdmin, ConfigsAdmin, ScramAdmin, AclsAdmin, QuotasAdmin, TransactionsAdmin):
    """``async with AdminClient(bootstrap_servers=...) as admin: await admin.create_topics([...])``."""

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self.config = admin_config(config, **kwargs)
        self._cluster = Cluster(self.config)
        self._groups = GroupAdmin(self._cluster, self.config)
        self._started = False

    @property
    def cluster(self) -> Cluster:
        return self._cluster

    async def __aenter__(self) -> AdminClient:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        if not self._started:
            await self._cluster.start()
            self._started = True

    async def close(self) -> None:
        await self._cluster.close()

    # ------------------------------------------------------------------ topics
    async def create_topics(self, topics: Iterable[NewTopic], *, validate_only: bool = False,
                            timeout_ms: int = 60000, raise_errors: bool = True) -> dict[str, KafkaError | None]:
        """Creates topics (or only validates the request); a dict name -> error (None: created)."""
        wanted = list(topics)
        response = await self._to_controller("topics", CREATE_TOPICS, {
            "topics": [_new_topic_body(t) for t in wanted], "timeout_ms": timeout_ms, "validate_only": validate_only})
        results = {t["name"]: _error(t["error_code"], t.get("error_message")) for t in response["topics"]}
        if not validate_only:
            await self._cluster.refresh_metadata([t.name for t in wanted if results.get(t.name) is None])
        return _maybe_raise(results, raise_errors)

    async def delete_topics(self, names: Iterable[str], *, timeout_ms: int = 60000,
                            raise_errors: bool = True) -> dict[str, KafkaError | None]:
        names = list(names)
        conn = await self._controller_conn()
        version = conn.version_for(DELETE_TOPICS)
        body: DeleteTopicsRequest = {"timeout_ms": timeout_ms}
        if version >= 6:
            body["topics"] = [{"name": n, "topic_id": bytes(16)} for n in names]  # by name: the zero id
        else:
            body["topic_names"] = names
        response = await self._to_controller("responses", DELETE_TOPICS, body)
        results = {r["name"]: _error(r["error_code"], r.get("error_message")) for r in response["responses"]
                   if r["name"] is not None}  # None only for topics deleted by id, which we never ask
        return _maybe_raise(results, raise_errors)

    async def list_topics(self, *, include_internal: bool = False) -> list[str]:
        await self._cluster.refresh_metadata(None, allow_auto_create=False)
        return sorted(n for n, t in self._cluster.topics.items() if include_internal or not t.is_internal)

    async def describe_topics(self, names: Iterable[str] | None = None, *,
                              raise_errors: bool = True) -> list[TopicDescription]:
        """Partitions (leader, replicas, isr) of ``names`` (None: every topic), sorted by name."""
        wanted = None if names is None else list(names)
        if wanted is None:
            await self._cluster.refresh_metadata(None, allow_auto_create=False)
            wanted = sorted(self._cluster.topics)
        else:
            await self._metadata_for(wanted)
        out = []
        for name in wanted:
            info = self._cluster.topics.get(name)
            if info is None:
                err = KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
                if raise_errors:
                    raise err
                out.append(TopicDescription(name, False, [], err))
                continue
            parts = [info.partitions[p] for p in sorted(info.partitions)]
            out.append(TopicDescription(name, info.is_internal, parts, _error(info.error_code)))
        return out

    async def _metadata_for(self, names: list[str]) -> None:
        """Metadata for exactly ``names`` without auto-creating them."""
        conn = await self._cluster.any_connection()
        response = await conn.send(METADATA, {"topics": [{"name": n} for n in names],
                                              "allow_auto_topic_creation": False})
        self._cluster._apply_metadata(response, full=False)  # noqa: SLF001  (same package, shared cache)

    async def describe_cluster(self) -> ClusterDescription:
        await self._cluster.refresh_metadata(None, allow_auto_create=False)
        brokers = [self._cluster.brokers[n] for n in sorted(self._cluster.brokers)]
        return ClusterDescription(self._cluster.cluster_id, self._cluster.controller_id, brokers)

    # ------------------------------------------------------------------ offsets
    async def list_offsets(self, requests: Mapping[tuple[str, int], int | str], *,
                           raise_errors: bool = True) -> dict[tuple[str, int], OffsetResult | KafkaError]:
        """``{(topic, partition): "earliest" | "latest" | timestamp_ms}`` -> offsets, asked of each leader."""
        topics = sorted({t for t, _ in requests})
        await self._metadata_for(topics)
        per_leader: dict[int, dict[str, list[ListOffsetsRequestTopicsPartitions]]] = {}
        results: dict[tuple[str, int], OffsetResult | KafkaError] = {}
        for (topic, partition), spec in requests.items():
            ts = EARLIEST if spec == "earliest" else LATEST if spec == "latest" else int(spec)
            leader = self._cluster.leader_for(topic, partition)
            if leader is None:
                results[(topic, partition)] = KafkaError(ErrorCode.LEADER_NOT_AVAILABLE,
                                                         f"{topic}-{partition} has no leader")
                continue
            per_leader.setdefault(leader, {}).setdefault(topic, []).append(
                {"partition_index": partition, "timestamp": ts})
        responses = await asyncio.gather(*(
            self._cluster.send(node, LIST_OFFSETS, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": t, "partitions": ps} for t, ps in by_topic.items()]})
            for node, by_topic in per_leader.items()))
        for response in responses:
            for t in response["topics"]:
                for p in t["partitions"]:
                    err = _error(p["error_code"])
                    results[(t["name"], p["partition_index"])] = err if err is not None else \
                        OffsetResult(p["offset"], p["timestamp"], p.get("leader_epoch", -1))
        if raise_errors:
            for value in results.values():
                if isinstance(value, KafkaError):
                    raise value
        return results

    # ------------------------------------------------------------------ consumer groups (client/admin_groups.py)
    async def list_consumer_groups(self, states: Iterable[str] | None = None) -> list[ConsumerGroupListing]:
        """Every group of every broker (only those in ``states``, e.g. ``["Stable", "Empty"]``, if given)."""
        return await self._groups.list_consumer_groups(states)

    async def describe_consumer_groups(self, group_ids: Iterable[str], *, raise_errors: bool = True,
                                       ) -> dict[str, ConsumerGroupDescription | KafkaError]:
        """Members with their assigned partitions, state, assignor and coordinator of each group."""
        return await self._groups.describe_consumer_groups(group_ids, raise_errors=raise_errors)

    async def delete_consumer_groups(self, group_ids: Iterable[str], *, raise_errors: bool = True,
                                     ) -> dict[str, KafkaError | None]:
        """Deletes empty groups with their committed offsets; group -> error (None: deleted)."""
        return await self._groups.delete_consumer_groups(group_ids, raise_errors=raise_errors)

    async def list_consumer_group_offsets(self, group_id: str, partitions: Iterable[tuple[str, int]] | None = None,
                                          ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (of ``partitions`` only, if given); uncommitted partitions left out."""
        return await self._groups.list_consumer_group_offsets(group_id, partitions)

    async def alter_consumer_group_offsets(self, group_id: str,
                                           offsets: Mapping[tuple[str, int], int | OffsetAndMetadata], *,
                                           raise_errors: bool = True) -> dict[TopicPartition, KafkaError | None]:
        """Commits ``offsets`` for a group without active members (UNKNOWN_MEMBER_ID while it has some)."""
        return await self._groups.alter_consumer_group_offsets(group_id, offsets, raise_errors=raise_errors)

    async def delete_consumer_group_offsets(self, group_id: str, partitions: Iterable[tuple[str, int]], *,
                                            raise_errors: bool = True) -> dict[TopicPartition, KafkaError | None]:
        """Deletes the group's committed offsets of ``partitions`` (GROUP_SUBSCRIBED_TO_TOPIC while consumed)."""
        return await self._groups.delete_consumer_group_offsets(group_id, partitions, raise_errors=raise_errors)

    # ------------------------------------------------------------------ controller routing
    async def _controller_conn(self) -> BrokerConnection:
        if self._cluster.controller_id < 0 or self._cluster.controller_id not in self._cluster.brokers:
            await self._cluster.refresh_metadata(None, allow_auto_create=False)
        node = self._cluster.controller_id
        return await (self._cluster.connection(node) if node >= 0 else self._cluster.any_connection())

    async def _to_controller(self, items: str, api: Sendable[P, Resp], *args: P.args, **kwargs: P.kwargs) -> Resp:
        """``_to_controller(items, api, body)``: sends to the controller; when an entry of the response's
        ``items`` list says NOT_CONTROLLER, refreshes metadata and resends (bounded). Typed by ``api``."""
        delay = self.config["retry.backoff.ms"] / 1000
        for attempt in range(_CONTROLLER_RETRIES):
            conn = await self._controller_conn()
            response = await conn.send(api, *args, **kwargs)
            entries: list[Mapping[str, object]] = response[items]
            if not any(r["error_code"] == ErrorCode.NOT_CONTROLLER for r in entries) or \
                    attempt == _CONTROLLER_RETRIES - 1:
                return response
            self._cluster.controller_id = -1
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)
        raise AssertionError("unreachable")


def _new_topic_body(t: NewTopic) -> CreateTopicsRequestTopics:
    assignments: list[CreateTopicsRequestTopicsAssignments] = [{"partition_index": p, "broker_ids": list(b)} for p, b in sorted((t.replica_assignment or {}).items())]
    return {"name": t.name, "num_partitions": -1 if assignments else t.num_partitions,
            "replication_factor": -1 if assignments else t.replication_factor, "assignments": assignments,
            "configs": [{"name": k, "value": str(v)} for k, v in t.config.items()]}


def _error(code: int, message: str | None = None) -> KafkaError | None:
    return KafkaError(code, message) if code else None


def _maybe_raise(results: dict[str, KafkaError | None], raise_errors: bool) -> dict[str, KafkaError | None]:
    if raise_errors:
        for err in results.values():
            if err is not None:
                raise err
    return results
