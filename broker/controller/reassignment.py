"""Partition reassignment (KIP-455) run by the active controller, inside its event queue.

For a partition moving from the original replicas ORS to the target TRS:

1. the replica set becomes RS = TRS + (ORS - TRS) (the target first, so its first replica is the preferred one);
   /brokers/topics/<t> records RS with ``adding_replicas`` = TRS - ORS and ``removing_replicas`` = ORS - TRS;
   the leader epoch is bumped and LeaderAndIsr goes to every replica of RS: the new ones start as followers and
   catch up from the leader, which adds them to the ISR once they have;
2. each ISR change (the leaders' notifications) re-checks the partition: once all of TRS is in the ISR, the
   replicas become TRS, the leader stays if it is in TRS (else the first live in-sync replica of TRS leads), the
   ISR drops the removed replicas, and the removed replicas get StopReplica with deletion.

Reassignments in progress live in this object; after a controller failover they are not resumed (the topic
znode still shows RS and the adding/removing replicas).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from moldau.broker.controller import zk_data as Z
from moldau.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from moldau.broker.controller.controller import Controller

log = logging.getLogger("moldau.controller")

TP = tuple[str, int]
Result = dict[TP, tuple[ErrorCode, str | None]]


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
        self.ongoing: dict[TP, Ongoing] = {}

    def reset(self) -> None:
        self.ongoing.clear()

    async def alter(self, wanted: dict[TP, list[int] | None]) -> Result:
        """Starts (target list) or cancels (None) reassignments; per partition (error, message)."""
        c = self.c
        ctx = c.ctx
        results: Result = {}
        started: list[TP] = []
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

    async def _start(self, tps: list[TP]) -> None:
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

    async def check(self, tps: list[TP] | None = None) -> None:
        """Completes the reassignments whose target replicas are all in the ISR (ZooKeeper's current state)."""
        c = self.c
        ctx = c.ctx
        candidates = [tp for tp in (tps if tps is not None else list(self.ongoing)) if tp in self.ongoing]
        done: list[TP] = []
        for tp in candidates:
            fresh = await c.zk.partition_state(*tp)
            if fresh is not None:
                ctx.states[tp] = fresh
            state = ctx.states.get(tp)
            if state is not None and all(r in state.isr for r in self.ongoing[tp].target):
                done.append(tp)
        if done:
            await self._complete(done)

    async def _complete(self, tps: list[TP]) -> None:
        c = self.c
        ctx = c.ctx
        finished = {tp: self.ongoing.pop(tp) for tp in tps}

        def decide(tp: TP, state: Z.LeaderIsr) -> Z.LeaderIsr | None:
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

    async def _write_assignments(self, topics: set[str]) -> None:
        c = self.c
        ctx = c.ctx
        for topic in sorted(topics):
            ours = {p: o for (t, p), o in self.ongoing.items() if t == topic}
            data = Z.topic_assignment(ctx.topic_ids.get(topic, bytes(16)), ctx.assignments[topic],
                                      {p: o.adding for p, o in ours.items()}, {p: o.removing for p, o in ours.items()})
            await c.zk.controller_multi(ctx.epoch_zk_version, [("set", Z.topic_path(topic), data, -1)])

    def listing(self, wanted: list[TP] | None) -> dict[TP, Ongoing]:
        return {tp: o for tp, o in self.ongoing.items() if wanted is None or tp in wanted}
