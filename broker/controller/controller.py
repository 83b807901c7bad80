"""The controller: elected through the ephemeral /controller znode; all its work runs through ONE event queue.

Every broker runs a ``Controller``; only the one that created /controller (and bumped /controller_epoch in the
same multi) is active. Watches on /brokers/ids, /brokers/topics, /admin/delete_topics and
/isr_change_notification, controlled-shutdown requests and the periodic preferred-leader check all become events
on one ``asyncio.Queue``, so decisions never interleave. Every state write is a multi that also checks the
version /controller_epoch had when we were elected, so a controller that was replaced (a zombie) cannot
overwrite its successor's decisions. Requests to brokers go through per-broker senders (``channel.py``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from kazoo.exceptions import BadVersionError

from moldau.broker.controller import election as E
from moldau.broker.controller import requests as R
from moldau.broker.controller import zk_data as Z
from moldau.broker.controller.admin_ops import ControllerAdmin
from moldau.broker.controller.channel import ControllerChannel
from moldau.broker.controller.reassignment import Reassignments
from moldau.broker.controller.zk import ControllerMovedError, KafkaZk, Op
from moldau.broker.log_summary import EXAMPLES
from moldau.protocol.api import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.types import TopicPartition
from moldau.security import ClientSecurity
from moldau.tasks import cancel_and_wait

log = logging.getLogger("moldau.controller")


# A leader's ISR change can land in ZooKeeper between the controller reading a state and writing it; the
# controller's write (conditional on the znode version) then fails, and it re-reads and decides again.
STATE_WRITE_ATTEMPTS = 5
MULTI_CHUNK = 200
LOAD_CONCURRENCY = 32  # topics a new controller reads side by side


@dataclass(slots=True)
class ControllerSettings:
    unclean_leader_election: bool = False
    auto_leader_rebalance: bool = True
    imbalance_check_interval_s: float = 300.0
    imbalance_percentage: int = 10
    socket_timeout_ms: int = 30000
    listener_name: str | None = None
    security: ClientSecurity | None = None  # the login to the inter-broker listener, None = PLAINTEXT


@dataclass(slots=True)
class ControllerContext:
    epoch: int = 0
    epoch_zk_version: int = -1
    live: dict[int, Z.BrokerInfo] = field(default_factory=dict)
    shutting_down: set[int] = field(default_factory=set)
    assignments: dict[str, dict[int, list[int]]] = field(default_factory=dict)
    topic_ids: dict[str, bytes] = field(default_factory=dict)
    topic_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    states: dict[TopicPartition, Z.LeaderIsr] = field(default_factory=dict)
    # Replicas on a failed log dir of a live broker (KIP-112): they may neither lead nor stay in the ISR.
    offline_replicas: dict[int, set[TopicPartition]] = field(default_factory=dict)

    def replica_online(self, broker_id: int, tp: TopicPartition) -> bool:
        return broker_id in self.live and tp not in self.offline_replicas.get(broker_id, ())

    def replicas(self, tp: TopicPartition) -> list[int]:
        return self.assignments.get(tp[0], {}).get(tp[1], [])

    def partitions_of(self, topic: str) -> list[TopicPartition]:
        return [(topic, p) for p in sorted(self.assignments.get(topic, {}))]

    def all_partitions(self) -> list[TopicPartition]:
        return [(t, p) for t in sorted(self.assignments) for p in sorted(self.assignments[t])]


Event = tuple[str, Callable[[], Awaitable[None]]]


class Controller:
    def __init__(self, broker_id: int, zk: KafkaZk, settings: ControllerSettings,
                 broker_epoch: Callable[[], int]) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.settings = settings
        self.broker_epoch = broker_epoch
        self.ctx = ControllerContext()
        self.active = False
        self.retired = False  # set by retire(): a broker on its way out never becomes the controller again
        self.controller_id = -1  # as last seen in /controller
        self.queue: asyncio.Queue[Event] = asyncio.Queue()
        self.channel: ControllerChannel | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._rebalance_task: asyncio.Task[None] | None = None
        # Called with the new controller id whenever /controller changes (the metadata cache listens).
        self.controller_listeners: list[Callable[[int], None]] = []
        self.admin = ControllerAdmin(self)  # CreatePartitions' topic watches, ElectLeaders (admin_ops.py)
        self.reassignments = Reassignments(self)  # partition reassignment (reassignment.py)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self._tasks.append(asyncio.get_running_loop().create_task(self._process(), name="controller-events"))
        client = self.zk.client
        client.watch_data(Z.CONTROLLER, lambda data, stat: self._on_controller_znode(data))
        client.watch_children(Z.BROKER_IDS, lambda _: self._enqueue_if_active("broker-change",
                                                                                self._on_broker_change))
        client.watch_children(Z.BROKER_TOPICS, lambda _: self._enqueue_if_active("topic-change",
                                                                                   self._on_topic_change))
        client.watch_children(Z.DELETE_TOPICS, lambda _: self._enqueue_if_active("topic-deletion",
                                                                                   self._on_topic_deletion))
        client.watch_children(Z.ISR_CHANGE, lambda _: self._enqueue_if_active("isr-change", self._on_isr_change))
        client.watch_children(Z.LOG_DIR_EVENT, lambda _: self._enqueue_if_active("log-dir-event",
                                                                                   self._on_log_dir_event))
        self.reassignments.start()

    async def stop(self) -> None:
        await cancel_and_wait(self._tasks)
        self._tasks.clear()
        await self._deactivate()

    async def retire(self) -> None:
        """Shutdown, right after controlled shutdown: hand the controller role on now.

        /controller is deleted at once (only if this session owns it), so another broker is elected while this
        one still flushes logs and closes connections. Waiting for the ZooKeeper session to end instead left the
        cluster naming a controller that no longer served requests for as long as the rest of shutdown took
        (5 s under load), and a client that asked for the controller in that window (librdkafka's admin client)
        kept waiting for it. The event queue stops first, so nothing this broker does as controller interleaves
        with its successor's first steps."""
        self.retired = True
        await cancel_and_wait(self._tasks)
        self._tasks.clear()
        if self.active:
            await self.zk.resign_controller(self.broker_id)
        await self._deactivate()

    def enqueue(self, name: str, handler: Callable[[], Awaitable[None]]) -> None:
        self.queue.put_nowait((name, handler))

    def _enqueue_if_active(self, name: str, handler: Callable[[], Awaitable[None]]) -> None:
        if self.active:
            self.enqueue(name, handler)

    async def _process(self) -> None:
        while True:
            name, handler = await self.queue.get()
            try:
                await handler()
            except asyncio.CancelledError:
                raise
            except ControllerMovedError as exc:
                log.warning("controller event %s: %s; resigning", name, exc)
                await self._deactivate()
            except Exception:
                log.exception("controller event %s failed", name)

    def on_session_event(self, event: str) -> None:
        """ZooKeeper session state (from ZkClient): a lost session means /controller is gone with it."""
        if event == "LOST":
            self.enqueue("session-expired", self._deactivate)
        elif event == "RECONNECTED_NEW_SESSION":
            self.enqueue("elect", self._elect)

    # ------------------------------------------------------------------ election
    def _on_controller_znode(self, data: bytes | None) -> None:
        controller_id = -1
        if data is not None:
            try:
                controller_id = Z.parse_controller(data)
            except Z.MalformedZnode as exc:
                log.error("%s", exc)
        self.controller_id = controller_id
        for listener in self.controller_listeners:
            listener(controller_id)
        if controller_id == -1 or (self.active and controller_id != self.broker_id):
            self.enqueue("elect", self._elect)

    async def _elect(self) -> None:
        if self.retired:
            return
        current = await self.zk.controller_id()
        if current != -1:
            if self.active and current != self.broker_id:
                log.info("broker %d is now the controller; resigning", current)
                await self._deactivate()
            return
        registration = await self.zk.try_become_controller(self.broker_id)
        if registration is None:
            return
        self.controller_id = self.broker_id
        for listener in self.controller_listeners:
            listener(self.broker_id)
        await self._on_become_controller(registration.epoch, registration.epoch_zk_version)

    async def _deactivate(self) -> None:
        if not self.active:
            return
        self.active = False
        if self._rebalance_task is not None:
            self._rebalance_task.cancel()
            self._rebalance_task = None
        if self.channel is not None:
            await self.channel.close()
            self.channel = None
        self.ctx = ControllerContext()
        self.reassignments.reset()
        log.info("resigned as controller")

    async def _on_become_controller(self, epoch: int, epoch_zk_version: int) -> None:
        log.info("this broker is the controller now (controller epoch %d)", epoch)
        self.ctx = ctx = ControllerContext(epoch, epoch_zk_version)
        self.active = True
        self.channel = ControllerChannel(self.broker_id, self.settings.socket_timeout_ms, self.settings.listener_name,
                                         self.settings.security)
        ctx.live, topics = await asyncio.gather(self.zk.live_brokers(), self.zk.topics())
        for broker in ctx.live.values():
            self.channel.add_broker(broker)
        _log_states(sorted((await self._load_and_elect(topics)).items()))
        self._announce_all(ctx.all_partitions())
        await self._on_topic_deletion()
        await self._on_isr_change()
        if self.settings.auto_leader_rebalance:
            self._rebalance_task = asyncio.get_running_loop().create_task(self._rebalance_timer(),
                                                                          name="leader-rebalance-timer")

    def _announce_all(self, everything: list[TopicPartition] | None = None) -> None:
        """A new controller's first word to every live broker: LeaderAndIsr for the partitions it hosts, then
        UpdateMetadata. In that order, as in ``_propagate``: the states may already name leaders this controller
        just elected, and a broker whose metadata named it leader before its LeaderAndIsr arrived would send
        clients to itself only to answer them NOT_LEADER_OR_FOLLOWER. ``everything``: ``ctx.all_partitions()``
        when the caller has it."""
        ctx = self.ctx
        tps = ctx.all_partitions() if everything is None else everything
        per_broker: dict[int, list[TopicPartition]] = {b: [] for b in ctx.live}
        for tp in tps:
            for r in ctx.replicas(tp):
                if r in per_broker:
                    per_broker[r].append(tp)
        shared: dict[TopicPartition, dict[str, Any]] = {}
        for broker_id, hosted in per_broker.items():
            self._send_leader_and_isr(broker_id, hosted, shared=shared)
        self._send_update_metadata(list(ctx.live), tps)

    # ------------------------------------------------------------------ state helpers
    async def _load_topics(self, topics: list[str]) -> list[str]:
        """Loads many topics side by side, LOAD_CONCURRENCY at a time; returns those that exist. Each topic is a
        few ZooKeeper round trips (its assignment, then its config and partition states); a new controller
        reading one topic after the other waited for each of them in turn."""
        gate = asyncio.Semaphore(LOAD_CONCURRENCY)

        async def one(topic: str) -> bool:
            async with gate:
                return await self._load_topic(topic)

        loaded = await asyncio.gather(*(one(topic) for topic in topics))
        return [topic for topic, ok in zip(topics, loaded) if ok]

    async def _load_and_elect(self, topics: list[str]) -> dict[TopicPartition, Z.LeaderIsr]:
        """A new controller's first decisions, topic by topic as each is loaded (LOAD_CONCURRENCY loaded at a
        time), so the state writes of the first topics overlap the reads of the others: new partitions get their
        first state; partitions whose leader is gone get a new one. Brokers that died before (or while) this
        controller took over leave every ISR now, exactly as if their death had been seen: a former
        controller's own death is only ever handled here. Returns the states written (logged by the caller in
        one line); the first error is raised once every topic is done (ControllerMovedError first)."""
        gate = asyncio.Semaphore(LOAD_CONCURRENCY)
        written: dict[TopicPartition, Z.LeaderIsr] = {}

        async def one(topic: str) -> None:
            async with gate:
                if not await self._load_topic(topic):
                    return
            tps = self.ctx.partitions_of(topic)
            await self._initialize_new_partitions(tps)
            written.update(await self._decide_and_write(tps, self._elect_or_shrink, log_writes=False))

        _raise_first(await asyncio.gather(*(one(topic) for topic in topics), return_exceptions=True))
        return written

    async def _load_topic(self, topic: str) -> bool:
        assignment = await self.zk.assignment(topic)
        if assignment is None:
            return False
        config, states = await asyncio.gather(self.zk.topic_config(topic),
                                              self.zk.partition_states(topic, assignment.partitions))
        ctx = self.ctx
        ctx.assignments[topic] = assignment.partitions
        ctx.topic_ids[topic] = assignment.topic_id
        ctx.topic_configs[topic] = config
        self.admin.watch_topic(topic)
        for p, state in states.items():
            ctx.states[(topic, p)] = state
        return True

    def _unclean(self, topic: str) -> bool:
        value = self.ctx.topic_configs.get(topic, {}).get("unclean.leader.election.enable")
        return self.settings.unclean_leader_election if value is None else value.strip().lower() == "true"

    def _new_state(self, tp: TopicPartition, leader: int, isr: list[int], bump_epoch: bool = True) -> Z.LeaderIsr:
        old = self.ctx.states.get(tp)
        epoch = (old.leader_epoch + 1 if bump_epoch else old.leader_epoch) if old is not None else 0
        return Z.LeaderIsr(leader, epoch, isr, self.ctx.epoch, old.zk_version if old is not None else -1)

    async def _initialize_new_partitions(self, tps: list[TopicPartition]) -> None:
        """First state of partitions without one: the first live replica leads; the live replicas are the ISR."""
        ctx = self.ctx
        created: dict[TopicPartition, Z.LeaderIsr] = {}
        ops: list[Op] = []
        existing: dict[str, set[str] | None] = {}  # per topic: its partition znodes (None: no partitions znode)
        for tp in tps:
            if tp in ctx.states:
                continue
            replicas = ctx.replicas(tp)
            live = [r for r in replicas if r in ctx.live and r not in ctx.shutting_down]
            state = Z.LeaderIsr(live[0] if live else E.NO_LEADER, 0, live or list(replicas), ctx.epoch, 0)
            if tp[0] not in existing:  # one read per topic, not two per partition
                if await self.zk.client.exists(Z.partitions_path(tp[0])):
                    existing[tp[0]] = set(await self.zk.client.get_children(Z.partitions_path(tp[0])))
                else:
                    existing[tp[0]] = None
                    ops.append(("create", Z.partitions_path(tp[0]), b"", False))
            children = existing[tp[0]]
            if children is None or str(tp[1]) not in children:
                ops.append(("create", Z.partition_path(*tp), b"", False))
            ops.append(("create", Z.state_path(*tp), Z.partition_state(state), False))
            created[tp] = state
        for i in range(0, len(ops), MULTI_CHUNK):
            await self.zk.controller_multi(self.ctx.epoch_zk_version, ops[i:i + MULTI_CHUNK])
        ctx.states.update(created)

    def _elect_one(self, tp: TopicPartition, state: Z.LeaderIsr) -> Z.LeaderIsr | None:
        """A new leader from the live ISR if the current one is gone (None: nothing to change)."""
        ctx = self.ctx
        live = [b for b in ctx.live if b not in ctx.shutting_down and ctx.replica_online(b, tp)]
        if state.leader in live:
            return None
        result = E.offline_partition_election(ctx.replicas(tp), state.isr, live, self._unclean(tp[0]))
        if result.leader == state.leader and result.isr == state.isr:
            return None
        if not result.elected:
            log.warning("partition %s-%d has no live in-sync replica (replicas %s, ISR %s): offline", *tp,
                        ctx.replicas(tp), state.isr)
        return self._new_state(tp, result.leader, result.isr)

    def _elect_or_shrink(self, tp: TopicPartition, state: Z.LeaderIsr) -> Z.LeaderIsr | None:
        """Kafka's OfflineReplica transition: a partition whose leader is gone gets a new one from the live ISR;
        one whose leader lives loses its dead replicas from the ISR at once (new leader epoch), so acks=all with
        min.insync.replicas need not wait replica.lag.time.max.ms for the leader to shrink the ISR itself."""
        new = self._elect_one(tp, state)
        if new is not None or state.leader == E.NO_LEADER:
            return new
        dead = [r for r in state.isr if not self.ctx.replica_online(r, tp)]
        if not dead:
            return None
        return self._new_state(tp, state.leader, E.shrink_isr(state.isr, dead))

    async def _decide_and_write(self, tps: list[TopicPartition],
                                decide: Callable[[TopicPartition, Z.LeaderIsr], Z.LeaderIsr | None],
                                log_writes: bool = True) -> dict[TopicPartition, Z.LeaderIsr]:
        """Decides the new state of each partition from its current one and writes the changes; when a leader
        changed a state meanwhile (version conflict), re-reads those states and decides again. ``log_writes``:
        a line per write (else the caller logs what was written)."""
        written: dict[TopicPartition, Z.LeaderIsr] = {}
        for attempt in range(1, STATE_WRITE_ATTEMPTS + 1):
            changes: dict[TopicPartition, Z.LeaderIsr] = {}
            for tp in tps:
                state = self.ctx.states.get(tp)
                new = decide(tp, state) if state is not None else None
                if new is not None:
                    changes[tp] = new
            try:
                await self._write_states(changes, log_writes)
                written.update(changes)
                return written
            except BadVersionError:
                written.update({tp: s for tp, s in changes.items() if self.ctx.states.get(tp) is s})
                stale = [tp for tp in changes if tp not in written]
                log.info("partition states changed in ZooKeeper meanwhile (attempt %d); re-reading %d of them",
                         attempt, len(stale))
                # Only the states of the chunks that failed (in a few multiReads, not all, one by one).
                for tp, fresh in (await self.zk.partition_states_of(stale)).items():
                    if tp[0] in self.ctx.assignments:
                        self.ctx.states[tp] = fresh
                tps = stale
        log.error("could not write the states of %d partitions after %d attempts", len(tps), STATE_WRITE_ATTEMPTS)
        return written

    def offline_partition_count(self) -> int:
        """Partitions without a leader (only the active controller knows)."""
        if not self.active:
            return 0
        return sum(1 for s in list(self.ctx.states.values()) if s.leader == E.NO_LEADER)

    async def _write_states(self, changes: dict[TopicPartition, Z.LeaderIsr], log_writes: bool = True) -> None:
        """Conditional writes (controller epoch check + each state's znode version) of changed states.

        The multis of MULTI_CHUNK states go out together, not one round trip after the other: a broker death
        changes every partition it held (10,000 states were 50 sequential multis, 1.3 s on a loaded machine).
        Each multi carries the epoch check, so fencing holds for every one of them. Each chunk's states are
        adopted as soon as it is written; a chunk that failed raises once all have finished (ControllerMovedError
        first), so the caller re-reads and decides again only for what was not written."""
        items = sorted(changes.items())
        chunks = [items[i:i + MULTI_CHUNK] for i in range(0, len(items), MULTI_CHUNK)]
        _raise_first(await asyncio.gather(*(self._write_chunk(chunk) for chunk in chunks), return_exceptions=True))
        if log_writes:
            _log_states(items)

    async def _write_chunk(self, chunk: list[tuple[TopicPartition, Z.LeaderIsr]]) -> None:
        ops: list[Op] = [("set", Z.state_path(*tp), Z.partition_state(s), s.zk_version) for tp, s in chunk]
        results = await self.zk.controller_multi(self.ctx.epoch_zk_version, ops)
        for (tp, state), stat in zip(chunk, results):
            state.zk_version = int(stat.version)
            self.ctx.states[tp] = state

    def _partition_info(self, tp: TopicPartition, is_new: bool = False) -> R.PartitionInfo:
        ctx = self.ctx
        return R.PartitionInfo(tp[0], ctx.topic_ids.get(tp[0], bytes(16)), tp[1], ctx.states[tp], ctx.replicas(tp),
                               is_new)

    # ------------------------------------------------------------------ sending
    def _send_leader_and_isr(self, broker_id: int, tps: list[TopicPartition], is_new: bool = False,
                             shared: dict[TopicPartition, dict[str, Any]] | None = None) -> None:
        """LeaderAndIsr of ``tps`` (those with a state) to one broker. ``shared``: the partitions' body entries
        already built for other brokers of the same change (filled here); each is built once, not per broker."""
        ctx = self.ctx
        broker = ctx.live.get(broker_id)
        if broker is None or self.channel is None:
            return
        entries = {} if shared is None else shared
        states: list[dict[str, Any]] = []
        for tp in tps:
            entry = entries.get(tp)
            if entry is None:
                state = ctx.states.get(tp)
                if state is None:
                    continue
                entry = entries[tp] = R.leader_and_isr_state(tp[0], tp[1], state, ctx.replicas(tp), is_new)
            states.append(entry)
        if not states:
            return
        leaders = [ctx.live[b] for b in dict.fromkeys(s["leader"] for s in states) if b in ctx.live]
        body = R.leader_and_isr_body(self.broker_id, ctx.epoch, broker.epoch, states, ctx.topic_ids, leaders)
        self.channel.send(broker_id, ApiKey.LEADER_AND_ISR, body, self._on_leader_and_isr_response)

    def _send_update_metadata(self, broker_ids: list[int], tps: list[TopicPartition]) -> None:
        ctx = self.ctx
        if self.channel is None:
            return
        infos = [self._partition_info(tp) for tp in tps if tp in ctx.states]
        live = [ctx.live[b] for b in sorted(ctx.live)]
        body: dict[str, Any] | None = None
        for broker_id in broker_ids:
            broker = ctx.live.get(broker_id)
            if broker is None:
                continue
            # Built once: the brokers' bodies differ only in the broker epoch and share the (read-only) partition
            # states, 10,000 dicts each after a broker death.
            body = R.update_metadata(self.broker_id, ctx.epoch, broker.epoch, infos, live) if body is None \
                else {**body, "broker_epoch": broker.epoch}
            self.channel.send(broker_id, ApiKey.UPDATE_METADATA, body, self._on_simple_response)

    def _send_stop_replica(self, broker_id: int, tps: list[TopicPartition], delete: bool) -> None:
        broker = self.ctx.live.get(broker_id)
        if broker is None or not tps or self.channel is None:
            return
        body = R.stop_replica(self.broker_id, self.ctx.epoch, broker.epoch, tps, delete)
        self.channel.send(broker_id, ApiKey.STOP_REPLICA, body, self._on_simple_response)

    def _propagate(self, changed: list[TopicPartition], extra_leader_and_isr: dict[int, list[TopicPartition]] | None = None) -> None:
        """LeaderAndIsr to the live replicas of changed partitions, then UpdateMetadata to every live broker.
        A broker in controlled shutdown gets no LeaderAndIsr (Kafka's rule too): it would become a follower of
        the partitions it just handed over, fetch at the new leader epoch, and its new leader would take it back
        into the ISR moments before it exits (acks=all then waits on a broker that is gone)."""
        # Ordered sets (dicts): a list membership test per partition made this quadratic in the partitions.
        per_broker: dict[int, dict[TopicPartition, None]] = {
            b: dict.fromkeys(v) for b, v in (extra_leader_and_isr or {}).items()}
        for tp in changed:
            for r in self.ctx.replicas(tp):
                if r in self.ctx.live and r not in self.ctx.shutting_down:
                    per_broker.setdefault(r, {})[tp] = None
        shared: dict[TopicPartition, dict[str, Any]] = {}
        for broker_id, tps in sorted(per_broker.items()):
            self._send_leader_and_isr(broker_id, list(tps), shared=shared)
        self._send_update_metadata(list(self.ctx.live), changed)

    def _on_leader_and_isr_response(self, broker_id: int, response: dict[str, Any]) -> None:
        errors = [(p.get("topic_name", "?"), p["partition_index"], p["error_code"])
                  for p in response.get("partition_errors") or [] if p["error_code"]]
        names = {topic_id: name for name, topic_id in self.ctx.topic_ids.items()}
        for t in response.get("topics") or []:
            name = names.get(t.get("topic_id") or b"", "?")
            errors += [(name, p["partition_index"], p["error_code"]) for p in t["partition_errors"]
                       if p["error_code"]]
        if response.get("error_code") or errors:
            log.warning("LeaderAndIsr to broker %d: error %s, partition errors %s", broker_id,
                        response.get("error_code"), errors[:10])
        offline = {(t, p) for t, p, code in errors if code == ErrorCode.KAFKA_STORAGE_ERROR and t != "?"}
        if offline:
            self._enqueue_if_active("offline-replicas", lambda: self._on_offline_replicas(broker_id, offline))

    def _on_simple_response(self, broker_id: int, response: dict[str, Any]) -> None:
        if response.get("error_code"):
            log.warning("request to broker %d answered with error %s", broker_id,
                        ErrorCode.for_code(int(response["error_code"])).name)

    # ------------------------------------------------------------------ broker changes
    async def _on_broker_change(self) -> None:
        ctx = self.ctx
        current = await self.zk.live_brokers()
        dead = sorted(b for b in ctx.live if b not in current or current[b].epoch != ctx.live[b].epoch)
        new = sorted(b for b in current if b not in ctx.live or current[b].epoch != ctx.live[b].epoch)
        if dead:
            await self._on_brokers_failed(dead)
        if new:
            await self._on_brokers_started([current[b] for b in new])

    async def _on_brokers_failed(self, dead: list[int]) -> None:
        ctx = self.ctx
        log.info("brokers %s left the cluster", dead)
        for b in dead:
            ctx.live.pop(b, None)
            ctx.shutting_down.discard(b)
            ctx.offline_replicas.pop(b, None)
            if self.channel is not None:
                await self.channel.remove_broker(b)

        touched = [tp for tp, s in ctx.states.items() if s.leader in dead or any(r in dead for r in s.isr)]
        changes = await self._decide_and_write(touched, self._elect_or_shrink)
        self._propagate(sorted(changes))

    async def _on_brokers_started(self, brokers: list[Z.BrokerInfo]) -> None:
        ctx = self.ctx
        log.info("brokers %s joined the cluster", [b.broker_id for b in brokers])
        new_ids = [b.broker_id for b in brokers]
        for b in brokers:
            ctx.live[b.broker_id] = b
            ctx.offline_replicas.pop(b.broker_id, None)  # restarted: it recovered or moved its log dirs
            if self.channel is not None:
                self.channel.add_broker(b)
        # The newcomers learn everything; the others learn the new broker list.
        self._send_update_metadata(new_ids, ctx.all_partitions())
        self._send_update_metadata([b for b in ctx.live if b not in new_ids], [])
        # A returning replica rejoins the ISR only when its leader sees it caught up; here it may only end an
        # offline period of partitions whose last in-sync replica it is.
        hosted = [tp for tp in ctx.all_partitions() if any(b in ctx.replicas(tp) for b in new_ids)]
        changes = await self._decide_and_write(hosted, self._elect_one)
        self._propagate(sorted(changes), {b: hosted for b in new_ids})

    # ------------------------------------------------------------------ topics
    async def _on_topic_change(self) -> None:
        ctx = self.ctx
        new = [t for t in await self.zk.topics() if t not in ctx.assignments]
        created: list[TopicPartition] = []
        for topic in await self._load_topics(new):
            created += ctx.partitions_of(topic)
        if not created:
            return
        log.info("new topics %s", sorted({t for t, _ in created}))
        await self._initialize_new_partitions(created)
        per_broker: dict[int, list[TopicPartition]] = {}
        for tp in created:
            for r in ctx.replicas(tp):
                per_broker.setdefault(r, []).append(tp)
        shared: dict[TopicPartition, dict[str, Any]] = {}
        for broker_id, tps in sorted(per_broker.items()):
            self._send_leader_and_isr(broker_id, tps, is_new=True, shared=shared)
        self._send_update_metadata(list(ctx.live), created)

    async def _on_topic_deletion(self) -> None:
        ctx = self.ctx
        for topic in await self.zk.topics_to_delete():
            if topic not in ctx.assignments and not await self._load_topic(topic):
                await self.zk.client.delete(Z.delete_topic_path(topic))
                continue
            tps = ctx.partitions_of(topic)
            log.info("deleting topic %s (%d partitions)", topic, len(tps))
            for broker_id in sorted(ctx.live):
                mine = [tp for tp in tps if broker_id in ctx.replicas(tp)]
                self._send_stop_replica(broker_id, mine, delete=True)
            for tp in tps:
                if tp in ctx.states:
                    s = ctx.states[tp]
                    ctx.states[tp] = Z.LeaderIsr(R.LEADER_DURING_DELETE, s.leader_epoch, s.isr, ctx.epoch,
                                                 s.zk_version)
            self._send_update_metadata(list(ctx.live), tps)
            paths = [Z.state_path(*tp) for tp in tps] + [Z.partition_path(*tp) for tp in tps]
            ops: list[Op] = []
            for path in paths + [Z.partitions_path(topic), Z.topic_path(topic), Z.topic_config_path(topic),
                                 Z.delete_topic_path(topic)]:
                if await self.zk.client.exists(path):
                    ops.append(("delete", path, -1))
            for i in range(0, len(ops), MULTI_CHUNK):
                await self.zk.controller_multi(ctx.epoch_zk_version, ops[i:i + MULTI_CHUNK])
            for tp in tps:
                ctx.states.pop(tp, None)
            ctx.assignments.pop(topic, None)
            ctx.topic_ids.pop(topic, None)
            ctx.topic_configs.pop(topic, None)

    async def _on_log_dir_event(self) -> None:
        """A broker reported a failed log dir: ask it (LeaderAndIsr for all it holds) which replicas are offline;
        its KAFKA_STORAGE_ERROR answers come back through ``_on_leader_and_isr_response``."""
        reporters: set[int] = set()
        for path, broker_id in await self.zk.log_dir_events():
            if broker_id is not None:
                reporters.add(broker_id)
            await self.zk.client.delete(path)
        for broker_id in sorted(reporters & set(self.ctx.live)):
            log.info("broker %d reported a failed log dir; checking its replicas", broker_id)
            self._send_leader_and_isr(broker_id, [tp for tp in self.ctx.all_partitions()
                                                  if broker_id in self.ctx.replicas(tp)])

    async def _on_offline_replicas(self, broker_id: int, tps: set[TopicPartition]) -> None:
        """Replicas on a failed log dir leave the ISR; partitions they led get a new leader (OfflineReplica)."""
        if broker_id not in self.ctx.live:
            return
        known = self.ctx.offline_replicas.setdefault(broker_id, set())
        new = sorted(tp for tp in tps if tp not in known and tp in self.ctx.states)
        if not new:
            return
        known.update(new)
        log.info("broker %d: %d replicas offline (failed log dir): %s", broker_id, len(new), new[:10])
        changes = await self._decide_and_write(new, self._elect_or_shrink)
        self._propagate(sorted(changes))

    async def _on_isr_change(self) -> None:
        """Leaders report ISR changes they wrote: refresh those states, tell everyone."""
        changed: set[TopicPartition] = set()
        for path, tps in await self.zk.isr_changes():
            for tp, state in (await self.zk.partition_states_of(tps)).items():
                if tp[0] in self.ctx.assignments:
                    self.ctx.states[tp] = state
                    changed.add(tp)
            await self.zk.client.delete(path)
        if changed:
            self._send_update_metadata(list(self.ctx.live), sorted(changed))
            # A leader may add a follower from a fetch that arrived just before the follower shut down or died
            # (after the controller had already taken it out): take it out again now, not replica.lag.time.max.ms
            # later, or acks=all with min.insync.replicas waits on a broker that is gone.
            shrunk = await self._decide_and_write(sorted(changed), self._drop_gone_followers)
            if shrunk:
                self._propagate(sorted(shrunk))
            await self.reassignments.check(sorted(changed))  # new replicas in sync: finish their moves

    def _drop_gone_followers(self, tp: TopicPartition, state: Z.LeaderIsr) -> Z.LeaderIsr | None:
        if state.leader == E.NO_LEADER or state.leader == R.LEADER_DURING_DELETE:
            return None
        gone = [r for r in state.isr if r != state.leader
                and (not self.ctx.replica_online(r, tp) or r in self.ctx.shutting_down)]
        if not gone:
            return None
        log.info("partition %s-%d: the leader's ISR %s names brokers that are gone or shutting down %s", *tp,
                 state.isr, gone)
        return self._new_state(tp, state.leader, E.shrink_isr(state.isr, gone))

    # ------------------------------------------------------------------ controlled shutdown
    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[ErrorCode, list[TopicPartition]]:
        """Runs as an event; answers once the leaderships have moved (in ZooKeeper and in the queues)."""
        fut: asyncio.Future[tuple[ErrorCode, list[TopicPartition]]] = asyncio.get_running_loop().create_future()

        async def event() -> None:
            try:
                result = await self._controlled_shutdown(broker_id, broker_epoch)
            except BaseException as exc:
                if not fut.done():
                    fut.set_exception(exc)
                raise
            if not fut.done():
                fut.set_result(result)

        self.enqueue("controlled-shutdown", event)
        return await fut

    async def _controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[ErrorCode, list[TopicPartition]]:
        ctx = self.ctx
        if not self.active:
            return ErrorCode.NOT_CONTROLLER, []
        broker = ctx.live.get(broker_id)
        if broker is None:
            return ErrorCode.BROKER_NOT_AVAILABLE, []
        if broker_epoch != -1 and broker_epoch < broker.epoch:
            return ErrorCode.STALE_BROKER_EPOCH, []
        log.info("controlled shutdown of broker %d", broker_id)
        ctx.shutting_down.add(broker_id)
        live = [b for b in ctx.live if b not in ctx.shutting_down]
        shrunk: set[TopicPartition] = set()

        def decide(tp: TopicPartition, state: Z.LeaderIsr) -> Z.LeaderIsr | None:
            replicas = ctx.replicas(tp)
            if broker_id not in replicas or state.leader == R.LEADER_DURING_DELETE:
                return None
            if state.leader == broker_id:
                if len(replicas) > 1:
                    result = E.controlled_shutdown_election(replicas, state.isr, live, ctx.shutting_down)
                    if result.elected:
                        return self._new_state(tp, result.leader, result.isr)
            elif broker_id in state.isr:
                shrunk.add(tp)
                return self._new_state(tp, state.leader, E.shrink_isr(state.isr, [broker_id]))
            return None

        changes = await self._decide_and_write(sorted(ctx.states), decide)
        followed = sorted(tp for tp in changes if tp in shrunk)
        self._propagate(sorted(changes))
        self._send_stop_replica(broker_id, followed, delete=False)
        # Still to move: the leaderships another live broker could take over (a replica that may rejoin the ISR
        # by the next attempt). Without one (the last broker of a cluster, or one replica) there is nothing to
        # wait for, as Kafka's controller leaves single-replica partitions out: the broker stops at once.
        others = set(live)
        remaining = sorted(tp for tp, s in ctx.states.items()
                           if s.leader == broker_id and others.intersection(ctx.replicas(tp)))
        return ErrorCode.NONE, remaining

    # ------------------------------------------------------------------ preferred leaders
    async def _rebalance_timer(self) -> None:
        while True:
            await asyncio.sleep(self.settings.imbalance_check_interval_s)
            self._enqueue_if_active("preferred-leader-check", self._check_preferred_leaders)

    async def _check_preferred_leaders(self) -> None:
        ctx = self.ctx
        live = [b for b in ctx.live if b not in ctx.shutting_down]
        leaders = {tp: (ctx.replicas(tp), s.leader) for tp, s in ctx.states.items()
                   if s.leader != R.LEADER_DURING_DELETE}

        def decide(tp: TopicPartition, state: Z.LeaderIsr) -> Z.LeaderIsr | None:
            # Only to a preferred replica that is in sync (the ISR as ZooKeeper has it: a conflict re-reads it).
            result = E.preferred_replica_election(ctx.replicas(tp), state.isr, live, ctx.shutting_down)
            if result.elected and result.leader != state.leader:
                return self._new_state(tp, result.leader, result.isr)
            return None

        changes = await self._decide_and_write(E.imbalanced_partitions(leaders, live, self.settings.imbalance_percentage),
                                               decide)
        if changes:
            log.info("moved %d partitions back to their preferred leaders", len(changes))
            self._propagate(sorted(changes))


def _raise_first(results: list[Any]) -> None:
    """Raises the first exception among ``asyncio.gather(..., return_exceptions=True)`` results, a moved
    controller or a cancellation before any other."""
    errors = [r for r in results if isinstance(r, BaseException)]
    for error in errors:
        if isinstance(error, (ControllerMovedError, asyncio.CancelledError)):
            raise error
    if errors:
        raise errors[0]


def _log_states(items: list[tuple[TopicPartition, Z.LeaderIsr]]) -> None:
    """One line per write (how many states, the new leaders, a few examples); each state at DEBUG. A line per
    partition was 10,000 lines and 8-11% of the controller's time when a broker of a large cluster died."""
    if not items:
        return
    leaders: dict[int, int] = {}
    for _, state in items:
        leaders[state.leader] = leaders.get(state.leader, 0) + 1
    examples = "; ".join(f"{t}-{p}: leader {s.leader}, epoch {s.leader_epoch}, ISR {s.isr}"
                         for (t, p), s in items[:EXAMPLES])
    more = f"; and {len(items) - EXAMPLES} more" if len(items) > EXAMPLES else ""
    log.info("wrote %d partition states (partitions per leader %s): %s%s", len(items),
             dict(sorted(leaders.items())), examples, more)
    if log.isEnabledFor(logging.DEBUG):
        for tp, state in items:
            log.debug("partition %s-%d: leader %d, leader epoch %d, ISR %s", *tp, state.leader, state.leader_epoch,
                      state.isr)
