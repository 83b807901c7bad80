"""Group membership over KIP-848's consumer group protocol (``group.protocol=consumer``).

The broker assigns: the member sends ConsumerGroupHeartbeat every ``heartbeat_interval_ms`` the coordinator
gives it, with its subscription, the server-side assignor (``group.remote.assignor``, None: the broker's
default) and the partitions it owns; the answer carries its member epoch and, when it changed, the partitions it
may use now. Reconciliation is incremental and runs in the application's poll (``ensure_active``): partitions
that left the assignment are revoked first (``on_partitions_revoked``, after an auto-commit), the heartbeat that
follows tells the coordinator they are released, and only then may their new owners get them; partitions that
joined it are added (``on_partitions_assigned`` with just those). FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID means
the partitions were lost (``on_partitions_lost``, no commit); the member rejoins with epoch 0 and the same member
id. Commits carry the member id and epoch (OffsetCommit/OffsetFetch v9). ``session.timeout.ms``,
``heartbeat.interval.ms`` and ``partition.assignment.strategy`` are the broker's business under this protocol
(``group.consumer.*``), as in Kafka's consumer.

Same surface as the classic ``GroupMember``, so ``Consumer`` drives either.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from moldau.cluster import COORDINATOR_ERRORS, Cluster
from moldau.config import ClientConfig
from moldau.errors import KafkaConnectionError, KafkaError, RequestTimeoutError
from moldau.fetcher import TopicPartition
from moldau.group import OffsetAndMetadata, committed_offsets
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.consumer_group import CONSUMER_GROUP_HEARTBEAT
from moldau.protocol.messages.offsets import OFFSET_COMMIT, OFFSET_FETCH
from moldau.tasks import cancel_and_wait

log = logging.getLogger("moldau.client.membership")

FENCED = frozenset({ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID})
# Errors after which this member cannot go on: raised from the next poll.
FATAL = frozenset({ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.UNSUPPORTED_ASSIGNOR,
                   ErrorCode.UNRELEASED_INSTANCE_ID, ErrorCode.GROUP_MAX_SIZE_REACHED, ErrorCode.INVALID_REQUEST,
                   ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.UNSUPPORTED_VERSION,
                   ErrorCode.INVALID_REGULAR_EXPRESSION})
LEAVE_EPOCH, STATIC_LEAVE_EPOCH = -1, -2


def new_member_id() -> str:
    """A member id as Kafka's clients make it (KIP-1082): a random UUID in URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class ConsumerMembershipManager:
    """One member of ``group.id`` under the consumer protocol; ``ensure_active()`` applies assignment changes."""

    def __init__(self, cluster: Cluster, config: ClientConfig, topics_provider: Callable[[], list[str]],
                 on_revoke: Callable[[set[TopicPartition], bool], Awaitable[None]]) -> None:
        self.cluster = cluster
        self.config = config
        self.group_id: str = config["group.id"]
        self.instance_id: str | None = config.get("group.instance.id")
        self.assignor: str | None = config.get("group.remote.assignor")
        self.member_id = new_member_id()
        self.member_epoch = 0
        self.assignment: set[TopicPartition] = set()  # what this member owns (the fetcher reads these)
        self.last_added: set[TopicPartition] = set()
        self._target: set[TopicPartition] | None = None  # the coordinator's latest answer, not applied yet
        self._lost = False
        self._fatal: KafkaError | None = None
        self._topics = topics_provider
        self._on_revoke = on_revoke
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._interval = 5.0  # until the coordinator says otherwise
        self._topic_names: dict[bytes, str] = {}

    # The classic member's surface that Consumer reads.
    @property
    def generation(self) -> int:
        return self.member_epoch

    @property
    def needs_join(self) -> bool:
        return self.member_epoch <= 0

    # ------------------------------------------------------------------ reconciliation (application side)
    async def ensure_active(self) -> set[TopicPartition] | None:
        """Starts the heartbeat on first use; applies a new assignment: revoke first, then add. Returns the new
        assignment when it changed, else None."""
        if self._fatal is not None:
            raise self._fatal
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._heartbeat_loop())
        if self._lost:
            self._lost = False
            lost, self.assignment = set(self.assignment), set()
            if lost:
                await self._on_revoke(lost, True)
            self.last_added = set()
            return set()
        target = self._target
        if target is None or target == self.assignment:
            return None
        self._target = None
        revoked = self.assignment - target
        if revoked:
            await self._on_revoke(revoked, False)
        self.last_added = target - self.assignment
        self.assignment = set(target)
        log.info("group %s epoch %d: assigned %s", self.group_id, self.member_epoch, sorted(self.assignment))
        self._wake.set()  # tell the coordinator at once what we own now (releases revoked partitions)
        return set(self.assignment)

    # ------------------------------------------------------------------ heartbeat
    async def _send(self, api: Any, body: dict[str, Any], max_version: int | None = None) -> dict[str, Any]:
        node = await self.cluster.coordinator(self.group_id)
        try:
            conn = await self.cluster.connection(node)
            return await self.cluster.send(node, api, body, conn.version_for(api, max_version))
        except (KafkaConnectionError, RequestTimeoutError):
            self.cluster.coordinator_dead(self.group_id)
            raise

    def _owned(self) -> list[dict[str, Any]]:
        by_topic: dict[str, list[int]] = {}
        for tp in self.assignment:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        out = []
        for topic, parts in sorted(by_topic.items()):
            info = self.cluster.topics.get(topic)
            if info is not None and info.topic_id is not None:
                out.append({"topic_id": info.topic_id, "partitions": sorted(parts)})
        return out

    async def heartbeat(self) -> None:
        """One ConsumerGroupHeartbeat (a full one each time: subscription, owned partitions, timeout)."""
        joining = self.member_epoch == 0
        topics = sorted(self._topics())
        body = {"group_id": self.group_id, "member_id": self.member_id, "member_epoch": self.member_epoch,
                "instance_id": self.instance_id, "rack_id": self.config.get("client.rack"),
                "rebalance_timeout_ms": self.config["max.poll.interval.ms"], "subscribed_topic_names": topics,
                "server_assignor": self.assignor, "topic_partitions": [] if joining else self._owned()}
        response = await self._send(CONSUMER_GROUP_HEARTBEAT, body)
        code = response["error_code"]
        if code == ErrorCode.NONE:
            if response["member_id"]:
                self.member_id = response["member_id"]
            self.member_epoch = response["member_epoch"]
            self._interval = max(response["heartbeat_interval_ms"], 1) / 1000
            if response["assignment"] is not None:
                self._target = await self._resolve(response["assignment"]["topic_partitions"], topics)
            return
        if code in FENCED:
            log.info("group %s: member %s fenced (%s); rejoining", self.group_id, self.member_id,
                     ErrorCode.for_code(code).name)
            self.member_epoch = 0
            self._target = None
            self._lost = True
            return
        if code in COORDINATOR_ERRORS:
            self.cluster.coordinator_dead(self.group_id)
            return
        error = KafkaError(code, f"ConsumerGroupHeartbeat {self.group_id}: {response.get('error_message')}")
        if code in FATAL:
            self._fatal = error
        raise error

    async def _resolve(self, parts: list[dict[str, Any]], topics: list[str]) -> set[TopicPartition]:
        """Topic ids -> names through the metadata (refreshed once when an id is new to it)."""
        names = {info.topic_id: name for name, info in self.cluster.topics.items() if info.topic_id is not None}
        if any(p["topic_id"] not in names for p in parts):
            await self.cluster.refresh_metadata(topics)
            names = {info.topic_id: name for name, info in self.cluster.topics.items()
                     if info.topic_id is not None}
        return {TopicPartition(names[p["topic_id"]], i) for p in parts if p["topic_id"] in names
                for i in p["partitions"]}

    async def _heartbeat_loop(self) -> None:
        backoff = self.config["retry.backoff.ms"] / 1000
        while True:
            if not self._topics() or self._lost:
                await asyncio.sleep(backoff)  # nothing to join for yet, or the poll has not seen the loss
                continue
            self._wake.clear()  # before the request: a wake-up set while it runs is not lost
            try:
                await self.heartbeat()
                delay = self._interval
            except (KafkaConnectionError, RequestTimeoutError) as exc:
                log.debug("group %s: heartbeat failed (%s)", self.group_id, exc)
                delay = backoff
            except KafkaError as exc:
                if self._fatal is not None:
                    log.error("group %s: %s", self.group_id, exc)
                    return
                log.info("group %s: heartbeat error %s", self.group_id, exc)
                delay = backoff
            try:
                async with asyncio.timeout(delay):  # not wait_for: see moldau.tasks
                    await self._wake.wait()
            except TimeoutError:
                pass

    async def leave(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])
            self._task = None
        if self.member_epoch <= 0:
            return
        try:
            await self._send(CONSUMER_GROUP_HEARTBEAT, {
                "group_id": self.group_id, "member_id": self.member_id,
                # A static member leaves for now (-2): its partitions wait for its next incarnation.
                "member_epoch": LEAVE_EPOCH if self.instance_id is None else STATIC_LEAVE_EPOCH,
                "instance_id": self.instance_id})
        except Exception as exc:  # leaving is best effort: the session timeout removes us otherwise
            log.debug("leaving group %s failed: %s", self.group_id, exc)
        self.member_epoch = 0

    # ------------------------------------------------------------------ offsets
    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], *, generation: bool = True) -> None:
        """OffsetCommit v9 with the member id and epoch; a STALE_MEMBER_EPOCH is retried with the newer epoch the
        heartbeat got meanwhile (as Kafka's consumer), for up to default.api.timeout.ms."""
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp, om in offsets.items():
            topics.setdefault(tp.topic, []).append({"partition_index": tp.partition, "committed_offset": om.offset,
                                                    "committed_metadata": om.metadata})
        deadline = time.monotonic() + self.config["default.api.timeout.ms"] / 1000
        while True:
            in_group = generation and self.member_epoch > 0
            response = await self._send(OFFSET_COMMIT, {
                "group_id": self.group_id, "generation_id_or_member_epoch": self.member_epoch if in_group else -1,
                "member_id": self.member_id if in_group else "", "group_instance_id": None,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}, 9)
            codes = {p["error_code"] for t in response["topics"] for p in t["partitions"]} - {0}
            if not codes:
                return
            code = codes.pop()
            if code == ErrorCode.STALE_MEMBER_EPOCH and time.monotonic() < deadline:
                await asyncio.sleep(self.config["retry.backoff.ms"] / 1000)
                continue
            if code in COORDINATOR_ERRORS:
                self.cluster.coordinator_dead(self.group_id)
            raise KafkaError(code, f"commit {self.group_id}")

    async def fetch_committed(self, tps: list[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata | None]:
        topics: dict[str, list[int]] = {}
        for tp in tps:
            topics.setdefault(tp.topic, []).append(tp.partition)
        in_group = self.member_epoch > 0
        response = await self._send(OFFSET_FETCH, {
            "groups": [{"group_id": self.group_id, "member_id": self.member_id if in_group else None,
                        "member_epoch": self.member_epoch if in_group else -1,
                        "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]}],
            "require_stable": self.config["isolation.level"] == "read_committed"}, 9)
        group = response["groups"][0]
        if group["error_code"]:
            if group["error_code"] in COORDINATOR_ERRORS:
                self.cluster.coordinator_dead(self.group_id)
            raise KafkaError(group["error_code"], f"offset fetch {self.group_id}")
        return committed_offsets(group["topics"])
