"""AdminClient methods for partitions and records: CreatePartitions, DeleteRecords, ElectLeaders and
DescribeLogDirs (mixed into :class:`moldau.admin.AdminClient`; the blocking facade in ``moldau.sync`` wraps them
like every other admin method).

CreatePartitions and ElectLeaders go to the controller, DeleteRecords to each partition's leader, DescribeLogDirs
to every broker asked about.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from moldau.cluster import Cluster
from moldau.config import ClientConfig
from moldau.connection import BrokerConnection
from moldau.errors import KafkaError
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.partition_admin import (
    ALTER_PARTITION_REASSIGNMENTS,
    CREATE_PARTITIONS,
    DELETE_RECORDS,
    DESCRIBE_LOG_DIRS,
    ELECT_LEADERS,
    LIST_PARTITION_REASSIGNMENTS,
)
from moldau.protocol.schema import P, Resp, Sendable
from moldau.protocol.types import TopicPartition

if TYPE_CHECKING:  # the message shapes are for mypy only: zero cost at run time
    from moldau.protocol.typed import (
        AlterPartitionReassignmentsRequestTopicsPartitions,
        CreatePartitionsRequestTopics,
        DeleteRecordsRequestTopicsPartitions,
        DescribeLogDirsRequest,
        ElectLeadersRequest,
        ElectLeadersRequestTopicPartitions,
        ListPartitionReassignmentsRequestTopics,
    )

ELECTION_TYPES = {"preferred": 0, "unclean": 1}
_RETRIES = 5


@dataclass(slots=True)
class NewPartitions:
    """The new total partition count, and optionally the replicas of each added partition."""

    total_count: int
    new_assignments: list[list[int]] | None = None


@dataclass(slots=True, frozen=True)
class ReplicaInfo:
    size: int
    offset_lag: int
    is_future: bool


@dataclass(slots=True)
class LogDirDescription:
    path: str
    error: KafkaError | None
    replicas: dict[TopicPartition, ReplicaInfo] = field(default_factory=dict)
    total_bytes: int = -1
    usable_bytes: int = -1


class PartitionAdmin:
    """Mixin for AdminClient, which provides ``_cluster``, ``_to_controller`` and ``_metadata_for``."""

    _cluster: Cluster
    config: ClientConfig

    async def _to_controller(self, items: str, api: Sendable[P, Resp], *args: P.args, **kwargs: P.kwargs) -> Resp:
        raise NotImplementedError

    async def _metadata_for(self, names: list[str]) -> None:
        raise NotImplementedError

    async def _controller_conn(self) -> BrokerConnection:
        raise NotImplementedError

    async def create_partitions(self, new_partitions: Mapping[str, int | NewPartitions], *,
                                validate_only: bool = False, timeout_ms: int = 60000,
                                raise_errors: bool = True) -> dict[str, KafkaError | None]:
        """Raises the partition count of each topic to its new total; a dict topic -> error (None: done)."""
        topics: list[CreatePartitionsRequestTopics] = []
        for name, spec in new_partitions.items():
            np = spec if isinstance(spec, NewPartitions) else NewPartitions(int(spec))
            topics.append({"name": name, "count": np.total_count,
                           "assignments": None if np.new_assignments is None else
                           [{"broker_ids": list(b)} for b in np.new_assignments]})
        response = await self._to_controller("results", CREATE_PARTITIONS, {
            "topics": topics, "timeout_ms": timeout_ms, "validate_only": validate_only})
        results = {r["name"]: _error(r["error_code"], r.get("error_message")) for r in response["results"]}
        if not validate_only:
            await self._cluster.refresh_metadata([n for n, e in results.items() if e is None])
        return _raise_first(results, raise_errors)

    async def delete_records(self, offsets: Mapping[TopicPartition, int], *, timeout_ms: int = 60000,
                             raise_errors: bool = True) -> dict[TopicPartition, int | KafkaError]:
        """Deletes the records below each offset (-1: below the high watermark) on each partition's leader;
        a dict (topic, partition) -> the new low watermark, or the error."""
        results: dict[TopicPartition, int | KafkaError] = {}
        pending = dict(offsets)
        delay = self.config["retry.backoff.ms"] / 1000
        for attempt in range(_RETRIES):
            await self._metadata_for(sorted({t for t, _ in pending}))
            per_leader: dict[int, dict[str, list[DeleteRecordsRequestTopicsPartitions]]] = {}
            for (topic, partition), offset in pending.items():
                leader = self._cluster.leader_for(topic, partition)
                known = self._cluster.partitions_for(topic)
                if known is None or partition not in known:
                    results[(topic, partition)] = KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                             f"{topic}-{partition} does not exist")
                    continue
                if leader is None:
                    results[(topic, partition)] = KafkaError(ErrorCode.LEADER_NOT_AVAILABLE,
                                                             f"{topic}-{partition} has no leader")
                    continue
                per_leader.setdefault(leader, {}).setdefault(topic, []).append(
                    {"partition_index": partition, "offset": offset})
            responses = await asyncio.gather(*(
                self._cluster.send(node, DELETE_RECORDS, {"timeout_ms": timeout_ms, "topics": [
                    {"name": t, "partitions": ps} for t, ps in by_topic.items()]})
                for node, by_topic in per_leader.items()))
            retry: dict[TopicPartition, int] = {}
            for response in responses:
                for t in response["topics"]:
                    for p in t["partitions"]:
                        tp = (t["name"], p["partition_index"])
                        err = _error(p["error_code"])
                        if err is not None and err.retriable and attempt < _RETRIES - 1:
                            retry[tp] = pending[tp]  # the leader moved: ask the new one
                        results[tp] = err if err is not None else int(p["low_watermark"])
            if not retry:
                break
            pending = retry
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)
        if raise_errors:
            for value in results.values():
                if isinstance(value, KafkaError):
                    raise value
        return results

    async def elect_leaders(self, election_type: str | int = "preferred", partitions: Iterable[TopicPartition] | None = None,
                            *, timeout_ms: int = 60000, raise_errors: bool = True) -> dict[TopicPartition, KafkaError | None]:
        """Preferred or unclean election on the controller; ``partitions`` None means every partition.
        ELECTION_NOT_NEEDED is reported in the dict but never raised (the partition already has the leader
        asked for)."""
        kind = ELECTION_TYPES.get(election_type, -1) if isinstance(election_type, str) else int(election_type)
        if kind not in (0, 1):
            raise ValueError(f"election_type must be 'preferred' or 'unclean', got {election_type!r}")
        topic_partitions: list[ElectLeadersRequestTopicPartitions] | None = None
        if partitions is not None:
            grouped: dict[str, list[int]] = {}
            for topic, partition in partitions:
                grouped.setdefault(topic, []).append(partition)
            topic_partitions = [{"topic": t, "partitions": ps} for t, ps in grouped.items()]
        body: ElectLeadersRequest = {"election_type": kind, "topic_partitions": topic_partitions,
                                     "timeout_ms": timeout_ms}
        delay = self.config["retry.backoff.ms"] / 1000
        for attempt in range(_RETRIES):
            conn = await self._controller_conn()
            if kind == 1 and conn.version_for(ELECT_LEADERS) < 1:
                raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, "unclean election needs ElectLeaders v1")
            response = await conn.send(ELECT_LEADERS, body)
            results = {(t["topic"], p["partition_id"]): _error(p["error_code"], p.get("error_message"))
                       for t in response["replica_election_results"] for p in t["partition_result"]}
            top = _error(response.get("error_code", 0))
            if top is not None:
                raise top
            not_controller = any(e is not None and e.code == ErrorCode.NOT_CONTROLLER for e in results.values())
            if not not_controller or attempt == _RETRIES - 1:
                break
            self._cluster.controller_id = -1
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)
        if raise_errors:
            for err in results.values():
                if err is not None and err.code != ErrorCode.ELECTION_NOT_NEEDED:
                    raise err
        return results

    async def describe_log_dirs(self, brokers: Iterable[int] | None = None,
                                topics: Mapping[str, Iterable[int]] | None = None
                                ) -> dict[int, list[LogDirDescription]]:
        """The log dirs of each broker (None: every broker) with the size and lag of each replica in them."""
        await self._cluster.refresh_metadata(None, allow_auto_create=False)
        nodes = sorted(self._cluster.brokers) if brokers is None else list(brokers)
        unknown = [n for n in nodes if n not in self._cluster.brokers]
        if unknown:
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"unknown broker id(s) {unknown}")
        body: DescribeLogDirsRequest = {"topics": None if topics is None else
                                        [{"topic": t, "partitions": list(ps)} for t, ps in topics.items()]}
        responses = await asyncio.gather(*(self._cluster.send(n, DESCRIBE_LOG_DIRS, body) for n in nodes))
        out: dict[int, list[LogDirDescription]] = {}
        for node, response in zip(nodes, responses):
            top = _error(response.get("error_code", 0))
            if top is not None:
                raise top
            dirs = []
            for r in response["results"]:
                replicas = {(t["name"], p["partition_index"]): ReplicaInfo(p["partition_size"], p["offset_lag"],
                                                                           p["is_future_key"])
                            for t in r["topics"] for p in t["partitions"]}
                dirs.append(LogDirDescription(r["log_dir"], _error(r["error_code"]), replicas,
                                              r.get("total_bytes", -1), r.get("usable_bytes", -1)))
            out[node] = dirs
        return out


    # ------------------------------------------------------------------ reassignment
    async def alter_partition_reassignments(self, reassignments: Mapping[TopicPartition, list[int] | None], *,
                                            timeout_ms: int = 60000,
                                            raise_errors: bool = True) -> dict[TopicPartition, KafkaError | None]:
        """Moves each partition to the given replicas (None: cancels its reassignment in progress); the move
        itself runs on after the answer (``list_partition_reassignments`` shows it)."""
        grouped: dict[str, list[AlterPartitionReassignmentsRequestTopicsPartitions]] = {}
        for (topic, partition), replicas in reassignments.items():
            grouped.setdefault(topic, []).append({"partition_index": partition,
                                                  "replicas": None if replicas is None else list(replicas)})
        response = await self._controller_request(ALTER_PARTITION_REASSIGNMENTS, {
            "timeout_ms": timeout_ms, "topics": [{"name": t, "partitions": ps} for t, ps in grouped.items()]})
        results = {(t["name"], p["partition_index"]): _error(p["error_code"], p.get("error_message"))
                   for t in response["responses"] for p in t["partitions"]}
        if raise_errors:
            for err in results.values():
                if err is not None:
                    raise err
        return results

    async def list_partition_reassignments(self, partitions: Iterable[TopicPartition] | None = None, *,
                                           timeout_ms: int = 60000) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]]:
        """Reassignments in progress: (topic, partition) -> (replicas, adding, removing)."""
        topics: list[ListPartitionReassignmentsRequestTopics] | None = None
        if partitions is not None:
            grouped: dict[str, list[int]] = {}
            for topic, partition in partitions:
                grouped.setdefault(topic, []).append(partition)
            topics = [{"name": t, "partition_indexes": ps} for t, ps in grouped.items()]
        response = await self._controller_request(LIST_PARTITION_REASSIGNMENTS,
                                                  {"timeout_ms": timeout_ms, "topics": topics})
        return {(t["name"], p["partition_index"]): (list(p["replicas"]), list(p["adding_replicas"]),
                                                    list(p["removing_replicas"]))
                for t in response["topics"] for p in t["partitions"]}

    async def _controller_request(self, api: Sendable[P, Resp], *args: P.args, **kwargs: P.kwargs) -> Resp:
        """``_controller_request(api, body)``: to the controller; a top-level NOT_CONTROLLER refreshes metadata
        and resends (bounded); another top-level error is raised. Typed by ``api``."""
        delay = self.config["retry.backoff.ms"] / 1000
        for attempt in range(_RETRIES):
            conn = await self._controller_conn()
            response = await conn.send(api, *args, **kwargs)
            code = response.get("error_code", 0)
            if code == ErrorCode.NOT_CONTROLLER and attempt < _RETRIES - 1:
                self._cluster.controller_id = -1
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            top = _error(code, response.get("error_message"))
            if top is not None:
                raise top
            return response
        raise AssertionError("unreachable")


def _error(code: int, message: str | None = None) -> KafkaError | None:
    return KafkaError(code, message) if code else None


def _raise_first(results: dict[str, KafkaError | None], raise_errors: bool) -> dict[str, KafkaError | None]:
    if raise_errors:
        for err in results.values():
            if err is not None:
                raise err
    return results
