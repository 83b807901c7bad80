"""Group membership: JoinGroup, SyncGroup, Heartbeat and LeaveGroup, and the delayed operations behind them.

A mixin of ``GroupCoordinator`` (split out to keep files small); it follows Kafka's classic group coordinator:
member ids are ``client_id-uuid``; JoinGroup v4+ with an empty member id first gets MEMBER_ID_REQUIRED and a
member id (the member is *pending* until it rejoins with it); the leader gets every member's subscription and
its SyncGroup assignment is stored in ``__consumer_offsets`` before it is relayed; static members
(``group.instance.id``) that rejoin with an unknown member id replace their old member id, without a rebalance
when the group is Stable and the chosen protocol does not change.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from moldau.broker.coordinator.config import GroupConfig
from moldau.broker.coordinator.group import GroupMetadata, GroupState, MemberMetadata
from moldau.broker.coordinator.offsets import OffsetStore
from moldau.broker.purgatory import DelayedOperation, Purgatory
from moldau.protocol.errors import ErrorCode

log = logging.getLogger("moldau.coordinator")

S = GroupState
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # a new member's JoinGroup cannot outlive this (Kafka's value)

JoinCallback = Callable[[dict[str, Any]], None]
SyncResultCallback = Callable[[dict[str, Any]], None]
Protocols = list[tuple[str, bytes]]


class DelayedJoin(DelayedOperation):
    """Completes when every member has rejoined, or when the rebalance timeout runs out."""

    __slots__ = ("coordinator", "group")

    def __init__(self, coordinator: Membership, group: GroupMetadata, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self.coordinator = coordinator
        self.group = group

    def try_complete(self) -> bool:
        if self.group.is_(S.DEAD) or self.group.has_all_members_joined():
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        self.coordinator.on_complete_join(self.group)


class InitialDelayedJoin(DelayedJoin):
    """The first rebalance of an empty group waits group.initial.rebalance.delay.ms, and again while new members
    keep arriving, up to the rebalance timeout, so that a group starting up does not rebalance once per member."""

    __slots__ = ("configured_delay_ms", "remaining_ms")

    def __init__(self, coordinator: Membership, group: GroupMetadata, configured_delay_ms: int, delay_ms: int,
                 remaining_ms: int) -> None:
        super().__init__(coordinator, group, delay_ms)
        self.configured_delay_ms = configured_delay_ms
        self.remaining_ms = remaining_ms

    def try_complete(self) -> bool:
        if self.group.is_(S.DEAD):
            return self.force_complete()
        return False  # only time completes it

    def on_complete(self) -> None:
        group = self.group
        if group.new_member_added and self.remaining_ms > 0 and not group.is_(S.DEAD):
            group.new_member_added = False
            delay = min(self.configured_delay_ms, self.remaining_ms)
            remaining = max(self.remaining_ms - self.configured_delay_ms, 0)
            self.coordinator.rebalance_purgatory.try_complete_else_watch(
                InitialDelayedJoin(self.coordinator, group, self.configured_delay_ms, delay, remaining),
                [group.group_id])
        else:
            self.coordinator.on_complete_join(group)


class DelayedHeartbeat(DelayedOperation):
    """A member's session: expires unless a heartbeat (or join/sync/commit) completes it first."""

    __slots__ = ("coordinator", "group", "member_id", "pending")

    def __init__(self, coordinator: Membership, group: GroupMetadata, member_id: str, timeout_ms: int,
                 pending: bool) -> None:
        super().__init__(timeout_ms)
        self.coordinator = coordinator
        self.group = group
        self.member_id = member_id
        self.pending = pending

    def try_complete(self) -> bool:
        group = self.group
        if group.is_(S.DEAD):
            return self.force_complete()
        if self.pending:
            if group.has(self.member_id) or self.member_id not in group.pending_members:
                return self.force_complete()
            return False
        member = group.members.get(self.member_id)
        if member is None or member.has_satisfied_heartbeat():
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        self.coordinator.on_expire_heartbeat(self.group, self.member_id, self.pending)


