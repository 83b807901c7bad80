"""CreatePartitions, DeleteRecords, ElectLeaders and DescribeLogDirs.

CreatePartitions and ElectLeaders are controller requests (as in Kafka's ZooKeeper mode: another broker answers
NOT_CONTROLLER); they reach the cluster only through ``ClusterControl``. DeleteRecords is answered by each
partition's leader, DescribeLogDirs by every broker for its own log dirs. DeleteRecords waits in its purgatory until the in-sync
followers have moved their log start offsets too (docs/admin.md). ACLs: Alter on the topic (CreatePartitions),
Delete on the topic (DeleteRecords), Alter on the cluster (ElectLeaders, reassignments), Describe on the cluster
(DescribeLogDirs, ListPartitionReassignments).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from typing import TYPE_CHECKING, Any, TypeAlias

from moldau.broker.apis.context import PartitionAdminDeps
from moldau.broker.metadata import TopicError
from moldau.broker.partition_plan import plan_new_partitions
from moldau.broker.purgatory import DelayedOperation
from moldau.broker.replica_manager import ReplicaManager
from moldau.broker.request_channel import Request
from moldau.broker.security.acl import Operation, ResourceType
from moldau.broker.topics import TopicCreationError
from moldau.protocol.errors import ErrorCode
from moldau.storage.errors import OffsetOutOfRangeError

if TYPE_CHECKING:  # the message shapes are for mypy only: zero cost at run time
    from moldau.protocol.typed import (
        AlterPartitionReassignmentsRequest,
        AlterPartitionReassignmentsResponse,
        AlterPartitionReassignmentsResponseResponsesPartitions,
        CreatePartitionsRequest,
        CreatePartitionsResponse,
        CreatePartitionsResponseResults,
        DeleteRecordsRequest,
        DeleteRecordsResponse,
        DeleteRecordsResponseTopics,
        DeleteRecordsResponseTopicsPartitions,
        DescribeLogDirsRequest,
        DescribeLogDirsResponse,
        DescribeLogDirsResponseResults,
        DescribeLogDirsResponseResultsTopicsPartitions,
        ElectLeadersRequest,
        ElectLeadersResponse,
        ElectLeadersResponseReplicaElectionResultsPartitionResult,
        ListPartitionReassignmentsRequest,
        ListPartitionReassignmentsResponse,
        ListPartitionReassignmentsResponseTopicsPartitions,
    )

log = logging.getLogger("moldau.apis.partition_admin")

HIGH_WATERMARK = -1  # DeleteRecords: "delete everything below the high watermark"


async def handle_create_partitions(ctx: PartitionAdminDeps, request: Request, body: CreatePartitionsRequest
                                   ) -> CreatePartitionsResponse:
    counts: dict[str, int] = {}
    for t in body["topics"]:
        counts[t["name"]] = counts.get(t["name"], 0) + 1
    results: list[CreatePartitionsResponseResults] = []
    quotas = ctx.topics.quotas
    budget = quotas.mutations(request) if quotas is not None else None  # controller_mutation_rate (KIP-599)
    for t in body["topics"]:
        name = t["name"]
        entry: CreatePartitionsResponseResults = {"name": name, "error_code": ErrorCode.NONE,
                                                  "error_message": None}
        results.append(entry)
        if counts[name] > 1:
            entry["error_code"], entry["error_message"] = ErrorCode.INVALID_REQUEST, "Duplicate topic in request."
            continue
        if not ctx.topics.auth.allowed(request, Operation.ALTER, ResourceType.TOPIC, name):
            entry["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            continue
        if not ctx.topics.metadata.is_controller():
            entry["error_code"] = ErrorCode.NOT_CONTROLLER
            continue
        try:
            existing = await ctx.cluster.partition_assignment(name)
            if existing is None:
                raise TopicCreationError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                         f"The topic '{name}' does not exist.")
            brokers = {b.broker_id: b.rack for b in ctx.topics.metadata.live_brokers()}
            plan = plan_new_partitions(existing, t["count"], t["assignments"], brokers)
            if body["validate_only"]:
                continue
            if budget is not None:
                if budget.refused():
                    raise TopicCreationError(ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                                             "The throttling quota has been exceeded.")
                budget.record(len(plan))
            timeout = body["timeout_ms"]
            await ctx.cluster.create_partitions(name, plan, timeout if timeout > 0 else None)
            log.info("topic %s: added partitions %s", name, sorted(plan))
        except (TopicCreationError, TopicError) as exc:
            entry["error_code"], entry["error_message"] = exc.code, exc.message
    return {"throttle_time_ms": budget.throttle_ms() if budget is not None else 0, "results": results}


class DelayedDeleteRecords(DelayedOperation):
    """Kafka's DelayedDeleteRecords: answers once every partition's low watermark (the smallest log start offset
    of the leader and its in-sync followers, which report theirs in their fetches) has reached the offset asked
    for; partitions still short of it when ``timeout_ms`` runs out answer REQUEST_TIMED_OUT."""

    def __init__(self, rm: ReplicaManager, timeout_ms: int, waiting: list[Waiting],
                 response: DeleteRecordsResponse, future: asyncio.Future[Any]) -> None:
        super().__init__(timeout_ms)
        self.rm = rm
        self.waiting = waiting
        self.response = response
        self.future = future

    def try_complete(self) -> bool:
        if self.future.done():  # the client went away
            return self.force_complete()
        self.waiting = [w for w in self.waiting if not _reached(self.rm, *w)]
        return self.force_complete() if not self.waiting else False

    def on_complete(self) -> None:
        for _, _, entry, _ in self.waiting:
            entry["error_code"], entry["low_watermark"] = ErrorCode.REQUEST_TIMED_OUT, -1
        if not self.future.done():
            self.future.set_result(self.response)


Waiting: TypeAlias = "tuple[str, int, DeleteRecordsResponseTopicsPartitions, int]"


def _reached(rm: ReplicaManager, topic: str, index: int, entry: DeleteRecordsResponseTopicsPartitions,
             required: int) -> bool:
    partition, error = rm.leader_partition(topic, index)
    if partition is None:  # no longer the leader
        entry["error_code"], entry["low_watermark"] = error, -1
        return True
    low = partition.low_watermark()
    if low < required:
        return False
    entry["low_watermark"] = low
    return True


def handle_delete_records(ctx: PartitionAdminDeps, request: Request, body: DeleteRecordsRequest
                          ) -> DeleteRecordsResponse | asyncio.Future[DeleteRecordsResponse]:
    """Moves each partition's log start offset up on the leader, then waits (purgatory) until the in-sync
    followers, which follow through the log_start_offset of their Fetch responses, have moved theirs."""
    rm = ctx.replica_manager
    moved = False
    topics: list[DeleteRecordsResponseTopics] = []
    waiting: list[Waiting] = []
    deletable = ctx.topics.auth.allowed_names(request, Operation.DELETE, ResourceType.TOPIC,
                                              (t["name"] for t in body["topics"]))
    for t in body["topics"]:
        partitions: list[DeleteRecordsResponseTopicsPartitions] = []
        for p in t["partitions"]:
            entry: DeleteRecordsResponseTopicsPartitions = {"partition_index": p["partition_index"],
                                                            "low_watermark": -1, "error_code": ErrorCode.NONE}
            partitions.append(entry)
            if t["name"] not in deletable:
                entry["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            partition, error = rm.leader_partition(t["name"], p["partition_index"])
            if partition is None:
                entry["error_code"] = error
                continue
            offset = partition.high_watermark if p["offset"] == HIGH_WATERMARK else p["offset"]
            if offset < 0 or offset > partition.high_watermark:
                entry["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
                continue
            try:
                moved |= partition.advance_log_start_offset(offset)
            except OffsetOutOfRangeError:
                entry["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
                continue
            rm.log_start_moved(t["name"], p["partition_index"])
            waiting.append((t["name"], p["partition_index"], entry, offset))
        topics.append({"name": t["name"], "partitions": partitions})
    if moved:
        # Persist at once (log-start-offset-checkpoint): deleted records must not come back after a restart.
        rm.log_manager.checkpoint()
    response: DeleteRecordsResponse = {"throttle_time_ms": 0, "topics": topics}
    waiting = [w for w in waiting if not _reached(rm, *w)]
    if not waiting:
        return response
    future: asyncio.Future[DeleteRecordsResponse] = asyncio.get_running_loop().create_future()
    op = DelayedDeleteRecords(rm, max(0, body["timeout_ms"]), waiting, response, future)
    ctx.delete_records_purgatory.try_complete_else_watch(op, [(topic, index) for topic, index, _, _ in waiting])
    return future


async def handle_elect_leaders(ctx: PartitionAdminDeps, request: Request, body: ElectLeadersRequest
                               ) -> ElectLeadersResponse:
    election_type = body["election_type"] if request.version >= 1 else 0
    if not ctx.topics.auth.cluster(request, Operation.ALTER):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "replica_election_results": []}
    if election_type not in (0, 1):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST, "replica_election_results": []}
    wanted = None
    if body["topic_partitions"] is not None:
        wanted = [(t["topic"], p) for t in body["topic_partitions"] for p in t["partitions"]]
    results = await ctx.cluster.elect_leaders(election_type, wanted)
    by_topic: dict[str, list[ElectLeadersResponseReplicaElectionResultsPartitionResult]] = {}
    for (topic, p), (code, message) in results.items():
        by_topic.setdefault(topic, []).append({"partition_id": p, "error_code": code, "error_message": message})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE,
            "replica_election_results": [{"topic": t, "partition_result": sorted(r, key=lambda x: x["partition_id"])}
                                         for t, r in sorted(by_topic.items())]}


def handle_describe_log_dirs(ctx: PartitionAdminDeps, request: Request, body: DescribeLogDirsRequest
                             ) -> DescribeLogDirsResponse:
    if not ctx.topics.auth.cluster(request, Operation.DESCRIBE):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "results": []}
    rm = ctx.replica_manager
    lm = rm.log_manager
    wanted: dict[str, set[int]] | None = None
    if body["topics"] is not None:
        wanted = {}
        for t in body["topics"]:
            wanted.setdefault(t["topic"], set()).update(t["partitions"])
    results: list[DescribeLogDirsResponseResults] = []
    for d in lm.log_dirs:
        if d in lm.offline_dirs:
            results.append({"error_code": ErrorCode.KAFKA_STORAGE_ERROR, "log_dir": str(d.resolve()), "topics": []})
            continue
        per_topic: dict[str, list[DescribeLogDirsResponseResultsTopicsPartitions]] = {}
        for lg in lm.all_logs():
            if lg.dir.parent != d or (wanted is not None and lg.partition not in wanted.get(lg.topic, ())):
                continue
            partition = rm.get_partition(lg.topic, lg.partition)
            hw = partition.high_watermark if partition is not None else lg.log_end_offset
            per_topic.setdefault(lg.topic, []).append({
                "partition_index": lg.partition, "partition_size": lg.size,
                # Kafka's lag of a current (not future) log: how far its end is behind the high watermark.
                "offset_lag": max(hw - lg.log_end_offset, 0), "is_future_key": False})
        try:
            usage = shutil.disk_usage(d)
            total, usable = usage.total, usage.free
        except OSError:
            total = usable = -1
        results.append({"error_code": ErrorCode.NONE, "log_dir": str(d.resolve()), "total_bytes": total,
                        "usable_bytes": usable,
                        "topics": [{"name": t, "partitions": sorted(ps, key=lambda x: x["partition_index"])}
                                   for t, ps in sorted(per_topic.items())]})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results": results}


async def handle_alter_partition_reassignments(ctx: PartitionAdminDeps, request: Request,
                                               body: AlterPartitionReassignmentsRequest
                                               ) -> AlterPartitionReassignmentsResponse:
    wanted = {(t["name"], p["partition_index"]): (None if p["replicas"] is None else list(p["replicas"]))
              for t in body["topics"] for p in t["partitions"]}
    if not ctx.topics.auth.cluster(request, Operation.ALTER):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": None,
                "responses": []}
    results = await ctx.cluster.alter_reassignments(wanted)
    if results is None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER,
                "error_message": "This is not the correct controller for this cluster.", "responses": []}
    by_topic: dict[str, list[AlterPartitionReassignmentsResponseResponsesPartitions]] = {}
    for (topic, p), (code, message) in results.items():
        by_topic.setdefault(topic, []).append({"partition_index": p, "error_code": code, "error_message": message})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "responses": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}


async def handle_list_partition_reassignments(ctx: PartitionAdminDeps, request: Request,
                                              body: ListPartitionReassignmentsRequest
                                              ) -> ListPartitionReassignmentsResponse:
    wanted = None if body["topics"] is None else [(t["name"], p) for t in body["topics"]
                                                  for p in t["partition_indexes"]]
    if not ctx.topics.auth.cluster(request, Operation.DESCRIBE):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": None,
                "topics": []}
    ongoing = await ctx.cluster.list_reassignments(wanted)
    if ongoing is None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER,
                "error_message": "This is not the correct controller for this cluster.", "topics": []}
    by_topic: dict[str, list[ListPartitionReassignmentsResponseTopicsPartitions]] = {}
    for (topic, p), (replicas, adding, removing) in sorted(ongoing.items()):
        by_topic.setdefault(topic, []).append({"partition_index": p, "replicas": replicas,
                                               "adding_replicas": adding, "removing_replicas": removing})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
