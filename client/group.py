"""Group membership over the classic protocol (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) and committed offsets.

Eager rebalancing: before rejoining, the member revokes everything it owns (the consumer commits first when
auto-commit is on), then receives a fresh assignment. A background task heartbeats every
``heartbeat.interval.ms``; REBALANCE_IN_PROGRESS marks the member for rejoin, UNKNOWN_MEMBER_ID /
ILLEGAL_GENERATION / FENCED_INSTANCE_ID mean its partitions were lost.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NamedTuple

from moldau.assignors import (
    ASSIGNORS,
    COOPERATIVE,
    MemberSubscription,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from moldau.cluster import COORDINATOR_ERRORS, Cluster
from moldau.config import ClientConfig
from moldau.errors import ConfigError, KafkaConnectionError, KafkaError, RequestTimeoutError
from moldau.fetcher import TopicPartition
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.group import HEARTBEAT, JOIN_GROUP, LEAVE_GROUP, SYNC_GROUP
from moldau.protocol.messages.offsets import OFFSET_COMMIT, OFFSET_FETCH
from moldau.tasks import cancel_and_wait

log = logging.getLogger("moldau.client.group")

JOIN_MAX_VERSION = 7  # v8 adds a reason, v9 KIP-814's skip_assignment: neither needed
MEMBER_LOST = frozenset({ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION, ErrorCode.FENCED_INSTANCE_ID})


class ConsumerGroupMetadata(NamedTuple):
    """What a transactional producer's ``send_offsets_to_transaction`` needs of the consumer (KIP-447): the
    broker refuses the offsets of a member that is no longer in the group's current generation."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class OffsetAndMetadata:
    __slots__ = ("offset", "metadata")

    def __init__(self, offset: int, metadata: str = "") -> None:
        self.offset = offset
        self.metadata = metadata

    def __repr__(self) -> str:
        return f"OffsetAndMetadata({self.offset}, {self.metadata!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OffsetAndMetadata) and (other.offset, other.metadata) == (self.offset,
                                                                                            self.metadata)

    def __hash__(self) -> int:
        return hash((self.offset, self.metadata))


def committed_offsets(topics: Any) -> dict[TopicPartition, OffsetAndMetadata | None]:
    """The committed offsets of an OffsetFetch answer's topics (None where the group has none); KafkaError for
    a partition's error. Shared by the classic group and the KIP-848 membership manager."""
    out: dict[TopicPartition, OffsetAndMetadata | None] = {}
    for t in topics:
        for p in t["partitions"]:
            if p["error_code"]:
                raise KafkaError(p["error_code"], f"offset fetch {t['name']}-{p['partition_index']}")
            off = p["committed_offset"]
            out[TopicPartition(t["name"], p["partition_index"])] = (
                OffsetAndMetadata(off, p.get("metadata") or "") if off >= 0 else None)
    return out