class Membership:
    # Provided by GroupCoordinator.
    store: OffsetStore
    config: GroupConfig
    heartbeat_purgatory: Purgatory
    rebalance_purgatory: Purgatory

    def now(self) -> int:
        raise NotImplementedError

    def new_member_id(self, client_id: str) -> str:
        raise NotImplementedError

    def validate(self, group_id: str | None, allow_empty: bool = False) -> ErrorCode | None:
        raise NotImplementedError

    # ----------------------------------------------------------------------------------------- results
    @staticmethod
    def join_error(member_id: str, error: ErrorCode) -> dict[str, Any]:
        return {"error_code": error, "generation_id": -1, "protocol_type": None, "protocol_name": None,
                "leader": "", "member_id": member_id, "members": []}

    @staticmethod
    def join_result(group: GroupMetadata, member_id: str, members: list[dict[str, Any]],
                    leader: str | None = None) -> dict[str, Any]:
        return {"error_code": ErrorCode.NONE, "generation_id": group.generation_id,
                "protocol_type": group.protocol_type, "protocol_name": group.protocol_name,
                "leader": (leader if leader is not None else group.leader_id) or "", "member_id": member_id,
                "members": members}

    # ----------------------------------------------------------------------------------------- JoinGroup
    def join_group(self, group_id: str, member_id: str, group_instance_id: str | None,
                   require_known_member_id: bool, client_id: str, client_host: str, rebalance_timeout_ms: int,
                   session_timeout_ms: int, protocol_type: str, protocols: Protocols,
                   callback: JoinCallback) -> None:
        error = self.validate(group_id)
        if error is None and not (self.config.min_session_timeout_ms <= session_timeout_ms
                                  <= self.config.max_session_timeout_ms):
            error = ErrorCode.INVALID_SESSION_TIMEOUT
        unknown = member_id == ""
        group = self.store.get_group(group_id) if error is None else None
        if error is None and group is not None and group.consumer is not None:
            if group.consumer.members:
                error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL  # a consumer group (KIP-848) with members
            else:  # an empty consumer group becomes a classic one, as in Kafka
                gone = [(key, None) for key in group.consumer.persisted]  # its KIP-848 records: tombstones
                if self.store.append_records(group.partition, gone) != ErrorCode.NONE:
                    log.warning("group %s: could not delete its consumer group records", group_id)
                group.consumer = None
                group.protocol_type = None
        if error is None and group is None:
            if unknown:
                group = self.store.add_group(GroupMetadata(group_id, self.store.partition_for(group_id)))
            else:
                error = ErrorCode.UNKNOWN_MEMBER_ID
        if error is None and group is not None and unknown and group_instance_id is None and \
                len(group.members) + len(group.pending_members) >= self.config.max_size:
            error = ErrorCode.GROUP_MAX_SIZE_REACHED
        if error is not None or group is None:
            callback(self.join_error(member_id, error or ErrorCode.UNKNOWN_SERVER_ERROR))
            return
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms  # JoinGroup v0 has no rebalance timeout
        args = (client_id, client_host, rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols)
        if unknown:
            self._join_new_member(group, group_instance_id, require_known_member_id, args, callback)
        else:
            self._join_current_member(group, member_id, group_instance_id, args, callback)
        if group.is_(S.PREPARING_REBALANCE):
            self.rebalance_purgatory.check_and_complete(group_id)

    def _join_new_member(self, group: GroupMetadata, group_instance_id: str | None, require_known: bool,
                         args: tuple[str, str, int, int, str, Protocols], callback: JoinCallback) -> None:
        client_id, _, _, session_timeout_ms, protocol_type, protocols = args
        if group.is_(S.DEAD):
            callback(self.join_error("", ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(protocol_type, protocols):
            callback(self.join_error("", ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        new_id = self.new_member_id(client_id)
        if group_instance_id is not None:
            old_id = group.static_member_id(group_instance_id)
            if old_id is None:
                self._add_member_and_rebalance(group, new_id, group_instance_id, args, callback)
            else:
                self._replace_static_member(group, old_id, new_id, group_instance_id, args, callback)
        elif require_known:
            # KIP-394: hand out the member id first, so a client that times out rejoins as the same member.
            group.pending_members.add(new_id)
            self._schedule_heartbeat(group, new_id, session_timeout_ms, pending=True)
            callback(self.join_error(new_id, ErrorCode.MEMBER_ID_REQUIRED))
        else:
            self._add_member_and_rebalance(group, new_id, None, args, callback)

    def _join_current_member(self, group: GroupMetadata, member_id: str, group_instance_id: str | None,
                             args: tuple[str, str, int, int, str, Protocols], callback: JoinCallback) -> None:
        _, _, rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols = args
        if group.is_(S.DEAD):
            callback(self.join_error(member_id, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(protocol_type, protocols):
            callback(self.join_error(member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        if member_id in group.pending_members:
            if group_instance_id is not None:
                callback(self.join_error(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
            else:
                self._add_member_and_rebalance(group, member_id, None, args, callback)
            return
        if group.is_static_member_fenced(member_id, group_instance_id):
            callback(self.join_error(member_id, ErrorCode.FENCED_INSTANCE_ID))
            return
        if not group.has(member_id) or group.state in (S.EMPTY, S.DEAD):
            callback(self.join_error(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
            return
        member = group.get(member_id)
        same = member.matches(protocols)
        if group.is_(S.COMPLETING_REBALANCE) and same:
            # A retried JoinGroup: answer with the generation it already belongs to.
            members = group.current_member_metadata() if group.is_leader(member_id) else []
            callback(self.join_result(group, member_id, members))
        elif group.is_(S.STABLE) and same and not group.is_leader(member_id):
            callback(self.join_result(group, member_id, []))
        else:
            # The leader rejoining, changed subscriptions, or a rebalance under way.
            group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, callback)
            self.maybe_prepare_rebalance(group, f"member {member_id} rejoined")

    def _add_member_and_rebalance(self, group: GroupMetadata, member_id: str, group_instance_id: str | None,
                                  args: tuple[str, str, int, int, str, Protocols], callback: JoinCallback) -> None:
        client_id, client_host, rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols = args
        member = MemberMetadata(member_id, group_instance_id, client_id, client_host, rebalance_timeout_ms,
                                session_timeout_ms, protocol_type, protocols, is_new=True)
        if group.is_(S.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, callback)
        # Sockets are muted while a JoinGroup is parked, so a vanished new member is noticed only by this timeout.
        self.complete_and_schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self.maybe_prepare_rebalance(group, f"adding new member {member_id}")

    def _replace_static_member(self, group: GroupMetadata, old_id: str, new_id: str, instance_id: str,
                               args: tuple[str, str, int, int, str, Protocols], callback: JoinCallback) -> None:
        _, _, rebalance_timeout_ms, session_timeout_ms, _, protocols = args
        current_leader = group.leader_id
        member = group.replace_static_member(instance_id, old_id, new_id, ErrorCode.FENCED_INSTANCE_ID)
        self.heartbeat_purgatory.check_and_complete((group.group_id, old_id))  # the old id's session ends
        self.complete_and_schedule_heartbeat(group, member)
        log.info("static member %s of group %s replaced member id %s with %s", instance_id, group.group_id,
                 old_id, new_id)
        if group.is_(S.STABLE):
            old_protocols = member.protocols
            group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, callback)
            if group.select_protocol() == group.protocol_name:
                # No rebalance: persist the new member id and answer with the current generation. The old leader
                # id is returned so that the member does not take itself for the leader and assign again.
                assignment = {m.member_id: m.assignment for m in group.members.values()}
                error = self.store.store_group(group, assignment)
                if error != ErrorCode.NONE:
                    group.update_member(member, old_protocols, member.rebalance_timeout_ms,
                                        member.session_timeout_ms, None)
                    group.replace_static_member(instance_id, new_id, old_id, ErrorCode.FENCED_INSTANCE_ID)
                    callback(self.join_error(new_id, error))
                    return
                group.invoke_join_callback(member, self.join_result(group, new_id, [], leader=current_leader))
            else:
                self.maybe_prepare_rebalance(group, f"static member {instance_id} changed protocols")
        elif group.is_(S.COMPLETING_REBALANCE):
            group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, callback)
            self.prepare_rebalance(group, f"static member {instance_id} rejoined during CompletingRebalance")
        else:
            group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, callback)

    # ----------------------------------------------------------------------------------------- rebalancing
    def maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(group, reason)

    def prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_(S.COMPLETING_REBALANCE):
            self.reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        op: DelayedJoin
        if group.is_(S.EMPTY):
            delay = self.config.initial_rebalance_delay_ms
            op = InitialDelayedJoin(self, group, delay, delay, max(group.max_rebalance_timeout_ms() - delay, 0))
        else:
            op = DelayedJoin(self, group, group.max_rebalance_timeout_ms())
        group.transition_to(S.PREPARING_REBALANCE, self.now())
        log.info("preparing to rebalance group %s in generation %d (%s)", group.group_id, group.generation_id,
                 reason)
        self.rebalance_purgatory.try_complete_else_watch(op, [group.group_id])

    def on_complete_join(self, group: GroupMetadata) -> None:
        if group.is_(S.DEAD):
            return
        for member in group.not_yet_rejoined():
            if not member.is_static:
                log.info("member %s of group %s did not rejoin in time; removing it", member.member_id,
                         group.group_id)
                self._remove_member(group, member)
        if not group.maybe_elect_new_joined_leader() and group.members:
            log.warning("group %s: no member rejoined; waiting again", group.group_id)
            self.rebalance_purgatory.try_complete_else_watch(
                DelayedJoin(self, group, group.max_rebalance_timeout_ms()), [group.group_id])
            return
        group.init_next_generation(self.now())
        if group.is_(S.EMPTY):
            error = self.store.store_group(group, {})
            if error != ErrorCode.NONE:
                log.warning("could not store empty group %s: %s", group.group_id,
                            error.name)
        else:
            log.info("group %s: generation %d with %d members, protocol %s", group.group_id,
                     group.generation_id, len(group.members), group.protocol_name)
        for member in list(group.members.values()):
            members = group.current_member_metadata() if group.is_leader(member.member_id) else []
            group.invoke_join_callback(member, self.join_result(group, member.member_id, members))
            self.complete_and_schedule_heartbeat(group, member)
            member.is_new = False

    def reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in list(group.members.values()):
            if group.invoke_sync_callback(member, error, member.assignment if error == ErrorCode.NONE else b""):
                # A session may have run out while the member waited; its next heartbeat is due from now.
                self.complete_and_schedule_heartbeat(group, member)

    # ----------------------------------------------------------------------------------------- SyncGroup
    def sync_group(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                   protocol_type: str | None, protocol_name: str | None, assignments: dict[str, bytes],
                   callback: SyncResultCallback) -> None:
        def answer(error: int, assignment: bytes, group: GroupMetadata | None = None) -> None:
            ok = error == ErrorCode.NONE and group is not None
            callback({"error_code": error, "assignment": assignment,
                      "protocol_type": group.protocol_type if ok and group else None,
                      "protocol_name": group.protocol_name if ok and group else None})

        error = self.validate(group_id)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            error = ErrorCode.REBALANCE_IN_PROGRESS  # the rebalance state was lost: start again at JoinGroup
        group = self.store.get_group(group_id) if error is None else None
        if error is None:
            error = self._sync_error(group, generation_id, member_id, group_instance_id, protocol_type,
                                     protocol_name)
        if error is not None or group is None:
            answer(error or ErrorCode.UNKNOWN_MEMBER_ID, b"")
            return
        member = group.get(member_id)
        if group.is_(S.STABLE):
            self.complete_and_schedule_heartbeat(group, member)
            answer(ErrorCode.NONE, member.assignment, group)
            return
        # CompletingRebalance: park until the leader's assignment is stored.
        member.awaiting_sync = lambda err, assignment: answer(err, assignment, group)
        if not group.is_leader(member_id):
            return
        full = {mid: assignments.get(mid, b"") for mid in group.members}
        error = self.store.store_group(group, full)
        if not group.is_(S.COMPLETING_REBALANCE) or group.generation_id != generation_id:
            return
        if error != ErrorCode.NONE:
            self.reset_and_propagate_assignment_error(group, error)
            self.maybe_prepare_rebalance(group, f"storing the assignment failed: {error.name}")
            return
        for mid, m in group.members.items():
            m.assignment = full[mid]
        group.transition_to(S.STABLE, self.now())
        self._propagate_assignment(group, ErrorCode.NONE)

    @staticmethod
    def _member_error(group: GroupMetadata | None, generation_id: int, member_id: str,
                      group_instance_id: str | None) -> ErrorCode | None:
        """The checks SyncGroup and Heartbeat share: is this a current member of this generation?
        (An Empty group has no members, so it answers UNKNOWN_MEMBER_ID here too.)"""
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.is_static_member_fenced(member_id, group_instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if not group.has(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return None

    @classmethod
    def _sync_error(cls, group: GroupMetadata | None, generation_id: int, member_id: str,
                    group_instance_id: str | None, protocol_type: str | None,
                    protocol_name: str | None) -> ErrorCode | None:
        error = cls._member_error(group, generation_id, member_id, group_instance_id)
        if error is not None or group is None:
            return error
        if (protocol_type is not None and protocol_type != group.protocol_type) or \
                (protocol_name is not None and protocol_name != group.protocol_name):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if group.is_(S.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(S.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return None

    # ----------------------------------------------------------------------------------------- Heartbeat
    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> ErrorCode:
        error = self.validate(group_id)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return ErrorCode.NONE  # the group is still loading: answer blindly, as Kafka does
        if error is not None:
            return error
        group = self.store.get_group(group_id)
        member_error = self._member_error(group, generation_id, member_id, group_instance_id)
        if member_error is not None or group is None:
            return member_error or ErrorCode.UNKNOWN_MEMBER_ID
        self.complete_and_schedule_heartbeat(group, group.get(member_id))
        return ErrorCode.REBALANCE_IN_PROGRESS if group.is_(S.PREPARING_REBALANCE) else ErrorCode.NONE

    def complete_and_schedule_heartbeat(self, group: GroupMetadata, member: MemberMetadata,
                                        timeout_ms: int | None = None) -> None:
        key = (group.group_id, member.member_id)
        member.heartbeat_satisfied = True
        self.heartbeat_purgatory.check_and_complete(key)
        member.heartbeat_satisfied = False
        self._schedule_heartbeat(group, member.member_id,
                                 member.session_timeout_ms if timeout_ms is None else timeout_ms, pending=False)

    def _schedule_heartbeat(self, group: GroupMetadata, member_id: str, timeout_ms: int, pending: bool) -> None:
        self.heartbeat_purgatory.try_complete_else_watch(
            DelayedHeartbeat(self, group, member_id, timeout_ms, pending), [(group.group_id, member_id)])

    def on_expire_heartbeat(self, group: GroupMetadata, member_id: str, pending: bool) -> None:
        if group.is_(S.DEAD):
            return
        if pending:
            if member_id in group.pending_members:
                log.info("pending member %s of group %s expired", member_id,
                         group.group_id)
                self._remove_pending_member(group, member_id)
            return
        member = group.members.get(member_id)
        if member is not None and not member.has_satisfied_heartbeat():
            log.info("member %s of group %s has failed (session timeout %d ms); removing it",
                     member_id, group.group_id, member.session_timeout_ms)
            self._remove_member_and_update_group(group, member, "session timeout")

    # ----------------------------------------------------------------------------------------- LeaveGroup
    def leave_group(self, group_id: str, leaving: list[tuple[str, str | None]]) -> \
            tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]:
        """Returns the group-level error and, per leaving member, (member id, instance id, error)."""
        error = self.validate(group_id)
        if error is not None:
            return error, []
        group = self.store.get_group(group_id)
        if group is None:
            return ErrorCode.NONE, [(m, i, ErrorCode.UNKNOWN_MEMBER_ID) for m, i in leaving]
        if group.is_(S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        results = []
        for member_id, instance_id in leaving:
            results.append((member_id, instance_id, self._leave_one(group, member_id, instance_id)))
        return ErrorCode.NONE, results

    def _leave_one(self, group: GroupMetadata, member_id: str, instance_id: str | None) -> ErrorCode:
        if instance_id is not None:
            known = group.static_member_id(instance_id)
            if known is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if member_id and member_id != known:
                return ErrorCode.FENCED_INSTANCE_ID
            member_id = known
        elif member_id in group.pending_members:
            self._remove_pending_member(group, member_id)
            return ErrorCode.NONE
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        log.info("member %s is leaving group %s", member_id, group.group_id)
        self._remove_member_and_update_group(group, member, "member left")
        return ErrorCode.NONE

    def _remove_pending_member(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_members.discard(member_id)
        self.heartbeat_purgatory.check_and_complete((group.group_id, member_id))
        if group.is_(S.PREPARING_REBALANCE):
            self.rebalance_purgatory.check_and_complete(group.group_id)

    def _remove_member(self, group: GroupMetadata, member: MemberMetadata) -> None:
        # A parked JoinGroup of a departing member hears UNKNOWN_MEMBER_ID, so that a live client rejoins.
        group.invoke_join_callback(member, self.join_error(member.member_id, ErrorCode.UNKNOWN_MEMBER_ID))
        group.invoke_sync_callback(member, ErrorCode.UNKNOWN_MEMBER_ID, b"")
        group.remove(member.member_id)
        self.heartbeat_purgatory.check_and_complete((group.group_id, member.member_id))

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata, reason: str) -> None:
        self._remove_member(group, member)
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance(group, f"removing member {member.member_id}: {reason}")
        elif group.is_(S.PREPARING_REBALANCE):
            self.rebalance_purgatory.check_and_complete(group.group_id)
