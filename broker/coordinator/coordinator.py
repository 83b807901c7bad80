"""The group coordinator: Kafka's classic JoinGroup/SyncGroup/Heartbeat/LeaveGroup protocol and offset commits.

Rebalances and member sessions are delayed operations in two purgatories driven by the injected timer:
``DelayedJoin`` (until every member rejoined, at most the largest rebalance timeout), ``InitialDelayedJoin``
(``group.initial.rebalance.delay.ms`` for a group that was empty, extended while new members arrive) and
``DelayedHeartbeat`` (one per member: the session timeout). Answers to parked JoinGroup/SyncGroup requests go
through callbacks that the request handlers turn into futures.

Leadership of ``__consumer_offsets`` partitions decides which groups are coordinated here:
``on_become_leader(partition)`` loads them (COORDINATOR_LOAD_IN_PROGRESS meanwhile), ``on_resign(partition)``
drops them. All methods run on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any

from moldau.broker.coordinator.config import GroupConfig
from moldau.broker.coordinator.consumer_membership import ConsumerMembership
from moldau.broker.coordinator.group import GroupMetadata, GroupState, MemberMetadata, OffsetAndMetadata
from moldau.broker.coordinator.membership import Membership
from moldau.broker.coordinator.offsets import OFFSETS_TOPIC, OffsetStore
from moldau.broker.purgatory import Purgatory, Timer, TimerHandle
from moldau.protocol.errors import ErrorCode
from moldau.protocol.types import TopicPartition
from moldau.storage.config import Clock

log = logging.getLogger("moldau.coordinator")

S = GroupState


class GroupCoordinator(Membership, ConsumerMembership):
    """Groups of the ``__consumer_offsets`` partitions led by this broker (see the module docstring)."""

    def __init__(self, store: OffsetStore, timer: Timer, clock: Clock, config: GroupConfig,
                 broker_id: int = -1) -> None:
        self.store = store
        self.timer = timer
        self.clock = clock
        self.config = config
        self.broker_id = broker_id
        self.heartbeat_purgatory = Purgatory("Heartbeat", timer, broker_id)
        self.rebalance_purgatory = Purgatory("Rebalance", timer, broker_id)
        self.active = False
        self._load_tasks: dict[int, asyncio.Task[None]] = {}
        self._cleanup_handle: TimerHandle | None = None
        self.topic_lock = asyncio.Lock()  # serialises creation of __consumer_offsets
        store.consumer_loader = self.load_consumer  # KIP-848 groups from their records

    # ----------------------------------------------------------------------------------------- life cycle
    def startup(self) -> None:
        self.active = True
        self._schedule_cleanup()

    def shutdown(self) -> None:
        self.active = False
        if self._cleanup_handle is not None:
            self._cleanup_handle.cancel()
        for task in self._load_tasks.values():
            task.cancel()
        self._load_tasks.clear()
        for partition in list(self.store.owned | self.store.loading):
            self.on_resign(partition)
        self.heartbeat_purgatory.shutdown()
        self.rebalance_purgatory.shutdown()

    def now(self) -> int:
        return self.clock.time_ms()

    def new_member_id(self, client_id: str) -> str:
        return f"{client_id}-{uuid.uuid4()}"

    # ----------------------------------------------------------------------------------------- leadership
    def on_topic_change(self, name: str, topic: Any) -> None:
        """MetadataStore listener: follow the leadership of the __consumer_offsets partitions (and let consumer
        groups see topic changes)."""
        self.invalidate_topics()
        if name != OFFSETS_TOPIC:
            return
        led: set[int] = set()
        if topic is not None:
            self.store.num_partitions = len(topic.partitions)
            led = {p for p, state in topic.partitions.items() if state.leader == self.broker_id}
        current = self.store.owned | self.store.loading
        for partition in sorted(led - current):
            self.on_become_leader(partition)
        for partition in sorted(current - led):
            self.on_resign(partition)

    def on_become_leader(self, partition: int) -> None:
        """Start coordinating the groups of this __consumer_offsets partition (loads them in the background)."""
        if partition in self.store.owned or partition in self.store.loading:
            return  # already ours; a new leader epoch goes through on_resign first
        epoch = self.store.begin_load(partition)
        task = asyncio.get_running_loop().create_task(self._load(partition, epoch),
                                                      name=f"load-{OFFSETS_TOPIC}-{partition}")
        self._load_tasks[partition] = task

    async def _load(self, partition: int, epoch: int) -> None:
        try:
            groups = await self.store.load_partition(partition, epoch)
        except Exception:
            log.exception("loading %s-%d failed", OFFSETS_TOPIC, partition)
            return
        finally:
            if self._load_tasks.get(partition) is asyncio.current_task():
                del self._load_tasks[partition]
        for group in groups or []:
            for member in group.members.values():
                self.complete_and_schedule_heartbeat(group, member)
            self.resume_consumer_members(group)

    def on_resign(self, partition: int) -> None:
        """Stop coordinating the partition's groups: parked requests hear NOT_COORDINATOR."""
        task = self._load_tasks.pop(partition, None)
        if task is not None:
            task.cancel()
        for group in self.store.unload_partition(partition):
            self._kill_group(group, ErrorCode.NOT_COORDINATOR)

    def _kill_group(self, group: GroupMetadata, error: ErrorCode) -> None:
        members = list(group.members.values())
        self.drop_consumer_timers(group)
        group.state = S.DEAD
        for member in members:
            group.invoke_join_callback(member, self.join_error(member.member_id, error))
            group.invoke_sync_callback(member, error, b"")
            self.heartbeat_purgatory.check_and_complete((group.group_id, member.member_id))
        for member_id in list(group.pending_members):
            self.heartbeat_purgatory.check_and_complete((group.group_id, member_id))
        self.rebalance_purgatory.check_and_complete(group.group_id)

    def validate(self, group_id: str | None, allow_empty: bool = False) -> ErrorCode | None:
        """The coordinator-level error for a request about this group, or None."""
        if group_id is None or (not group_id and not allow_empty):
            return ErrorCode.INVALID_GROUP_ID
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if not self.store.is_local(group_id):
            return ErrorCode.NOT_COORDINATOR
        if self.store.is_loading(group_id):
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return None

    # ----------------------------------------------------------------------------------------- offsets
    def commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int,
                       offsets: dict[TopicPartition, OffsetAndMetadata], api_version: int = 8
                       ) -> dict[TopicPartition, ErrorCode]:
        """OffsetCommit; ``generation_id`` is the member epoch for a consumer group (KIP-848, v9)."""
        error = self._commit_error(group_id, member_id, group_instance_id, generation_id, api_version)
        if error is not None:
            return {tp: error for tp in offsets}
        group = self.store.get_group(group_id)
        assert group is not None
        result: dict[TopicPartition, ErrorCode] = {}
        valid: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, o in offsets.items():
            if self.store.metadata_too_large(o.metadata):
                result[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                valid[tp] = o
        stored = self.store.store_offsets(group, valid)
        for tp in valid:
            result[tp] = stored
        return result

    def commit_txn_offsets(self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
                           group_instance_id: str | None, generation_id: int,
                           offsets: dict[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit: pending until the producer's transaction marker (KIP-447's member and generation
        checks when the client sends them, v3+)."""
        error = self.validate(group_id, allow_empty=True)
        group = self.store.get_group(group_id) if error is None else None
        if error is None and group is None:
            # Kafka creates the group for a transactional commit (no group management needed).
            group = self.store.add_group(GroupMetadata(group_id, self.store.partition_for(group_id)))
        if group is not None:
            if group.is_(S.DEAD):
                error = ErrorCode.COORDINATOR_NOT_AVAILABLE
            elif group.consumer is not None:
                if member_id or generation_id >= 0:
                    error = self.consumer_commit_error(group, member_id, generation_id, 9)
            elif group.is_static_member_fenced(member_id, group_instance_id):
                error = ErrorCode.FENCED_INSTANCE_ID
            elif member_id and not group.has(member_id):
                error = ErrorCode.UNKNOWN_MEMBER_ID
            elif generation_id >= 0 and generation_id != group.generation_id:
                error = ErrorCode.ILLEGAL_GENERATION
        if error is not None or group is None:
            return {tp: error or ErrorCode.COORDINATOR_NOT_AVAILABLE for tp in offsets}
        result: dict[TopicPartition, ErrorCode] = {}
        valid: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, o in offsets.items():
            if self.store.metadata_too_large(o.metadata):
                result[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                valid[tp] = o
        stored = self.store.store_txn_offsets(group, producer_id, producer_epoch, valid)
        for tp in valid:
            result[tp] = stored
        return result

    def pending_txn_partitions(self, group_id: str) -> set[TopicPartition]:
        """Partitions with a transactional offset commit waiting for its marker (OffsetFetch require_stable)."""
        group = self.store.get_group(group_id)
        if group is None:
            return set()
        return {tp for pending in group.pending_txn_offsets.values() for tp in pending}

    def on_transaction_marker(self, topic: str, partition: int, producer_id: int, committed: bool) -> None:
        """ReplicaManager marker listener: a COMMIT/ABORT marker of ``producer_id`` is written and replicated on
        a __consumer_offsets partition led here; its pending transactional offsets count or are dropped."""
        if topic != OFFSETS_TOPIC:
            return
        if partition in self.store.loading:  # the load may have read the log before this marker
            self.store.markers_during_load.setdefault(partition, []).append((producer_id, committed))
            return
        if partition not in self.store.owned:
            return
        if self.store.complete_txn_offsets(partition, producer_id, committed):
            log.debug("%s transactional offsets of producer %d on %s-%d", "committed" if committed else "dropped",
                      producer_id, topic, partition)

    def _commit_error(self, group_id: str, member_id: str, group_instance_id: str | None,
                      generation_id: int, api_version: int = 8) -> ErrorCode | None:
        error = self.validate(group_id, allow_empty=True)
        if error is not None:
            return error
        group = self.store.get_group(group_id)
        if group is not None and group.consumer is not None and not group.is_(S.DEAD):
            return self.consumer_commit_error(group, member_id, generation_id, api_version)
        if group is None:
            if generation_id >= 0:
                # A member of a generation this coordinator does not know (v9: the group does not exist).
                return ErrorCode.GROUP_ID_NOT_FOUND if api_version >= 9 else ErrorCode.ILLEGAL_GENERATION
            # Offsets only, no group management: the group exists from now on, empty.
            self.store.add_group(GroupMetadata(group_id, self.store.partition_for(group_id)))
            return None
        if group.is_(S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.is_static_member_fenced(member_id, group_instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if generation_id < 0 and group.is_(S.EMPTY):
            return None
        if not group.has(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_(S.COMPLETING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        # Stable or PreparingRebalance: a commit counts as a sign of life.
        self.complete_and_schedule_heartbeat(group, group.get(member_id))
        return None

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None, member_id: str | None = None,
                      member_epoch: int = -1) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None]]:
        """Committed offsets (None = nothing committed); partitions None = every committed partition. A member of
        a consumer group names itself and its epoch (OffsetFetch v9)."""
        error = self.validate(group_id, allow_empty=True)
        if error is None:
            error = self.consumer_fetch_error(group_id, member_id, member_epoch)
        if error is not None:
            return error, {}
        group = self.store.get_group(group_id)
        committed = group.offsets if group is not None else {}
        if partitions is None:
            return ErrorCode.NONE, dict(sorted(committed.items()))
        return ErrorCode.NONE, {tp: committed.get(tp) for tp in partitions}

    def delete_offsets(self, group_id: str, partitions: list[TopicPartition]) -> \
            tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        error = self.validate(group_id)
        if error is not None:
            return error, {}
        group = self.store.get_group(group_id)
        if group is None or group.is_(S.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        if group.consumer is not None:
            subscribed: set[str] = set(group.consumer.subscribed_topics())
        elif group.is_(S.EMPTY):
            subscribed = set()
        else:
            topics = group.subscribed_topics()
            if topics is None:
                return ErrorCode.NON_EMPTY_GROUP, {}
            subscribed = topics
        result = {tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC if tp[0] in subscribed else ErrorCode.NONE
                  for tp in partitions}
        deletable = [tp for tp, e in result.items() if e == ErrorCode.NONE and tp in group.offsets]
        stored = self.store.delete_offsets(group, deletable)
        if stored != ErrorCode.NONE:
            return stored, {}
        return ErrorCode.NONE, result

    # ----------------------------------------------------------------------------------------- admin
    def list_groups(self, states: set[str] | None = None) -> tuple[ErrorCode, list[GroupMetadata]]:
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.store.loading else ErrorCode.NONE
        groups = [g for g in self.store.groups.values()
                  if states is None or g.state_name().lower() in states]
        return error, sorted(groups, key=lambda g: g.group_id)

    def describe_group(self, group_id: str) -> tuple[ErrorCode, dict[str, Any]]:
        error = self.validate(group_id, allow_empty=True)
        dead = {"group_id": group_id, "group_state": S.DEAD.value, "protocol_type": "", "protocol_data": "",
                "members": []}
        if error is not None:
            return error, dead
        group = self.store.get_group(group_id)
        if group is None or group.consumer is not None:
            # DescribeGroups v0-5 shows a consumer group (KIP-848) as Kafka does: Dead, without an error.
            return ErrorCode.NONE, dead
        stable = group.is_(S.STABLE)
        members = []
        for m in group.members.values():
            metadata = m.metadata_for(group.protocol_name) if stable and group.protocol_name else b""
            members.append({"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                            "client_id": m.client_id, "client_host": m.client_host, "member_metadata": metadata,
                            "member_assignment": m.assignment if stable else b""})
        return ErrorCode.NONE, {"group_id": group_id, "group_state": group.state.value,
                                "protocol_type": group.protocol_type or "",
                                "protocol_data": (group.protocol_name or "") if stable else "",
                                "members": members}

    def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        result: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            error = self.validate(group_id, allow_empty=True)
            if error is None:
                group = self.store.get_group(group_id)
                if group is None or group.is_(S.DEAD):
                    error = ErrorCode.GROUP_ID_NOT_FOUND
                elif not group.is_empty():
                    error = ErrorCode.NON_EMPTY_GROUP
                else:
                    error = self.store.delete_offsets(group, list(group.offsets), with_group=True)
                    if error == ErrorCode.NONE:
                        self._remove_dead_group(group)
            result[group_id] = error
        return result

    def _remove_dead_group(self, group: GroupMetadata) -> None:
        group.transition_to(S.DEAD, self.now())
        self.store.remove_group(group.group_id)
        self.rebalance_purgatory.check_and_complete(group.group_id)

    # ----------------------------------------------------------------------------------------- expiry
    def _schedule_cleanup(self) -> None:
        if self.active:
            self._cleanup_handle = self.timer.schedule(self.config.offsets_retention_check_interval_ms,
                                                       self._cleanup_tick)

    def _cleanup_tick(self) -> None:
        try:
            self.cleanup_group_metadata()
        except Exception:
            log.exception("offset expiry failed")
        self._schedule_cleanup()

    def cleanup_group_metadata(self) -> int:
        """Expire old offsets of empty groups; drop empty groups left without offsets. Returns offsets removed."""
        now = self.now()
        removed = 0
        for group in list(self.store.groups.values()):
            if self.store.partition_for(group.group_id) not in self.store.owned:
                continue
            expired = self.store.expired_offsets(group, now, self.config.offsets_retention_ms)
            if expired and self.store.delete_offsets(group, expired) == ErrorCode.NONE:
                removed += len(expired)
                log.info("expired %d offsets of group %s", len(expired),
                         group.group_id)
            if group.is_empty() and not group.has_offsets():
                with_metadata = group.generation_id > 0 or group.consumer is not None
                if not with_metadata or self.store.delete_offsets(group, [], with_group=True) == ErrorCode.NONE:
                    self._remove_dead_group(group)
        return removed


JoinResultCallback = Callable[[dict[str, Any]], None]

__all__ = ["GroupConfig", "GroupCoordinator", "GroupMetadata", "MemberMetadata", "JoinResultCallback"]
