"""The transaction coordinator: InitProducerId with a transactional id, AddPartitionsToTxn, AddOffsetsToTxn,
EndTxn, the transaction markers, time-outs and expiry, ListTransactions and DescribeTransactions.

Every change follows Kafka's order: the state machine (``txn_rules``) checks the request and prepares a transit,
the transit is written to ``__transaction_state`` and replicated (``TxnStateStore.write``), and only then does the
coordinator act on it and answer. After PrepareCommit/PrepareAbort is written the client hears NONE and a marker
round starts: WriteTxnMarkers to the leader of every partition of the transaction, retried (leader moves, broker
down) until each is written, then CompleteCommit/CompleteAbort is written. A broker that becomes leader of a
``__transaction_state`` partition loads it and resumes the marker rounds of the PrepareCommit/PrepareAbort
transactions it finds; a round stops when its coordinator epoch is gone (this broker resigned). All methods run
on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol

from moldau.broker.coordinator import txn_rules as rules
from moldau.broker.coordinator.txn_log import TRANSACTION_STATE_TOPIC, TxnStateStore
from moldau.broker.coordinator.txn_metadata import (
    NO_PRODUCER_EPOCH,
    TransactionMetadata,
    TxnError,
    TxnState,
    TxnTransit,
)
from moldau.broker.producer_ids import ProducerIdsUnavailable
from moldau.broker.purgatory import Timer, TimerHandle
from moldau.protocol.errors import ErrorCode
from moldau.protocol.types import TopicPartition
from moldau.storage.config import Clock

log = logging.getLogger("moldau.coordinator.txn")

S = TxnState
# Marker round retries: first wait, doubled up to the cap.
MARKER_RETRY_BACKOFF_S = 0.1
MARKER_RETRY_BACKOFF_MAX_S = 2.0
# How long AddPartitionsToTxn / AddOffsetsToTxn of the producer's next transaction wait for the previous one's
# marker round before hearing CONCURRENT_TRANSACTIONS (and retrying after the client's backoff).
MARKER_ROUND_WAIT_S = 1.0


@dataclass(slots=True)
class TxnConfig:
    max_timeout_ms: int = 900000
    id_expiration_ms: int = 604800000
    abort_timed_out_interval_ms: int = 10000
    remove_expired_interval_ms: int = 3600000

    @classmethod
    def from_broker_config(cls, config: Any) -> TxnConfig:
        return cls(int(config.get("transaction.max.timeout.ms")), int(config.get("transactional.id.expiration.ms")),
                   int(config.get("transaction.abort.timed.out.transaction.cleanup.interval.ms")),
                   int(config.get("transaction.remove.expired.transaction.cleanup.interval.ms")))


@dataclass(slots=True, eq=False)
class _Successor:
    """The first AddPartitionsToTxn/AddOffsetsToTxn of a producer's next transaction, waiting for the marker round
    of its previous one. ``result``: the error of the write of CompleteX and this Ongoing together, or None when
    the round ended without taking it (the request then goes the usual way)."""

    producer_id: int
    producer_epoch: int
    partitions: set[TopicPartition]
    result: asyncio.Future[ErrorCode | None]
    # The same answer, for the waiting request to await under its time-out (which cancels it): a shield over
    # ``result`` told the request one turn of the event loop later, on every back-to-back transaction.
    told: asyncio.Future[ErrorCode | None]

    def answer(self, error: ErrorCode | None) -> None:
        if not self.result.done():
            self.result.set_result(error)
        if not self.told.done():
            self.told.set_result(error)


@dataclass(slots=True, eq=False)
class _Round:
    """A marker round (PrepareX .. CompleteX) under way for a transactional id."""

    done: asyncio.Event = field(default_factory=asyncio.Event)
    successor: _Successor | None = None


class _NoHandle:
    def cancel(self) -> None:
        pass


class MarkerChannel(Protocol):
    """How markers reach partition leaders (WriteTxnMarkers); broker/coordinator/txn_markers.py sends them over
    the inter-broker listener."""

    def leader_of(self, tp: TopicPartition) -> int | None:
        """The partition's leader in this broker's metadata (None: unknown now, retried)."""
        ...

    def topic_exists(self, topic: str) -> bool: ...

    def write_markers(self, leader_id: int, producer_id: int, producer_epoch: int, commit: bool,
                      coordinator_epoch: int, partitions: list[TopicPartition]
                      ) -> Awaitable[dict[TopicPartition, ErrorCode]]:
        """The writes start when called where they can (a coroutine function's, when awaited); the awaitable
        gives each partition's error."""
        ...


class TransactionCoordinator:
    """The transactional ids of the ``__transaction_state`` partitions led by this broker (module docstring)."""

    def __init__(self, store: TxnStateStore, next_producer_id: Callable[[], int], markers: MarkerChannel,
                 timer: Timer, clock: Clock, config: TxnConfig, broker_id: int = -1) -> None:
        self.store = store
        self.next_producer_id = next_producer_id
        self.markers = markers
        self.timer = timer
        self.clock = clock
        self.config = config
        self.broker_id = broker_id
        self.active = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._load_tasks: dict[int, asyncio.Task[None]] = {}
        # transactional id -> its marker round (PrepareX .. CompleteX) while one is under way.
        self._rounds: dict[str, _Round] = {}
        self._timers: list[TimerHandle] = []
        # Metrics hooks (broker/server.py wires them to Prometheus counters).
        self.on_marker_failure: Callable[[int], None] = lambda _n: None
        self.on_timed_out: Callable[[], None] = lambda: None
        self.topic_lock = asyncio.Lock()  # serialises creation of __transaction_state

    # ----------------------------------------------------------------------------------------- life cycle
    def startup(self) -> None:
        self.active = True
        self._every(self.config.abort_timed_out_interval_ms, self.abort_timed_out_transactions, "txn-timeouts")
        self._every(self.config.remove_expired_interval_ms, self.remove_expired_transactional_ids, "txn-expiry")

    def shutdown(self) -> None:
        self.active = False
        for handle in self._timers:
            handle.cancel()
        self._timers.clear()
        for task in list(self._tasks) + list(self._load_tasks.values()):
            task.cancel()
        self._tasks.clear()
        self._load_tasks.clear()
        for partition in list(self.store.owned) + list(self.store.loading):
            self.store.unload_partition(partition)

    def _spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _every(self, interval_ms: int, fn: Callable[[], Any], name: str) -> None:
        """Run ``fn`` every ``interval_ms`` on the injected timer, while the coordinator is active."""
        slot = len(self._timers)
        self._timers.append(_NoHandle())

        def tick() -> None:
            if not self.active:
                return
            try:
                fn()
            except Exception:
                log.exception("%s failed", name)
            self._timers[slot] = self.timer.schedule(interval_ms, tick)

        self._timers[slot] = self.timer.schedule(interval_ms, tick)

    def now(self) -> int:
        return self.clock.time_ms()

    # ----------------------------------------------------------------------------------------- leadership
    def on_topic_change(self, name: str, topic: Any) -> None:
        """MetadataStore listener: follow the leadership of the __transaction_state partitions."""
        if name != TRANSACTION_STATE_TOPIC:
            return
        led: dict[int, int] = {}
        if topic is not None:
            self.store.num_partitions = len(topic.partitions)
            led = {p: state.leader_epoch for p, state in topic.partitions.items() if state.leader == self.broker_id}
        current = {**self.store.owned, **self.store.loading}
        for partition, epoch in sorted(current.items()):
            if led.get(partition) != epoch:
                self.on_resign(partition)
        for partition, epoch in sorted(led.items()):
            if partition not in self.store.owned and partition not in self.store.loading:
                self.on_become_leader(partition, epoch)

    def on_become_leader(self, partition: int, coordinator_epoch: int) -> None:
        generation = self.store.begin_load(partition, coordinator_epoch)
        task = asyncio.get_running_loop().create_task(self._load(partition, generation),
                                                      name=f"load-{TRANSACTION_STATE_TOPIC}-{partition}")
        self._load_tasks[partition] = task

    async def _load(self, partition: int, generation: int) -> None:
        try:
            metas = await self.store.load_partition(partition, generation)
        except Exception:
            log.exception("loading %s-%d failed", TRANSACTION_STATE_TOPIC, partition)
            return
        finally:
            if self._load_tasks.get(partition) is asyncio.current_task():
                del self._load_tasks[partition]
        epoch = self.store.epoch_of(partition)
        for meta in metas or []:
            if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT) and epoch is not None:
                log.info("resuming %s of %s (producer %d, epoch %d)", meta.state.display, meta.transactional_id,
                         meta.producer_id, meta.producer_epoch)
                self._start_markers(meta, epoch)

    def on_resign(self, partition: int) -> None:
        task = self._load_tasks.pop(partition, None)
        if task is not None:
            task.cancel()
        gone = self.store.unload_partition(partition)
        if gone:
            log.info("no longer coordinating %d transactional ids of %s-%d", len(gone), TRANSACTION_STATE_TOPIC,
                     partition)

    def validate(self, transactional_id: str | None) -> ErrorCode | None:
        """The coordinator-level error for a request about this transactional id, or None."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if not self.store.is_local(transactional_id):
            return ErrorCode.NOT_COORDINATOR
        if self.store.is_loading(transactional_id):
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return None

    def _epoch(self, transactional_id: str) -> int:
        epoch = self.store.epoch_of(self.store.partition_for(transactional_id))
        assert epoch is not None, "validate() first"
        return epoch

    # ----------------------------------------------------------------------------------------- InitProducerId
    async def init_producer_id(self, transactional_id: str, timeout_ms: int, expected: tuple[int, int] | None
                               ) -> tuple[ErrorCode, int, int]:
        """(error, producer id, epoch). ``expected``: KIP-360's (producer id, epoch) from the client, or None."""
        # Kafka's order: an empty id, then the timeout, then whether this broker coordinates the id.
        fail = ErrorCode.INVALID_REQUEST if not transactional_id else None
        if fail is None:
            try:
                rules.check_timeout(timeout_ms, self.config.max_timeout_ms)
            except TxnError as exc:
                fail = exc.code
        fail = fail or self.validate(transactional_id)
        if fail is not None:
            return fail, -1, -1
        coordinator_epoch = self._epoch(transactional_id)
        now = self.now()
        try:
            meta = self.store.get(transactional_id)
            if meta is None:
                meta = self.store.put_if_absent(TransactionMetadata(
                    transactional_id, self.next_producer_id(), producer_epoch=NO_PRODUCER_EPOCH,
                    txn_timeout_ms=timeout_ms, txn_last_update_timestamp=now))
            decision = rules.init_producer_id(meta, timeout_ms, expected, self.next_producer_id, now)
        except TxnError as exc:
            return exc.code, -1, -1
        except ProducerIdsUnavailable:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, -1, -1  # retriable: a block is on its way
        if isinstance(decision, rules.FenceFirst):
            # An open transaction: abort it (with the bumped epoch) first; the client retries meanwhile.
            error = await self._end(meta, meta.producer_id, meta.producer_epoch, False, False, coordinator_epoch)
            if error == ErrorCode.NONE:
                log.info("fenced producer %d of %s; aborting its open transaction", meta.producer_id,
                         transactional_id)
            return (ErrorCode.CONCURRENT_TRANSACTIONS if error == ErrorCode.NONE else error), -1, -1
        error = await self.store.write(transactional_id, decision, coordinator_epoch)
        if error != ErrorCode.NONE:
            meta.abort_transition()
            return error, -1, -1
        meta.complete_transition(decision)
        return ErrorCode.NONE, meta.producer_id, meta.producer_epoch

    # ----------------------------------------------------------------------------------------- partitions
    async def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                             partitions: set[TopicPartition]) -> ErrorCode:
        """AddPartitionsToTxn and AddOffsetsToTxn (the group's __consumer_offsets partition)."""
        error = self.validate(transactional_id)
        if error is not None:
            return error
        meta = self.store.get(transactional_id)
        if meta is None:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        round_ = self._rounds.get(transactional_id)
        if round_ is not None and (meta.producer_id, meta.producer_epoch) == (producer_id, epoch):
            # The producer's previous transaction is between EndTxn's answer and CompleteCommit/CompleteAbort (its
            # markers on their way): this first request of the next transaction waits for that, instead of
            # CONCURRENT_TRANSACTIONS and a retry after the client's backoff, which cost more than the markers on
            # back-to-back transactions. It also spares librdkafka a fatal INVALID_TXN_STATE: an abort right after
            # a commit sends EndTxn(abort) once it has sent AddPartitionsToTxn, whatever the answer was.
            waited = await self._follow(round_, producer_id, epoch, partitions)
            if waited is not None:
                return waited
            error = self.validate(transactional_id)
            if error is not None:
                return error
            meta = self.store.get(transactional_id)
            if meta is None:
                return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        coordinator_epoch = self._epoch(transactional_id)
        try:
            transit = rules.add_partitions(meta, producer_id, epoch, partitions, self.now())
        except TxnError as exc:
            return exc.code
        if transit is None:
            return ErrorCode.NONE
        error = await self.store.write(transactional_id, transit, coordinator_epoch)
        if error != ErrorCode.NONE:
            meta.abort_transition()
            return error
        meta.complete_transition(transit)
        return ErrorCode.NONE

    async def _follow(self, round_: _Round, producer_id: int, epoch: int, partitions: set[TopicPartition]
                      ) -> ErrorCode | None:
        """Wait (up to MARKER_ROUND_WAIT_S) for the producer's marker round. The first request waiting is the
        round's successor: the round writes its Ongoing in the same batch as CompleteX, and this returns that
        write's error. None: the round ended without it; go on as usual."""
        if round_.successor is not None:  # another request of the producer is the successor: wait for the end
            try:
                async with asyncio.timeout(MARKER_ROUND_WAIT_S):  # not wait_for: see moldau.tasks
                    await round_.done.wait()
            except TimeoutError:
                return ErrorCode.CONCURRENT_TRANSACTIONS
            return None
        loop = asyncio.get_running_loop()
        successor = round_.successor = _Successor(producer_id, epoch, set(partitions), loop.create_future(),
                                                  loop.create_future())
        try:
            async with asyncio.timeout(MARKER_ROUND_WAIT_S):
                return await successor.told  # ``result`` is the round's: never cancelled
        except TimeoutError:
            if round_.successor is successor:  # not taken: give the place up
                round_.successor = None
                return ErrorCode.CONCURRENT_TRANSACTIONS
        # Taken: the write with CompleteX is under way (bounded by the store's write timeout).
        return await successor.result

    def verify_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                          partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4+ with verify_only (KIP-890 part 1, sent by partition leaders before a
        transactional produce): NONE for the partitions in the ongoing transaction of this producer,
        INVALID_TXN_STATE for the others, so a late retry cannot open a hanging transaction."""
        error = self.validate(transactional_id)
        meta = self.store.get(transactional_id) if error is None else None
        if error is None and meta is None:
            error = ErrorCode.INVALID_PRODUCER_ID_MAPPING
        elif meta is not None and meta.producer_id != producer_id:
            error = ErrorCode.INVALID_PRODUCER_ID_MAPPING
        elif meta is not None and meta.producer_epoch != epoch:
            error = ErrorCode.PRODUCER_FENCED
        if error is not None or meta is None:
            return {tp: error or ErrorCode.UNKNOWN_SERVER_ERROR for tp in partitions}
        ongoing = meta.state is S.ONGOING
        return {tp: ErrorCode.NONE if ongoing and tp in meta.partitions else ErrorCode.INVALID_TXN_STATE
                for tp in partitions}

    # ----------------------------------------------------------------------------------------- EndTxn
    async def end_transaction(self, transactional_id: str, producer_id: int, epoch: int, commit: bool) -> ErrorCode:
        error = self.validate(transactional_id)
        if error is not None:
            return error
        meta = self.store.get(transactional_id)
        if meta is None:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        return await self._end(meta, producer_id, epoch, commit, True, self._epoch(transactional_id))

    async def _end(self, meta: TransactionMetadata, producer_id: int, epoch: int, commit: bool, from_client: bool,
                   coordinator_epoch: int) -> ErrorCode:
        try:
            transit = rules.end_transaction(meta, producer_id, epoch, commit, from_client, self.now())
        except TxnError as exc:
            return exc.code
        if transit is None:
            return ErrorCode.NONE  # a retry of an EndTxn already completed
        error = await self.store.write(meta.transactional_id, transit, coordinator_epoch)
        if error != ErrorCode.NONE:
            meta.abort_transition()
            return error
        meta.complete_transition(transit)
        self._start_markers(meta, coordinator_epoch)
        return ErrorCode.NONE

    # ----------------------------------------------------------------------------------------- markers
    def _start_markers(self, meta: TransactionMetadata, coordinator_epoch: int) -> None:
        round_ = self._rounds[meta.transactional_id] = _Round()
        self._spawn(self._round(meta, coordinator_epoch, round_), f"txn-markers-{meta.transactional_id}")

    async def _round(self, meta: TransactionMetadata, coordinator_epoch: int, round_: _Round) -> None:
        try:
            await self._complete(meta, coordinator_epoch, round_)
        finally:
            if self._rounds.get(meta.transactional_id) is round_:
                del self._rounds[meta.transactional_id]
            successor, round_.successor = round_.successor, None
            if successor is not None:
                successor.answer(None)
            round_.done.set()

    def _still_ours(self, meta: TransactionMetadata, coordinator_epoch: int) -> bool:
        tid = meta.transactional_id
        return (self.active and self.store.get(tid) is meta
                and self.store.epoch_of(self.store.partition_for(tid)) == coordinator_epoch)

    async def _write_markers(self, by_leader: dict[int, list[TopicPartition]], producer_id: int,
                             producer_epoch: int, commit: bool, coordinator_epoch: int
                             ) -> list[dict[TopicPartition, ErrorCode] | BaseException]:
        """Every leader's markers at once (started now: this broker's appended, the others' requests queued), then
        their answers one by one, each awaited directly: a task per leader under gather started the writes a turn
        of the event loop late and told the round two turns after the last answer."""
        writes = [self.markers.write_markers(leader, producer_id, producer_epoch, commit, coordinator_epoch, tps)
                  for leader, tps in by_leader.items()]
        waits = [asyncio.ensure_future(w) if inspect.iscoroutine(w) else w for w in writes]
        results: list[dict[TopicPartition, ErrorCode] | BaseException] = []
        try:
            for wait in waits:
                try:
                    results.append(await wait)
                except asyncio.CancelledError as exc:
                    task = asyncio.current_task()
                    if task is None or task.cancelling():  # the round itself is cancelled
                        raise
                    results.append(exc)  # only this write was: retried as a failed one
                except Exception as exc:
                    results.append(exc)
        finally:
            for wait in waits:  # the round was cancelled: what is not sent yet is left out
                if isinstance(wait, asyncio.Future) and not wait.done():
                    wait.cancel()
        return results

    async def _complete(self, meta: TransactionMetadata, coordinator_epoch: int, round_: _Round) -> None:
        """One marker round: markers to every partition's leader until all are written, then CompleteX (with the
        round's successor's Ongoing, when one waits)."""
        commit = meta.state is S.PREPARE_COMMIT
        pending = set(meta.partitions)
        producer_id, producer_epoch = meta.producer_id, meta.producer_epoch
        backoff = MARKER_RETRY_BACKOFF_S
        while pending:
            if not self._still_ours(meta, coordinator_epoch):
                return
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in sorted(pending):
                if not self.markers.topic_exists(tp[0]):
                    pending.discard(tp)  # deleted topic: nothing left to mark
                    continue
                leader = self.markers.leader_of(tp)
                if leader is not None and leader >= 0:
                    by_leader.setdefault(leader, []).append(tp)
            results = await self._write_markers(by_leader, producer_id, producer_epoch, commit, coordinator_epoch)
            for leader, result in zip(by_leader, results, strict=True):
                if isinstance(result, BaseException):
                    log.info("markers for %s to broker %d failed (%s); retrying", meta.transactional_id, leader,
                             result)
                    self.on_marker_failure(len(by_leader[leader]))
                    continue
                for tp, error in result.items():
                    if error == ErrorCode.NONE:
                        pending.discard(tp)
                    else:
                        log.debug("marker for %s on %s-%d: %s; retrying", meta.transactional_id, tp[0], tp[1],
                                  ErrorCode(error).name)
                        self.on_marker_failure(1)
            if pending:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, MARKER_RETRY_BACKOFF_MAX_S)
        backoff = MARKER_RETRY_BACKOFF_S
        while self._still_ours(meta, coordinator_epoch):
            # The markers are replicated: CompleteX may be written. The next transaction's first request, if it
            # waits already, goes in the same batch (its Ongoing answered only once both are replicated).
            successor, round_.successor = round_.successor, None
            if successor is not None and (successor.result.done() or (successor.producer_id, successor.producer_epoch)
                                          != (meta.producer_id, meta.producer_epoch)):
                successor.answer(None)  # not this producer's any more: the usual way decides
                successor = None
            try:
                transit: TxnTransit | tuple[TxnTransit, ...] = (
                    meta.prepare_complete(self.now()) if successor is None
                    else meta.prepare_complete_and_begin(successor.partitions, self.now()))
            except TxnError as exc:
                log.error("cannot complete %s of %s: %s", meta.state.display, meta.transactional_id, exc)
                if successor is not None:
                    successor.answer(None)
                return
            error = await self.store.write(meta.transactional_id, transit, coordinator_epoch)
            if error == ErrorCode.NONE:
                meta.complete_transition(transit)
            else:
                meta.abort_transition()  # still PrepareX: CompleteX alone is retried
            if successor is not None:
                successor.answer(error)  # an error is retriable for the client (coordinator errors)
            if error == ErrorCode.NONE:
                log.debug("%s %s (producer %d, epoch %d)", meta.state.display, meta.transactional_id,
                          producer_id, producer_epoch)
                return
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MARKER_RETRY_BACKOFF_MAX_S)

    # ----------------------------------------------------------------------------------------- timeouts, expiry
    def abort_timed_out_transactions(self) -> list[str]:
        """Fence and abort every transaction open longer than its timeout (returns their ids)."""
        now = self.now()
        aborted = []
        for meta in list(self.store.txns.values()):
            partition = self.store.partition_for(meta.transactional_id)
            coordinator_epoch = self.store.epoch_of(partition)
            if coordinator_epoch is None or not meta.timed_out(now):
                continue
            try:
                meta.prepare_fence_producer_epoch()
            except TxnError:
                continue
            log.info("aborting the transaction of %s (producer %d): open longer than its timeout of %d ms",
                     meta.transactional_id, meta.producer_id, meta.txn_timeout_ms)
            aborted.append(meta.transactional_id)
            self.on_timed_out()
            self._spawn(self._end(meta, meta.producer_id, meta.producer_epoch, False, False, coordinator_epoch),
                        f"txn-abort-{meta.transactional_id}")
        return aborted

    def remove_expired_transactional_ids(self) -> None:
        now = self.now()
        for meta in list(self.store.txns.values()):
            coordinator_epoch = self.store.epoch_of(self.store.partition_for(meta.transactional_id))
            if coordinator_epoch is not None and meta.expired(now, self.config.id_expiration_ms):
                self._spawn(self._expire(meta, coordinator_epoch), f"txn-expire-{meta.transactional_id}")

    async def _expire(self, meta: TransactionMetadata, coordinator_epoch: int) -> None:
        try:
            transit = meta.prepare_dead(self.now())
        except TxnError:
            return
        error = await self.store.write(meta.transactional_id, transit, coordinator_epoch)
        if error != ErrorCode.NONE:
            meta.abort_transition()
            return
        meta.complete_transition(transit)
        if self.store.get(meta.transactional_id) is meta:
            del self.store.txns[meta.transactional_id]
        log.info("transactional id %s expired", meta.transactional_id)

    # ----------------------------------------------------------------------------------------- metrics
    def state_counts(self) -> list[tuple[str, int]]:
        """(state, number of transactional ids) of the loaded partitions, for the metrics scrape."""
        counts = dict.fromkeys((s.display for s in TxnState if s is not S.DEAD), 0)
        for meta in list(self.store.txns.values()):
            if meta.state.display in counts:
                counts[meta.state.display] += 1
        return sorted(counts.items())

    # ----------------------------------------------------------------------------------------- admin
    def list_transactions(self, states: set[str], producer_ids: set[int], min_duration_ms: int = -1
                          ) -> tuple[ErrorCode, list[TransactionMetadata]]:
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.store.loading else ErrorCode.NONE
        now = self.now()
        wanted = {s.lower() for s in states}
        found = [m for m in self.store.txns.values()
                 if self.store.partition_for(m.transactional_id) in self.store.owned
                 and (not wanted or m.state.display.lower() in wanted)
                 and (not producer_ids or m.producer_id in producer_ids)
                 and (min_duration_ms < 0 or (m.state is S.ONGOING and now - m.txn_start_timestamp >= min_duration_ms))]
        return error, sorted(found, key=lambda m: m.transactional_id)

    def describe_transaction(self, transactional_id: str) -> tuple[ErrorCode, TransactionMetadata | None]:
        error = self.validate(transactional_id)
        if error is not None:
            return error, None
        meta = self.store.get(transactional_id)
        if meta is None or meta.state is S.DEAD:
            return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None
        return ErrorCode.NONE, meta
