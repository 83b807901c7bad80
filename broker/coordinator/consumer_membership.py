"""ConsumerGroupHeartbeat and ConsumerGroupDescribe: the coordinator's side of KIP-848's consumer groups.

A mixin of ``GroupCoordinator``. A group id is either a classic group (JoinGroup/SyncGroup) or a consumer group
(ConsumerGroupHeartbeat): both live in the same ``GroupMetadata`` entry, which keeps the committed offsets; a
consumer group carries its ``ConsumerGroup`` state in ``GroupMetadata.consumer``. As in Kafka, an empty group of
one kind turns into the other when a member of the other kind arrives; a non-empty one refuses
(GROUP_ID_NOT_FOUND here, INCONSISTENT_GROUP_PROTOCOL for a JoinGroup).

Timers: each member's session (``group.consumer.session.timeout.ms``, renewed by every heartbeat) and, while it
holds partitions it was asked to revoke, its rebalance timeout; either running out removes the member (fencing
it: its next heartbeat hears UNKNOWN_MEMBER_ID) and moves its partitions. Each change is appended to
``__consumer_offsets`` as Kafka's ConsumerGroup* records (consumer_records.py): a new coordinator loads the group
and its members carry on with their epochs (the heartbeat is answered without waiting for the write's
replication, unlike Kafka; a member whose last change was lost with a failing leader is fenced and rejoins).
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from moldau.broker.coordinator.config import GroupConfig
from moldau.broker.coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    TopicPartitions,
    subset,
)
from moldau.broker.coordinator.consumer_records import changes, group_records, load_consumer_group
from moldau.broker.coordinator.group import GroupMetadata, GroupState
from moldau.broker.coordinator.offsets import OffsetStore
from moldau.broker.purgatory import Timer
from moldau.protocol.errors import ErrorCode

log = logging.getLogger("moldau.coordinator.consumer")

JOIN, LEAVE, LEAVE_STATIC = 0, -1, -2


class HeartbeatError(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


@dataclass(slots=True)
class HeartbeatResult:
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: TopicPartitions | None = None  # None: unchanged since the member's last answer


@dataclass(slots=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: TopicPartitions | None = None
    client_id: str = ""
    client_host: str = ""


class ConsumerMembership:
    """ConsumerGroupHeartbeat for ``GroupCoordinator`` (see the module docstring)."""

    # Provided by GroupCoordinator.
    store: OffsetStore
    config: GroupConfig
    timer: Timer

    def now(self) -> int:
        raise NotImplementedError

    def validate(self, group_id: str | None, allow_empty: bool = False) -> ErrorCode | None:
        raise NotImplementedError

    # Set by the server: the topics' partition counts (name -> number of partitions) and ids (name -> topic id).
    partition_counts: Callable[[], Mapping[str, int]] | None = None
    topic_ids: Callable[[], Mapping[str, bytes]] | None = None

    def consumer_group_heartbeat(self, req: HeartbeatRequest) -> HeartbeatResult:
        interval = self.config.consumer_heartbeat_interval_ms
        try:
            return self._heartbeat(req, interval)
        except HeartbeatError as exc:
            return HeartbeatResult(exc.code, exc.message, None, 0, interval)

    def _heartbeat(self, req: HeartbeatRequest, interval: int) -> HeartbeatResult:
        _check_request(req, self.config.consumer_assignors)
        error = self.validate(req.group_id)
        if error is not None:
            raise HeartbeatError(error)
        group = self._consumer_group(req.group_id, create=req.member_epoch == JOIN)
        cg = group.consumer
        assert cg is not None
        if req.member_epoch in (LEAVE, LEAVE_STATIC):
            member = cg.members.get(req.member_id)
            if member is None:
                raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of "
                                                                   f"group {req.group_id}.")
            if req.member_epoch == LEAVE_STATIC and member.instance_id is not None:
                # A static member's temporary leave: it keeps its partitions until its session runs out, and a
                # new incarnation with the same instance id takes them over (KIP-848, as Kafka).
                if member.member_epoch != LEAVE_STATIC:
                    member.previous_member_epoch, member.member_epoch = member.member_epoch, LEAVE_STATIC
                    self._persist(group, [member.member_id])
                log.info("static member %s (%s) of consumer group %s leaves for now", member.member_id,
                         member.instance_id, cg.group_id)
            else:
                self._remove_consumer(group, member, "member left")
            return HeartbeatResult(ErrorCode.NONE, None, req.member_id, req.member_epoch, interval)
        member, changed = self._member_for(group, cg, req)
        before = (member.member_epoch, member.state)
        counts = self._subscribed_counts(cg)
        if changed or counts != cg.partition_counts:
            changed = True
            cg.bump_and_assign(counts)
            log.info("consumer group %s: epoch %d, %d members, assignor %s", cg.group_id, cg.group_epoch,
                     len(cg.members), cg.assignor_name)
        self._schedule_session(group, member)
        assignment_changed = cg.reconcile(member, req.owned)
        self._watch_revocation(group, member)
        if changed or assignment_changed or before != (member.member_epoch, member.state) or \
                req.member_epoch == JOIN:
            self._persist(group, [member.member_id])
        subscription = req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None
        full = req.member_epoch == JOIN or (req.rebalance_timeout_ms != -1 and subscription and
                                            req.owned is not None)
        assignment = {t: set(ps) for t, ps in member.assigned.items()} if full or assignment_changed else None
        return HeartbeatResult(ErrorCode.NONE, None, member.member_id, member.member_epoch, interval, assignment)

    # ----------------------------------------------------------------------------------------- the group
    def _consumer_group(self, group_id: str, create: bool) -> GroupMetadata:
        group = self.store.get_group(group_id)
        if group is not None and group.consumer is None:
            if group.members or not group.is_(GroupState.EMPTY):
                raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
            if not create:
                raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"Group {group_id} has no such member.")
            group.consumer = ConsumerGroup(group_id, self.config.consumer_assignors[0])
            group.protocol_type = "consumer"
            log.info("empty classic group %s becomes a consumer group", group_id)
        if group is None:
            if not create:
                raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"Consumer group {group_id} not found.")
            group = self.store.add_group(GroupMetadata(group_id, self.store.partition_for(group_id),
                                                       protocol_type="consumer"))
            group.consumer = ConsumerGroup(group_id, self.config.consumer_assignors[0])
        return group

    def _member_for(self, group: GroupMetadata, cg: ConsumerGroup,
                    req: HeartbeatRequest) -> tuple[ConsumerMember, bool]:
        """The member this heartbeat is from (created or reset on a join) and whether the group epoch must move."""
        member = cg.members.get(req.member_id) if req.member_id else None
        changed = False
        if req.member_epoch == JOIN:
            static = cg.members.get(cg.static_members.get(req.instance_id or "", ""))
            if member is None and static is not None and static.member_epoch == LEAVE_STATIC:
                member = cg.replace_static(static, req.member_id or uuid.uuid4().hex)
                log.info("static member %s of consumer group %s is back as %s", req.instance_id, cg.group_id,
                         member.member_id)
            elif member is None:
                member = self._new_member(cg, req)
                changed = True
            else:
                cg.reset_member(member)  # it lost its partitions; it gets its target again as they are free
        elif member is None:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of "
                                                               f"group {req.group_id}.")
        else:
            _check_epoch(member, req.member_epoch, req.owned)
        if req.subscribed_topic_names is not None:
            member.topic_names = sorted(set(req.subscribed_topic_names))
        if req.subscribed_topic_regex is not None:
            member.topic_regex = req.subscribed_topic_regex or None  # "" clears it
        # A regex is matched again at every heartbeat, so topics created later join the subscription.
        topics = sorted(set(member.topic_names) | self._regex_topics(member.topic_regex))
        if topics != member.subscribed_topic_names:
            member.subscribed_topic_names = topics
            cg.subscriptions_changed()
            changed = True
        if req.server_assignor is not None and req.server_assignor != member.server_assignor:
            member.server_assignor = req.server_assignor
            changed = True
        if req.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        member.client_id, member.client_host = req.client_id, req.client_host
        return member, changed

    def _new_member(self, cg: ConsumerGroup, req: HeartbeatRequest) -> ConsumerMember:
        if req.instance_id is not None and req.instance_id in cg.static_members:
            raise HeartbeatError(ErrorCode.UNRELEASED_INSTANCE_ID, f"Static member {req.instance_id} of group "
                                                                    f"{cg.group_id} is still in use.")
        if len(cg.members) >= self.config.consumer_max_size:
            raise HeartbeatError(ErrorCode.GROUP_MAX_SIZE_REACHED, f"The consumer group has reached its maximum "
                                                                    f"capacity of {self.config.consumer_max_size} members.")
        member_id = req.member_id or uuid.uuid4().hex  # v0 clients let the coordinator choose
        member = ConsumerMember(member_id, req.client_id, req.client_host, req.rebalance_timeout_ms, [],
                                req.instance_id, req.rack_id, None)
        cg.add(member)
        log.info("member %s (%s) joins consumer group %s", member_id, req.client_id, cg.group_id)
        return member

    def _regex_topics(self, regex: str | None) -> set[str]:
        if not regex:
            return set()
        pattern = re.compile(regex)  # checked by _check_request; re caches compiled patterns
        counts = self._counts()
        return {t for t in counts if not t.startswith("__") and pattern.fullmatch(t)}

    def _subscribed_counts(self, cg: ConsumerGroup) -> dict[str, int]:
        counts = self._counts()
        return {t: counts[t] for t in cg.subscribed_topics() if counts.get(t, 0) > 0}

    def _remove_consumer(self, group: GroupMetadata, member: ConsumerMember, reason: str) -> None:
        cg = group.consumer
        if cg is None or cg.members.get(member.member_id) is not member:
            return
        for handle in (member.session, member.revocation):
            if handle is not None:
                handle.cancel()
        member.session = member.revocation = None
        cg.remove(member.member_id)
        log.info("member %s leaves consumer group %s (%s)", member.member_id, cg.group_id, reason)
        if cg.members:
            cg.bump_and_assign(self._subscribed_counts(cg))
        else:
            cg.group_epoch += 1
            cg.target = {}
            cg.assignment_epoch = cg.group_epoch
        group.current_state_timestamp = self.now()
        self._persist(group, [], removed=[member.member_id])

    # ----------------------------------------------------------------------------------------- records
    # The topic views are rebuilt only after a topic changed (invalidate_topics, a metadata listener): a steady
    # heartbeat must not walk every topic of the cluster.
    _topic_cache: tuple[Mapping[str, int], Mapping[str, bytes]] | None = None

    def invalidate_topics(self) -> None:
        self._topic_cache = None

    def _topic_views(self) -> tuple[Mapping[str, int], Mapping[str, bytes]]:
        if self._topic_cache is None:
            self._topic_cache = (self.partition_counts() if self.partition_counts is not None else {},
                                 self.topic_ids() if self.topic_ids is not None else {})
        return self._topic_cache

    def _counts(self) -> Mapping[str, int]:
        return self._topic_views()[0]

    def _ids(self) -> Mapping[str, bytes]:
        return self._topic_views()[1]

    def _persist(self, group: GroupMetadata, members: list[str], removed: list[str] | None = None) -> None:
        """Append what changed in the group since the last write: the group's records, those of ``members``,
        the targets the last assignments changed, tombstones for ``removed`` (consumer_records.py)."""
        cg = group.consumer
        if cg is None:
            return
        records = changes(cg, self._ids(), members, cg.changed_targets, removed or [])
        if not records:
            return
        error = self.store.append_records(group.partition, records)
        if error != ErrorCode.NONE:
            log.warning("consumer group %s: writing its records failed (%s)", cg.group_id, error.name)
            return
        cg.changed_targets = set()
        for key, value in records:
            if value is None:
                cg.persisted.pop(key, None)
            else:
                cg.persisted[key] = value

    def load_consumer(self, group_id: str, records: dict[tuple[int, str], dict[str, Any]]) -> ConsumerGroup:
        """OffsetStore's loader: the group its records describe, with the current topic names and counts."""
        ids = self._ids()
        counts = self._counts()
        cg = load_consumer_group(group_id, records, self.config.consumer_assignors[0],
                                 {topic_id: name for name, topic_id in ids.items()}, counts, self._regex_topics)
        cg.persisted = group_records(cg, ids, None, cg.members)
        return cg

    def resume_consumer_members(self, group: GroupMetadata) -> None:
        """A loaded group's members get their session (and revocation) timers, as if they had just heartbeat."""
        if group.consumer is None:
            return
        for member in group.consumer.members.values():
            self._schedule_session(group, member)
            self._watch_revocation(group, member)

    # ----------------------------------------------------------------------------------------- timers
    def _schedule_session(self, group: GroupMetadata, member: ConsumerMember) -> None:
        if member.session is not None:
            member.session.cancel()
        member.session = self.timer.schedule(self.config.consumer_session_timeout_ms,
                                             lambda: self._expire(group, member, "session timeout"))

    def _watch_revocation(self, group: GroupMetadata, member: ConsumerMember) -> None:
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if member.revocation is None:
                member.revocation = self.timer.schedule(
                    max(member.rebalance_timeout_ms, 0),
                    lambda: self._expire(group, member, "partitions not revoked within the rebalance timeout"))
        elif member.revocation is not None:
            member.revocation.cancel()
            member.revocation = None

    def _expire(self, group: GroupMetadata, member: ConsumerMember, reason: str) -> None:
        if self.store.get_group(group.group_id) is not group:
            return  # the group moved away or was deleted meanwhile
        log.info("fencing member %s of consumer group %s: %s", member.member_id, group.group_id, reason)
        self._remove_consumer(group, member, reason)

    def drop_consumer_timers(self, group: GroupMetadata) -> None:
        """The group leaves this coordinator: its members' timers stop (they rejoin at the new one)."""
        if group.consumer is None:
            return
        for member in group.consumer.members.values():
            for handle in (member.session, member.revocation):
                if handle is not None:
                    handle.cancel()
            member.session = member.revocation = None

    # ----------------------------------------------------------------------------------------- offsets
    def consumer_commit_error(self, group: GroupMetadata, member_id: str,
                              member_epoch: int, api_version: int) -> ErrorCode | None:
        """Kafka's OffsetCommit rules for a consumer group: an admin commit (epoch < 0) only while it is empty;
        a member's commit needs its current epoch (newer: FENCED_MEMBER_EPOCH, older: STALE_MEMBER_EPOCH)."""
        cg = group.consumer
        assert cg is not None
        if member_epoch < 0 and not cg.members:
            return None
        member = cg.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if api_version < 9:
            return ErrorCode.UNSUPPORTED_VERSION  # members of consumer groups commit with v9+
        if member_epoch > member.member_epoch:
            return ErrorCode.FENCED_MEMBER_EPOCH
        if member_epoch < member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return None

    def consumer_fetch_error(self, group_id: str, member_id: str | None,
                             member_epoch: int) -> ErrorCode | None:
        """OffsetFetch v9: a member of a consumer group must name its current epoch."""
        if member_id is None and member_epoch < 0:
            return None
        group = self.store.get_group(group_id)
        cg = group.consumer if group is not None else None
        if cg is None:
            return ErrorCode.UNKNOWN_MEMBER_ID if member_id else None
        member = cg.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return None

    # ----------------------------------------------------------------------------------------- describe
    def describe_consumer_group(self, group_id: str) -> tuple[ErrorCode, str | None, Any]:
        """(error, message, ConsumerGroup or None) for ConsumerGroupDescribe."""
        error = self.validate(group_id)
        if error is not None:
            return error, None, None
        group = self.store.get_group(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None
        if group.consumer is None:
            return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.", None
        return ErrorCode.NONE, None, group.consumer


def _check_request(req: HeartbeatRequest, assignors: list[str]) -> None:
    """Kafka's validation of a ConsumerGroupHeartbeat request (INVALID_REQUEST with its messages)."""
    bad = ErrorCode.INVALID_REQUEST
    if not req.group_id:
        raise HeartbeatError(bad, "GroupId can't be empty.")
    if req.instance_id is not None and not req.instance_id:
        raise HeartbeatError(bad, "InstanceId can't be empty.")
    if req.rack_id is not None and not req.rack_id:
        raise HeartbeatError(bad, "RackId can't be empty.")
    if req.member_epoch < LEAVE_STATIC:
        raise HeartbeatError(bad, f"MemberEpoch is invalid: {req.member_epoch}.")
    if req.member_epoch == LEAVE_STATIC and req.instance_id is None:
        raise HeartbeatError(bad, "InstanceId can't be null when MemberEpoch is -2.")
    if req.member_epoch != JOIN and not req.member_id:
        raise HeartbeatError(bad, "MemberId can't be empty.")
    if req.member_epoch == JOIN:
        if req.rebalance_timeout_ms == -1:
            raise HeartbeatError(bad, "RebalanceTimeoutMs must be provided in first request.")
        if req.owned is None or any(req.owned.values()):
            raise HeartbeatError(bad, "TopicPartitions must be empty when (re-)joining.")
        if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
            raise HeartbeatError(bad, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
    if req.server_assignor is not None and req.server_assignor not in assignors:
        raise HeartbeatError(ErrorCode.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {req.server_assignor} is not "
                                                             f"supported. Supported assignors: {', '.join(assignors)}.")
    if req.subscribed_topic_regex:
        try:
            re.compile(req.subscribed_topic_regex)
        except re.error as exc:
            raise HeartbeatError(ErrorCode.INVALID_REGULAR_EXPRESSION,
                                 f"SubscribedTopicRegex `{req.subscribed_topic_regex}` is not a valid regular "
                                 f"expression: {exc}.") from None


def _check_epoch(member: ConsumerMember, received: int, owned: TopicPartitions | None) -> None:
    """A heartbeat from a newer epoch than the member's is fenced; from the previous one only when it lost an
    answer and owns nothing it should not (Kafka's rule)."""
    if received > member.member_epoch:
        raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH, f"The consumer group member has a greater member "
                                                              f"epoch ({received}) than the one known by the group "
                                                              f"coordinator ({member.member_epoch}). The member "
                                                              f"must abandon all its partitions and rejoin.")
    if received < member.member_epoch and (received != member.previous_member_epoch or owned is None or
                                           not subset(owned, member.assigned)):
        raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH, f"The consumer group member has a smaller member "
                                                              f"epoch ({received}) than the one known by the group "
                                                              f"coordinator ({member.member_epoch}). The member "
                                                              f"must abandon all its partitions and rejoin.")