class GroupMember:
    """One member of ``group.id``; ``ensure_active()`` (re)joins when needed and returns the assignment."""

    def __init__(self, cluster: Cluster, config: ClientConfig,
                 topics_provider: Callable[[], list[str]],
                 on_revoke: Callable[[set[TopicPartition], bool], Awaitable[None]]) -> None:
        self.cluster = cluster
        self.config = config
        self.group_id: str = config["group.id"]
        self.instance_id: str | None = config.get("group.instance.id")
        self.member_id = ""
        self.generation = -1
        self.protocol: str | None = None
        self.leader = False
        self.assignment: set[TopicPartition] = set()
        self.needs_join = True
        self._topics = topics_provider
        self._on_revoke = on_revoke
        self._heartbeat: asyncio.Task[None] | None = None
        self._joined_topics: list[str] = []
        self.assignors: list[str] = list(config["partition.assignment.strategy"])
        unknown = [a for a in self.assignors if a not in ASSIGNORS]
        if unknown or not self.assignors:
            raise ConfigError("partition.assignment.strategy", f"unsupported assignor(s) {unknown}; "
                              f"supported: {', '.join(ASSIGNORS)}")
        # Kafka's rule: the member rebalances cooperatively (KIP-429) only when every assignor it lists can.
        self.cooperative = all(a in COOPERATIVE for a in self.assignors)
        self.last_added: set[TopicPartition] = set()
        self._lost: set[TopicPartition] = set()
        # The leader's view of the partition counts it assigned from (Kafka's assignment snapshot): when the
        # refreshed metadata shows another count (CreatePartitions), the leader rejoins so the group rebalances.
        self._assigned_counts: dict[str, int] = {}

    # ------------------------------------------------------------------ coordinator requests
    async def _send(self, api: Any, body: dict[str, Any], max_version: int | None = None) -> dict[str, Any]:
        node = await self.cluster.coordinator(self.group_id)
        try:
            conn = await self.cluster.connection(node)
            version = conn.version_for(api, max_version)
            return await self.cluster.send(node, api, body, version)
        except (KafkaConnectionError, RequestTimeoutError):
            self.cluster.coordinator_dead(self.group_id)
            raise

    def _coordinator_error(self, code: int) -> bool:
        if code in COORDINATOR_ERRORS:
            self.cluster.coordinator_dead(self.group_id)
            return True
        return False

    # ------------------------------------------------------------------ join / sync
    def subscription_changed(self) -> bool:
        return sorted(self._topics()) != self._joined_topics

    def partition_counts_changed(self) -> bool:
        """Leader only: a subscribed topic's partition count differs from the one the assignment was made for."""
        if not self.leader or not self._assigned_counts:
            return False
        for topic, count in self._assigned_counts.items():
            parts = self.cluster.partitions_for(topic)
            if parts is not None and len(parts) != count:
                log.info("group %s: topic %s now has %d partitions (assigned for %d); rebalancing",
                         self.group_id, topic, len(parts), count)
                return True
        return False

    async def ensure_active(self) -> set[TopicPartition] | None:
        """Rejoins if needed; returns the new assignment after a rebalance, else None."""
        if not self.needs_join and not self.subscription_changed() and not self.partition_counts_changed():
            return None
        if self._lost:
            lost, self._lost = self._lost, set()
            await self._on_revoke(lost, True)
        before = set(self.assignment)
        if not self.cooperative:  # eager: give everything up before rejoining
            await self._on_revoke(before, False)
            self.assignment = set()
            before = set()
        backoff = self.config["retry.backoff.ms"] / 1000
        while True:
            try:
                if await self._join_and_sync():
                    break
            except (KafkaConnectionError, RequestTimeoutError) as exc:
                log.info("group %s: join failed (%s), retrying", self.group_id, exc)
            await asyncio.sleep(backoff)
        self.needs_join = False
        if self._lost:  # fenced during the join: what we held is lost, not revoked (no commit)
            lost, self._lost = self._lost, set()
            before -= lost
            await self._on_revoke(lost, True)
        self.last_added = self.assignment - before
        revoked = before - self.assignment
        if revoked:  # cooperative: give up only what moved, then rejoin so the new owner can get it
            await self._on_revoke(revoked, False)
            self.needs_join = True
        if self._heartbeat is None or self._heartbeat.done():
            self._heartbeat = asyncio.get_running_loop().create_task(self._heartbeat_loop())
        return set(self.assignment)

    async def _join_and_sync(self) -> bool:
        topics = sorted(self._topics())
        await self.cluster.refresh_metadata(topics)
        if self.cooperative:  # owned partitions let the leader keep them in place (KIP-429)
            owned: dict[str, list[int]] = {}
            for tp in sorted(self.assignment):
                owned.setdefault(tp.topic, []).append(tp.partition)
            metadata = encode_subscription(Subscription(topics, struct.pack(">i", self.generation), owned, 1))
        else:
            metadata = encode_subscription(Subscription(topics, None, {}, version=0))
        body = {"group_id": self.group_id, "session_timeout_ms": self.config["session.timeout.ms"],
                "rebalance_timeout_ms": self.config["max.poll.interval.ms"], "member_id": self.member_id,
                "group_instance_id": self.instance_id, "protocol_type": "consumer",
                "protocols": [{"name": a, "metadata": metadata} for a in self.assignors]}
        response = await self._send(JOIN_GROUP, body, JOIN_MAX_VERSION)
        code = response["error_code"]
        if code == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = response["member_id"]
            return False
        if code in MEMBER_LOST:
            self._member_lost()
            return False
        if self._coordinator_error(code) or code == ErrorCode.REBALANCE_IN_PROGRESS:
            return False
        if code:
            raise KafkaError(code, f"JoinGroup {self.group_id}")
        self.member_id = response["member_id"]
        self.generation = response["generation_id"]
        self.protocol = response["protocol_name"]
        self.leader = response["leader"] == self.member_id
        assignments: list[dict[str, Any]] = []
        if self.leader:
            assignments = self._assign(response["members"])
        sync = await self._send(SYNC_GROUP, {
            "group_id": self.group_id, "generation_id": self.generation, "member_id": self.member_id,
            "group_instance_id": self.instance_id, "protocol_type": "consumer", "protocol_name": self.protocol,
            "assignments": assignments})
        code = sync["error_code"]
        if code in MEMBER_LOST:
            self._member_lost()
            return False
        if self._coordinator_error(code) or code == ErrorCode.REBALANCE_IN_PROGRESS:
            return False
        if code:
            raise KafkaError(code, f"SyncGroup {self.group_id}")
        self.assignment = {TopicPartition(t, p) for t, ps in decode_assignment(sync["assignment"]).items()
                           for p in ps}
        self._joined_topics = topics
        log.info("group %s generation %d: assigned %s", self.group_id, self.generation, sorted(self.assignment))
        return True

    def _member_lost(self) -> None:
        self.member_id, self.generation = "", -1
        self._lost |= self.assignment
        self.assignment = set()

    def _assign(self, members: list[dict[str, Any]]) -> list[dict[str, Any]]:
        subs = [MemberSubscription(m["member_id"], m.get("group_instance_id"),
                                   decode_subscription(bytes(m["metadata"]))) for m in members]
        counts: dict[str, int] = {}
        for topic in {t for s in subs for t in s.subscription.topics}:
            parts = self.cluster.partitions_for(topic)
            if parts:
                counts[topic] = len(parts)
        assert self.protocol is not None
        self._assigned_counts = dict(counts)
        plan = ASSIGNORS[self.protocol](subs, counts)
        return [{"member_id": m, "assignment": encode_assignment(tps)} for m, tps in plan.items()]

    # ------------------------------------------------------------------ heartbeat / leave
    async def _heartbeat_loop(self) -> None:
        interval = self.config["heartbeat.interval.ms"] / 1000
        while True:
            await asyncio.sleep(interval)
            if self.needs_join or self.generation < 0:
                continue
            try:
                response = await self._send(HEARTBEAT, {
                    "group_id": self.group_id, "generation_id": self.generation, "member_id": self.member_id,
                    "group_instance_id": self.instance_id})
            except (KafkaConnectionError, RequestTimeoutError, KafkaError) as exc:
                log.debug("heartbeat failed: %s", exc)
                continue
            code = response["error_code"]
            if code == ErrorCode.REBALANCE_IN_PROGRESS:
                self.needs_join = True
            elif code in MEMBER_LOST:
                log.info("group %s: member %s lost (%s)", self.group_id, self.member_id, ErrorCode.for_code(code).name)
                # The listener runs in the application's getmany (ensure_active), not in this task.
                self._member_lost()
                self.needs_join = True
            else:
                self._coordinator_error(code)

    async def leave(self) -> None:
        if self._heartbeat is not None:
            await cancel_and_wait([self._heartbeat])
            self._heartbeat = None
        if not self.member_id or self.instance_id is not None:
            return  # static members keep their slot until session.timeout.ms (Kafka's behaviour)
        try:
            await self._send(LEAVE_GROUP, {"group_id": self.group_id, "member_id": self.member_id,
                                           "members": [{"member_id": self.member_id, "group_instance_id": None}]})
        except Exception as exc:  # leaving is best effort: the session timeout removes us otherwise
            log.debug("LeaveGroup failed: %s", exc)
        self.member_id, self.generation = "", -1

    # ------------------------------------------------------------------ offsets
    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], *, generation: bool = True) -> None:
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp, om in offsets.items():
            topics.setdefault(tp.topic, []).append({"partition_index": tp.partition, "committed_offset": om.offset,
                                                    "committed_metadata": om.metadata})
        in_group = generation and self.generation >= 0
        response = await self._send(OFFSET_COMMIT, {
            "group_id": self.group_id, "generation_id_or_member_epoch": self.generation if in_group else -1,
            "member_id": self.member_id if in_group else "", "group_instance_id": self.instance_id if in_group else None,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}, 8)
        for t in response["topics"]:
            for p in t["partitions"]:
                code = p["error_code"]
                if code:
                    if code in MEMBER_LOST or code == ErrorCode.REBALANCE_IN_PROGRESS:
                        self.needs_join = True
                    self._coordinator_error(code)
                    raise KafkaError(code, f"commit {t['name']}-{p['partition_index']}")

    async def fetch_committed(self, tps: list[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The committed offsets. A read_committed consumer asks for stable ones (KIP-447, OffsetFetch v7
        require_stable, as Kafka's consumer): while a transaction's offsets for a partition are pending the broker
        answers UNSTABLE_OFFSET_COMMIT, retried here for up to default.api.timeout.ms, so a consumer taking over
        from a transactional worker starts after what that transaction commits, not before it."""
        stable = self.config["isolation.level"] == "read_committed"
        deadline = time.monotonic() + self.config["default.api.timeout.ms"] / 1000
        while True:
            try:
                return await self._fetch_committed(tps, stable)
            except KafkaError as exc:
                if exc.code != ErrorCode.UNSTABLE_OFFSET_COMMIT or time.monotonic() >= deadline:
                    raise
            await asyncio.sleep(self.config["retry.backoff.ms"] / 1000)

    async def _fetch_committed(self, tps: list[TopicPartition], stable: bool,
                               ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        topics: dict[str, list[int]] = {}
        for tp in tps:
            topics.setdefault(tp.topic, []).append(tp.partition)
        response = await self._send(OFFSET_FETCH, {
            "group_id": self.group_id, "require_stable": stable,
            "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]}, 7)
        if response.get("error_code"):
            self._coordinator_error(response["error_code"])
            raise KafkaError(response["error_code"], f"offset fetch {self.group_id}")
        return committed_offsets(response["topics"])
