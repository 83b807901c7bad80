"""Admin operations the active controller runs as events: partitions added to a topic (the watch on
/brokers/topics/<t>, written by CreatePartitions) and leader elections on demand (ElectLeaders).

Kept beside ``controller.py`` so that file stays about the controller's own life cycle; the functions here use
the controller's state helpers and run inside its single event queue, so they never interleave with other
decisions.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from moldau.broker.controller import election as E
from moldau.broker.controller import requests as R
from moldau.broker.controller import zk_data as Z
from moldau.protocol.errors import ErrorCode
from moldau.protocol.types import TopicPartition

if TYPE_CHECKING:
    from moldau.broker.controller.controller import Controller

log = logging.getLogger("moldau.controller")

T = TypeVar("T")
PREFERRED = 0
UNCLEAN = 1
ElectionResult = dict[TopicPartition, tuple[ErrorCode, str | None]]


class ControllerAdmin:
    def __init__(self, controller: Controller) -> None:
        self.c = controller
        self._watched: set[str] = set()

    # ------------------------------------------------------------------ CreatePartitions
    def watch_topic(self, topic: str) -> None:
        """A data watch on /brokers/topics/<t> (once per name; kazoo re-arms it, also across a deletion and
        re-creation): a change that adds partitions becomes a controller event."""
        if topic in self._watched:
            return
        self._watched.add(topic)
        c = self.c
        c.zk.client.watch_data(Z.topic_path(topic), lambda data, stat: c._enqueue_if_active(
            "partition-modification", lambda: self.on_partition_modification(topic)))

    async def on_partition_modification(self, topic: str) -> None:
        c = self.c
        ctx = c.ctx
        if topic not in ctx.assignments:  # a new topic: the topic-change event handles it
            return
        assignment = await c.zk.assignment(topic)
        if assignment is None:
            return
        known = ctx.assignments[topic]
        added = sorted(p for p in assignment.partitions if p not in known)
        changed = [p for p in known if p in assignment.partitions and assignment.partitions[p] != known[p]]
        if changed:
            # Replica changes go through AlterPartitionReassignments, not by editing this znode.
            log.warning("topic %s: replica changes of existing partitions %s in ZooKeeper are ignored", topic,
                        changed[:10])
        if not added:
            return
        for p in added:
            known[p] = assignment.partitions[p]
        created = [(topic, p) for p in added]
        log.info("topic %s: %d new partitions %s", topic, len(added), added)
        await c._initialize_new_partitions(created)
        per_broker: dict[int, list[TopicPartition]] = {}
        for tp in created:
            for r in ctx.replicas(tp):
                per_broker.setdefault(r, []).append(tp)
        for broker_id, tps in sorted(per_broker.items()):
            c._send_leader_and_isr(broker_id, tps, is_new=True)
        c._send_update_metadata(list(ctx.live), created)

    # ------------------------------------------------------------------ events with an answer
    async def _as_event(self, name: str, work: Callable[[], Awaitable[T]]) -> T:
        """Runs ``work`` as one event of the controller's queue and returns its result."""
        fut: asyncio.Future[T] = asyncio.get_running_loop().create_future()

        async def event() -> None:
            try:
                result = await work()
            except BaseException as exc:
                if not fut.done():
                    fut.set_exception(exc)
                raise
            if not fut.done():
                fut.set_result(result)

        self.c.enqueue(name, event)
        return await fut

    async def reassign(self, wanted: dict[TopicPartition, list[int] | None]) -> ElectionResult:
        """AlterPartitionReassignments (reassignment.py); NOT_CONTROLLER per partition when not active."""
        async def work() -> ElectionResult:
            if not self.c.active:
                return {tp: (ErrorCode.NOT_CONTROLLER, None) for tp in wanted}
            return await self.c.reassignments.alter(wanted)
        return await self._as_event("alter-reassignments", work)

    async def list_reassignments(self, wanted: list[TopicPartition] | None) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]]:
        async def work() -> dict[TopicPartition, tuple[list[int], list[int], list[int]]]:
            return {tp: (o.replicas, o.adding, o.removing)
                    for tp, o in self.c.reassignments.listing(wanted).items()}
        return await self._as_event("list-reassignments", work)

    # ------------------------------------------------------------------ ElectLeaders
    async def elect_leaders(self, election_type: int, partitions: list[TopicPartition] | None) -> ElectionResult:
        """Runs as a controller event; answers once the new states are written and sent to the brokers."""
        return await self._as_event("elect-leaders", lambda: self._elect(election_type, partitions))

    async def _elect(self, election_type: int, partitions: list[TopicPartition] | None) -> ElectionResult:
        c = self.c
        ctx = c.ctx
        wanted = ctx.all_partitions() if partitions is None else partitions
        if not c.active:
            return {tp: (ErrorCode.NOT_CONTROLLER, None) for tp in wanted}
        results: ElectionResult = {}
        live = [b for b in ctx.live if b not in ctx.shutting_down]
        candidates: list[TopicPartition] = []
        for tp in wanted:
            state = ctx.states.get(tp)
            if state is None or tp[1] not in ctx.assignments.get(tp[0], {}):
                results[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
            elif state.leader == R.LEADER_DURING_DELETE:
                results[tp] = (ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is being deleted.")
            elif self._not_needed(election_type, tp, state, live):
                results[tp] = (ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.")
            else:
                candidates.append(tp)

        # A leader's ISR expansion reaches this cache only with its (batched) change notification: decide on
        # the states ZooKeeper holds now, so a replica that has just caught up can be elected.
        for tp in candidates:
            fresh = await c.zk.partition_state(*tp)
            if fresh is not None:
                ctx.states[tp] = fresh

        def decide(tp: TopicPartition, state: Z.LeaderIsr) -> Z.LeaderIsr | None:
            online = [b for b in live if ctx.replica_online(b, tp)]
            if election_type == PREFERRED:
                result = E.preferred_replica_election(ctx.replicas(tp), state.isr, online, ctx.shutting_down)
            else:
                result = E.offline_partition_election(ctx.replicas(tp), state.isr, online, unclean=True)
            if not result.elected or (result.leader == state.leader and result.isr == state.isr):
                return None
            return c._new_state(tp, result.leader, result.isr)

        changes = await c._decide_and_write(candidates, decide)
        for tp in candidates:
            if tp in changes:
                results[tp] = (ErrorCode.NONE, None)
            elif election_type == PREFERRED:
                results[tp] = (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                               f"Failed to elect leader for partition {tp[0]}-{tp[1]} under strategy "
                               "PreferredReplicaPartitionLeaderElectionStrategy")
            else:
                results[tp] = (ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                               f"Failed to elect leader for partition {tp[0]}-{tp[1]} under strategy "
                               "OfflinePartitionLeaderElectionStrategy(true)")
        if changes:
            log.info("ElectLeaders (%s): new leaders for %d partitions",
                     "preferred" if election_type == PREFERRED else "unclean", len(changes))
            c._propagate(sorted(changes))
        return results

    def _not_needed(self, election_type: int, tp: TopicPartition, state: Z.LeaderIsr, live: list[int]) -> bool:
        """Preferred: the preferred replica leads already. Unclean: the partition has a live leader."""
        ctx = self.c.ctx
        if election_type == PREFERRED:
            replicas = ctx.replicas(tp)
            return bool(replicas) and state.leader == replicas[0]
        return state.leader != E.NO_LEADER and state.leader in live and ctx.replica_online(state.leader, tp)
