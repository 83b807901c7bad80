"""Partition reassignment (KIP-455) run by the active controller, inside its event queue.

For a partition moving from the original replicas ORS to the target TRS:

1. the replica set becomes RS = TRS + (ORS - TRS) (the target first, so its first replica is the preferred one);
   /brokers/topics/<t> records RS with ``adding_replicas`` = TRS - ORS and ``removing_replicas`` = ORS - TRS;
   the leader epoch is bumped and LeaderAndIsr goes to every replica of RS: the new ones start as followers and
   catch up from the leader, which adds them to the ISR once they have;
2. each ISR change (the leaders' notifications) re-checks the partition: once all of TRS is in the ISR, the
   replicas become TRS, the leader stays if it is in TRS (else the first live in-sync replica of TRS leads), the
   ISR drops the removed replicas, and the removed replicas get StopReplica with deletion.

Requests come from AlterPartitionReassignments or, as with Kafka's ZooKeeper-era tools, from the
/admin/reassign_partitions znode (``{"version": 1, "partitions": [{"topic", "partition", "replicas"}]}``): its
partitions are removed from it as they complete (or are refused), and the znode goes when it is empty. A new
controller resumes the reassignments the topic znodes record (their adding/removing replicas).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from moldau.broker.controller import zk_data as Z
from moldau.protocol.errors import ErrorCode
from moldau.protocol.types import TopicPartition

if TYPE_CHECKING:
    from moldau.broker.controller.controller import Controller

log = logging.getLogger("moldau.controller")

Result = dict[TopicPartition, tuple[ErrorCode, str | None]]


@dataclass(slots=True)
class Ongoing:
    target: list[int]
    original: list[int]

    @property
    def replicas(self) -> list[int]:
        return self.target + [r for r in self.original if r not in self.target]

    @property
    def adding(self) -> list[int]:
        return [r for r in self.target if r not in self.original]

    @property
    def removing(self) -> list[int]:
        return [r for r in self.original if r not in self.target]


class Reassignments:
    def __init__(self, controller: Controller) -> None:
        self.c = controller
        self.ongoing: dict[TopicPartition, Ongoing] = {}
        self.from_zk: set[TopicPartition] = set()  # started through /admin/reassign_partitions

    def reset(self) -> None:
        self.ongoing.clear()
        self.from_zk.clear()

    def start(self) -> None:
        """Watches /admin/reassign_partitions; a newly elected controller resumes what the topic znodes record."""
        c = self.c
        c.zk.client.watch_data(Z.REASSIGN_PARTITIONS, lambda data, stat: c._enqueue_if_active(
            "zk-reassignment", self.on_zk_request))
        c.controller_listeners.append(self._on_controller_change)

    def _on_controller_change(self, controller_id: int) -> None:
        if controller_id == self.c.broker_id:  # runs after the election event that made us active
            self.c.enqueue("resume-reassignments", self._resume)

    async def _resume(self) -> None:
        c = self.c
        if not c.active:
            return
        for topic in sorted(c.ctx.assignments):
            found = await c.zk.assignment(topic)
            if found is None:
                continue
            for p in sorted(set(found.adding) | set(found.removing)):
                rs = found.partitions[p]
                target = [r for r in rs if r not in found.removing.get(p, [])]
                original = [r for r in rs if r not in found.adding.get(p, [])]
                if target and original and (topic, p) not in self.ongoing:
                    log.info("resuming the reassignment of %s-%d: %s -> %s", topic, p, original, target)
                    self.ongoing[(topic, p)] = Ongoing(target, original)
        await self.on_zk_request()
        await self.check()

    async def on_zk_request(self) -> None:
        c = self.c
        if not c.active:
            return
        found = await c.zk.client.get(Z.REASSIGN_PARTITIONS)
        if found is None:
            self.from_zk.clear()
            return
        try:
            wanted = Z.parse_reassign_partitions(found[0])
        except Z.MalformedZnode as exc:
            log.error("%s; deleting it", exc)
            await c.zk.client.delete(Z.REASSIGN_PARTITIONS)
            return
        new: dict[TopicPartition, list[int] | None] = {tp: r for tp, r in wanted.items()
                                          if not (tp in self.ongoing and self.ongoing[tp].target == r)}
        results = await self.alter(new) if new else {}
        refused = {tp for tp, (code, _) in results.items() if code != ErrorCode.NONE}
        for tp in sorted(refused):
            log.warning("/admin/reassign_partitions: %s-%d refused: %s", *tp, results[tp][1])
        self.from_zk |= set(wanted) - refused
        await self._drop_from_zk_request(refused | {tp for tp in wanted if tp not in self.ongoing})

    async def _drop_from_zk_request(self, done: set[TopicPartition]) -> None:
        """Kafka's maybeRemoveFromZkReassignment: completed or refused partitions leave the znode."""
        if not done:
            return
        zk = self.c.zk.client
        self.from_zk -= done
        found = await zk.get(Z.REASSIGN_PARTITIONS)
        if found is None:
            return
        try:
            remaining = {tp: r for tp, r in Z.parse_reassign_partitions(found[0]).items() if tp not in done}
        except Z.MalformedZnode:
            remaining = {}
        if remaining:
            await zk.set(Z.REASSIGN_PARTITIONS, Z.reassign_partitions(remaining), int(found[1].version))
        else:
            await zk.delete(Z.REASSIGN_PARTITIONS, int(found[1].version))

    async def alter(self, wanted: dict[TopicPartition, list[int] | None]) -> Result:
        """Starts (target list) or cancels (None) reassignments; per partition (error, message)."""
        c = self.c
        ctx = c.ctx
        results: Result = {}
        started: list[TopicPartition] = []
        for tp, target in wanted.items():
            if tp[1] not in ctx.assignments.get(tp[0], {}) or tp not in ctx.states:
                results[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
                continue
            ongoing = self.ongoing.get(tp)
            if target is None:
                if ongoing is None:
                    results[tp] = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                                   f"Can't cancel reassignment of {tp[0]}-{tp[1]}: no reassignment in progress.")
                    continue
                target = list(ongoing.original)  # cancelling moves back to where it started
            error = self._invalid(target)
            if error is not None:
                results[tp] = (ErrorCode.INVALID_REPLICA_ASSIGNMENT, error)
                continue
            original = ongoing.original if ongoing is not None else list(ctx.replicas(tp))
            results[tp] = (ErrorCode.NONE, None)
            if ongoing is None and target == original:
                continue  # already there
            self.ongoing[tp] = Ongoing(list(target), list(original))
            started.append(tp)
        if started:
            await self._start(started)
        return results

    def _invalid(self, target: list[int]) -> str | None:
        if not target:
            return "The replica list is empty."
        if len(set(target)) != len(target):
            return f"The replica list {target} contains duplicates."
        dead = [r for r in target if r not in self.c.ctx.live]
        if dead:
            return f"Replica assignment has brokers that are not alive: {dead}"
        return None

    async def _start(self, tps: list[TopicPartition]) -> None:
        c = self.c
        ctx = c.ctx
        for tp in tps:
            ctx.assignments[tp[0]][tp[1]] = self.ongoing[tp].replicas
        await self._write_assignments({t for t, _ in tps})
        # A new leader epoch (same leader and ISR): every replica of RS learns the new replica set.
        changes = await c._decide_and_write(tps, lambda tp, s: c._new_state(tp, s.leader, list(s.isr)))
        for tp in tps:
            log.info("reassigning %s-%d: %s -> %s (adding %s, removing %s)", *tp, self.ongoing[tp].original,
                     self.ongoing[tp].target, self.ongoing[tp].adding, self.ongoing[tp].removing)
        c._propagate(sorted(changes))
        await self.check(tps)

    async def check(self, tps: list[TopicPartition] | None = None) -> None:
        """Completes the reassignments whose target replicas are all in the ISR (ZooKeeper's current state)."""
        c = self.c
        ctx = c.ctx
        for tp in [tp for tp in self.ongoing if tp[1] not in ctx.assignments.get(tp[0], {})]:
            log.info("reassignment of %s-%d dropped: the topic was deleted", *tp)
            del self.ongoing[tp]  # its topic was deleted meanwhile
        candidates = [tp for tp in (tps if tps is not None else list(self.ongoing)) if tp in self.ongoing]
        done: list[TopicPartition] = []
        for tp in candidates:
            fresh = await c.zk.partition_state(*tp)
            if fresh is not None:
                ctx.states[tp] = fresh
            state = ctx.states.get(tp)
            if state is not None and all(r in state.isr for r in self.ongoing[tp].target):
                done.append(tp)
        if done:
            await self._complete(done)

    async def _complete(self, tps: list[TopicPartition]) -> None:
        c = self.c
        ctx = c.ctx
        finished = {tp: self.ongoing.pop(tp) for tp in tps}

        def decide(tp: TopicPartition, state: Z.LeaderIsr) -> Z.LeaderIsr | None:
            target = finished[tp].target
            isr = [r for r in state.isr if r in target]
            if state.leader in target and ctx.replica_online(state.leader, tp):
                return c._new_state(tp, state.leader, isr)
            leader = next((r for r in target if r in isr and ctx.replica_online(r, tp)), -1)
            return c._new_state(tp, leader, isr if leader != -1 else list(state.isr))

        for tp in tps:
            ctx.assignments[tp[0]][tp[1]] = list(finished[tp].target)
        changes = await c._decide_and_write(tps, decide)
        await self._write_assignments({t for t, _ in tps})
        c._propagate(sorted(changes))
        for tp, ongoing in sorted(finished.items()):
            for broker_id in ongoing.removing:
                c._send_stop_replica(broker_id, [tp], delete=True)
            log.info("reassignment of %s-%d completed: replicas %s", *tp, ongoing.target)
        await self._drop_from_zk_request({tp for tp in tps if tp in self.from_zk})

    async def _write_assignments(self, topics: set[str]) -> None:
        c = self.c
        ctx = c.ctx
        for topic in sorted(topics):
            ours = {p: o for (t, p), o in self.ongoing.items() if t == topic}
            data = Z.topic_assignment(ctx.topic_ids.get(topic, bytes(16)), ctx.assignments[topic],
                                      {p: o.adding for p, o in ours.items()}, {p: o.removing for p, o in ours.items()})
            await c.zk.controller_multi(ctx.epoch_zk_version, [("set", Z.topic_path(topic), data, -1)])

    def listing(self, wanted: list[TopicPartition] | None) -> dict[TopicPartition, Ongoing]:
        return {tp: o for tp, o in self.ongoing.items() if wanted is None or tp in wanted}
