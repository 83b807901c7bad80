"""The partitions hosted on this broker: append and read, follower tracking, ISR changes, and the wake-ups of
delayed operations.

Handlers call ``append``/``read``/``update_follower``/``get_partition``. Role changes from LeaderAndIsr go to
``role_listeners`` (the replica fetcher manager starts or stops fetching). The leader writes ISR changes through
``isr_writer`` (ZooKeeper mode: a versioned write of the partition state znode plus an ISR change notification)
and takes the new ISR only once it was accepted. ``append_listeners`` hear of every append (follower fetches wait
for the log end offset), ``hw_listeners`` of every high-watermark advance (acks=all produces and consumer fetches
wait for it; ``hw_batch_listeners`` take the moves of one follower fetch in one call). ``txn_marker_listeners`` hear of every transaction marker this leader wrote and replicated (the
group coordinator makes a transaction's pending offset commits visible or drops them).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from moldau.broker.metadata import PartitionState, TopicMetadata
from moldau.broker.partition import IsrOutcome, Partition
from moldau.broker.replication_quota import ReplicationQuota
from moldau.protocol.errors import ErrorCode
from moldau.protocol.types import TopicPartition
from moldau.storage.config import SystemClock
from moldau.storage.errors import DuplicateSequence, OffsetOutOfRangeError, StorageError
from moldau.storage.log_manager import LogManager
from moldau.storage.segment import FileRegion
from moldau.storage.txn_index import AbortedTxn
from moldau.tasks import cancel_and_wait

log = logging.getLogger("moldau.replica_manager")

# (partition, new ISR) -> (the state znode's new version, the ISR it holds), or None when the controller moved on.
IsrWriter = Callable[[Partition, list[int]], Awaitable[tuple[int, list[int]] | None]]


class TxnMarkerListener(Protocol):
    def on_transaction_marker(self, topic: str, partition: int, producer_id: int, committed: bool) -> None:
        """A COMMIT (``committed``) or ABORT marker for ``producer_id`` is in the partition's log and replicated
        to the ISR (called by the WriteTxnMarkers handler on the leader)."""
        ...


@dataclass(slots=True)
class AppendResult:
    error: ErrorCode = ErrorCode.NONE
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    message: str | None = None
    last_offset: int = -1
    record_errors: list[tuple[int, str | None]] = field(default_factory=list)  # KIP-467 (batch index, message)


# A placeholder in append_many's results until each request's own is in.
_NO_RESULT = AppendResult(ErrorCode.UNKNOWN_SERVER_ERROR)
# Pipelined requests' records appended together are copied into one buffer: at most this many bytes at a time (a
# client's large requests, which gain nothing from it, are appended one by one as their frames stand).
APPEND_MANY_MAX_BYTES = 1 << 20


@dataclass(slots=True)
class ReadResult:
    error: ErrorCode = ErrorCode.NONE
    high_watermark: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    records: Any = None
    size: int = 0
    last_stable_offset: int = -1
    aborted_transactions: list[AbortedTxn] | None = None  # read_committed only


class RecordsView:
    """The file regions of one partition's fetch answer; the encoder writes its length, the network sends it."""

    __slots__ = ("regions", "size")

    def __init__(self, regions: list[FileRegion], size: int) -> None:
        self.regions = regions
        self.size = size

    def __len__(self) -> int:
        return self.size


class ReplicaManager:
    def __init__(self, broker_id: int, log_manager: LogManager,
                 log_config_for: Callable[[dict[str, str]], Any], min_insync_replicas: int = 1, *,
                 clock: Any = None, replica_lag_time_max_ms: int = 30000,
                 high_watermarks: dict[TopicPartition, int] | None = None) -> None:
        self.broker_id = broker_id
        self.min_insync_replicas = min_insync_replicas
        self.log_manager = log_manager
        self.log_config_for = log_config_for
        self._last_configs: dict[str, str] | None = None  # become_leader_or_follower's config of the last topic
        self._last_log_config: Any = None
        self._last_topic = ""
        self.clock = clock if clock is not None else SystemClock()
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.partitions: dict[TopicPartition, Partition] = {}
        # Each hosted topic's config overrides, so a dynamic change (topic or broker default) re-applies them.
        self.topic_overrides: dict[str, dict[str, str]] = {}
        # High watermarks from the replication-offset-checkpoint files, for partitions not loaded yet.
        self.checkpointed_hw: dict[TopicPartition, int] = dict(high_watermarks or {})
        self._last_hw_files: list[tuple[Path, dict[TopicPartition, int]]] | None = None  # the last periodic write
        # Called with the topic-partition after every append (follower fetches wait for the log end offset).
        self.append_listeners: list[Callable[[TopicPartition], object]] = []
        # Called with the topic-partition when its high watermark advanced (acks=all, consumer fetches).
        self.hw_listeners: list[Callable[[TopicPartition], object]] = []
        # The same, for listeners that take several partitions at once (the produce purgatory: an acks=all
        # request over n partitions is checked once for a follower fetch that moves n high watermarks, not n
        # times). Called with one partition outside ``high_watermark_moves_together``.
        self.hw_batch_listeners: list[Callable[[list[TopicPartition]], object]] = []
        self._hw_moved: dict[TopicPartition, None] | None = None  # collected inside high_watermark_moves_together
        # Called with the topic-partition when a follower reported a new log start offset (DeleteRecords waits).
        self.low_watermark_listeners: list[Callable[[TopicPartition], object]] = []
        # Called with (partition, became_leader) after a LeaderAndIsr or StopReplica changed its role; the follower
        # fetchers hook in here, so the LeaderAndIsr handler does not change.
        self.role_listeners: list[Callable[[Partition, bool], None]] = []
        # Told of each transaction marker written here once replicated (WriteTxnMarkers); registered by the
        # group coordinator's transactional offset commits.
        self.txn_marker_listeners: list[TxnMarkerListener] = []
        self.isr_writer: IsrWriter | None = None
        # Called with True after an ISR shrink, False after an expansion (metrics).
        self.isr_change_listeners: list[Callable[[bool], None]] = []
        self._isr_tasks: set[asyncio.Task[None]] = set()
        # Partitions whose log dir failed: answered with KAFKA_STORAGE_ERROR until a restart.
        self.offline_partitions: set[TopicPartition] = set()
        # Called with (failed dir, True if no log dir is left) when a log dir goes offline.
        self.log_dir_failure_listeners: list[Callable[[Path, bool], None]] = []
        # Internal writers (the group coordinator) waiting for the HW: tp -> [(offset, future)].
        self._hw_waiters: dict[TopicPartition, list[tuple[int, asyncio.Future[ErrorCode]]]] = {}
        # The coordinators' loads waiting for a local replica to lead (wait_until_leader): tp -> futures.
        self._leader_waiters: dict[TopicPartition, list[asyncio.Future[None]]] = {}
        # Replication throttles (broker/replication_quota.py), set by the server: the leader's side is applied by
        # Fetch to followers' fetches, the follower's by the replica fetchers.
        self.leader_throttle: ReplicationQuota | None = None

    # ------------------------------------------------------------------ state changes
    def _new_partition(self, topic: str, index: int, log_: Any) -> Partition:
        partition = Partition(topic, index, self.broker_id, log_)
        partition.high_watermark = self.checkpointed_hw.pop((topic, index), 0)
        partition.clamp_high_watermark()
        self.partitions[(topic, index)] = partition
        return partition

    def on_topic_change(self, name: str, topic: TopicMetadata | None) -> None:
        """Standalone mode: every partition is led here and its ISR is this broker."""
        if topic is None:
            for tp in [tp for tp in self.partitions if tp[0] == name]:
                self.remove_partition(tp, delete=True)
            self.topic_overrides.pop(name, None)
            return
        config = self.log_config_for(topic.configs)
        self.topic_overrides[name] = dict(topic.configs)
        for index, state in topic.partitions.items():
            tp = (name, index)
            if self.broker_id not in state.replicas:
                if tp in self.partitions:
                    self.remove_partition(tp, delete=True)
                continue
            partition = self.partitions.get(tp)
            if partition is None:
                partition = self._new_partition(name, index, self.log_manager.get_or_create_log(name, index, config))
            partition.log.config = config
            partition.min_insync_replicas = int(topic.configs.get("min.insync.replicas",
                                                                  self.min_insync_replicas))
            partition.apply_state(state, self.clock.time_ms())
            if partition.is_leader:
                self._wake_leader_waiters(tp)

    # ------------------------------------------------------------------ dynamic configs
    def update_topic_config(self, topic: str, configs: dict[str, str]) -> None:
        """A topic's overrides changed (AlterConfigs): every hosted partition of it takes them now."""
        if not any(tp[0] == topic for tp in self.partitions):
            return
        self.topic_overrides[topic] = dict(configs)
        self._apply_topic_config(topic)

    def on_broker_config(self, current: Any) -> None:
        """The dynamic broker config changed (a ``BrokerConfig``): new defaults for every hosted topic."""
        self.min_insync_replicas = int(current.get("min.insync.replicas"))
        self.reapply_configs()

    def reapply_configs(self) -> None:
        """The broker defaults changed: recompute every hosted topic's config."""
        for topic in sorted({tp[0] for tp in self.partitions}):
            self._apply_topic_config(topic)

    def _apply_topic_config(self, topic: str) -> None:
        configs = self.topic_overrides.get(topic, {})
        try:
            config = self.log_config_for(configs)
            min_isr = int(configs.get("min.insync.replicas", self.min_insync_replicas))
        except Exception as exc:  # a ConfigError from a bad znode: keep what works
            log.error("keeping the old config of %s: %s", topic, exc)
            return
        for (t, _), partition in self.partitions.items():
            if t == topic:
                partition.log.config = config
                partition.min_insync_replicas = min_isr
        log.info("%s: config applied (overrides %s)", topic, configs)

    def become_leader_or_follower(self, topic: str, state: PartitionState, configs: dict[str, str],
                                  became: dict[str, list[TopicPartition]] | None = None) -> ErrorCode:
        """Applies one partition of a LeaderAndIsr (ZooKeeper mode): creates the log when needed, takes the new
        leader/ISR/epoch unless the request's leader epoch is older than the one we have. A partition that became
        leader (of a new epoch) or stopped leading is added to ``became["leader"]`` / ``became["follower"]``,
        for the caller's one summary line; each is also logged at DEBUG."""
        tp = (topic, state.partition)
        if tp in self.offline_partitions:
            return ErrorCode.KAFKA_STORAGE_ERROR  # the controller treats this replica as offline
        partition = self.partitions.get(tp)
        if partition is not None and state.leader_epoch < partition.leader_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH
        if configs is not self._last_configs or topic != self._last_topic:
            # One LeaderAndIsr hands every partition of a topic the same dict: parse it once per topic.
            self._last_configs, self._last_topic = configs, topic
            self._last_log_config = self.log_config_for(configs)
            self.topic_overrides[topic] = dict(configs)
        config = self._last_log_config
        if partition is None:
            try:
                log_ = self.log_manager.get_or_create_log(topic, state.partition, config)
            except (OSError, StorageError) as exc:
                log.error("cannot create the log of %s-%d: %s", topic, state.partition, exc)
                return ErrorCode.KAFKA_STORAGE_ERROR
            partition = self._new_partition(topic, state.partition, log_)
        was_leader = partition.is_leader
        old_hw, old_epoch = partition.high_watermark, partition.leader_epoch
        partition.log.config = config
        partition.min_insync_replicas = int(configs.get("min.insync.replicas", self.min_insync_replicas))
        became_leader = partition.apply_state(state, self.clock.time_ms())
        if became_leader:
            if became is not None:
                became.setdefault("leader", []).append(tp)
            if log.isEnabledFor(logging.DEBUG):
                log.debug("%s-%d: leader now (epoch %d, ISR %s, log end offset %d, high watermark %d)", topic,
                          state.partition, state.leader_epoch, state.isr, partition.log.log_end_offset,
                          partition.high_watermark)
        if became_leader or not partition.is_leader:
            for listener in self.role_listeners:
                listener(partition, partition.is_leader)
        if became_leader:
            self._wake_leader_waiters(tp)
        if was_leader and not partition.is_leader:
            if became is not None:
                became.setdefault("follower", []).append(tp)
            log.debug("%s-%d: follower now (leader %d, epoch %d)", topic, state.partition, state.leader,
                      state.leader_epoch)
        if partition.high_watermark != old_hw or was_leader != partition.is_leader or \
                partition.leader_epoch != old_epoch:
            # Waiting produces learn the outcome, consumer fetches the new HW, fetch sessions look at the
            # partition again (a follower still fetching at the old epoch is told FENCED_LEADER_EPOCH).
            self._hw_changed(tp)
        return ErrorCode.NONE

    def stop_replica(self, topic: str, index: int, delete: bool) -> ErrorCode:
        """StopReplica: stop serving the partition here; with delete, remove its log too."""
        tp = (topic, index)
        partition = self.partitions.get(tp)
        if partition is not None:
            partition.leader_id = -1
            for listener in self.role_listeners:
                listener(partition, False)
            self._hw_changed(tp)
        if delete:
            self.remove_partition(tp, delete=True)
        return ErrorCode.NONE

    def log_dir_failed(self, d: Path, exc: BaseException) -> None:
        """An I/O error in log dir ``d``: every partition in it goes offline here (KIP-112). Fetchers stop for
        them, waiting produces learn they failed, and the listeners tell the controller (which moves leadership
        and shrinks ISRs) or, when no log dir is left, stop the broker."""
        if d in self.log_manager.offline_dirs:
            return
        failed = self.log_manager.mark_dir_offline(d)
        log.error("log dir %s failed (%r): %d partitions offline", d, exc, len(failed))
        for tp in failed:
            self.offline_partitions.add(tp)
            partition = self.partitions.pop(tp, None)
            if partition is None:
                continue
            partition.leader_id = -1
            for listener in self.role_listeners:
                listener(partition, False)
            self._hw_changed(tp)
        no_dir_left = not self.log_manager.online_dirs
        for failure_listener in self.log_dir_failure_listeners:
            failure_listener(d, no_dir_left)

    def remove_partition(self, tp: TopicPartition, delete: bool) -> None:
        self.partitions.pop(tp, None)
        if delete:
            self.log_manager.delete_log(tp[0], tp[1])

    def get_partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    async def wait_until_leader(self, topic: str, index: int) -> Partition:
        """The local replica once it leads. The group and transaction coordinators load a partition when the
        metadata names this broker its leader, which can come before the LeaderAndIsr that makes the local replica
        one: after a restart, before its log is even opened here (read then, it looked empty and every
        transactional id and group of the partition was forgotten). The caller cancels the wait when the
        leadership goes elsewhere."""
        tp = (topic, index)
        while True:
            partition = self.partitions.get(tp)
            if partition is not None and partition.is_leader:
                return partition
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._leader_waiters.setdefault(tp, []).append(fut)
            try:
                await fut
            finally:
                waiters = [w for w in self._leader_waiters.get(tp, []) if w is not fut]
                if waiters:
                    self._leader_waiters[tp] = waiters
                else:
                    self._leader_waiters.pop(tp, None)

    def _wake_leader_waiters(self, tp: TopicPartition) -> None:
        for fut in self._leader_waiters.get(tp, []):
            if not fut.done():
                fut.set_result(None)

    def leader_partition(self, topic: str, index: int) -> tuple[Partition | None, ErrorCode]:
        partition = self.partitions.get((topic, index))
        if partition is None:
            if (topic, index) in self.offline_partitions:
                return None, ErrorCode.KAFKA_STORAGE_ERROR
            return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if not partition.is_leader:
            return None, ErrorCode.NOT_LEADER_OR_FOLLOWER
        return partition, ErrorCode.NONE

    def _hw_changed(self, tp: TopicPartition) -> None:
        moved = self._hw_moved
        if moved is not None:
            moved[tp] = None
            return
        for listener in self.hw_listeners:
            listener(tp)
        for batch_listener in self.hw_batch_listeners:
            batch_listener([tp])
        if tp in self._hw_waiters:
            self._check_hw_waiters(tp)

    def high_watermark_moves_together(self) -> _MovesTogether:
        """The high-watermark moves inside the block are told to the listeners at its end, in the order they
        happened, each partition once, and to the batch listeners in one call. For a follower's fetch, which
        reports its position in every partition it names before anything is read: told one by one, each of
        n moves re-checked an acks=all request over the n partitions (n calls, each walking its purgatory
        watch list). Nothing runs between the moves and the end of the block (no await), so a listener told
        at the end sees what it would have seen; nested blocks tell at the outermost end. (A plain object with
        ``__enter__``/``__exit__``, not a ``contextlib`` generator: it is entered on every follower fetch.)"""
        return _MovesTogether(self)

    def _tell_moves(self, moved: dict[TopicPartition, None]) -> None:
        tps = list(moved)
        for listener in self.hw_listeners:
            for tp in tps:
                listener(tp)
        for batch_listener in self.hw_batch_listeners:
            batch_listener(tps)
        if self._hw_waiters:
            for tp in tps:
                if tp in self._hw_waiters:
                    self._check_hw_waiters(tp)

    async def wait_for_high_watermark(self, topic: str, index: int, offset: int, timeout_ms: int) -> ErrorCode:
        """For internal acks=all writes: NONE once the HW reached ``offset`` (NOT_ENOUGH_REPLICAS_AFTER_APPEND
        if the ISR is below min.insync.replicas then), NOT_LEADER_OR_FOLLOWER if leadership moved,
        REQUEST_TIMED_OUT after ``timeout_ms``."""
        return (await self.wait_for_high_watermarks([(topic, index, offset)], timeout_ms))[0]

    async def wait_for_high_watermarks(self, waits: list[tuple[str, int, int]], timeout_ms: int
                                       ) -> list[ErrorCode]:
        """``wait_for_high_watermark`` for several (topic, partition, offset) at once, under one time-out: the
        error of each, in order."""
        loop = asyncio.get_running_loop()
        futs: list[asyncio.Future[ErrorCode]] = []
        tps: dict[TopicPartition, None] = {}
        for topic, index, offset in waits:
            tp = (topic, index)
            fut: asyncio.Future[ErrorCode] = loop.create_future()
            self._hw_waiters.setdefault(tp, []).append((offset, fut))
            futs.append(fut)
            tps[tp] = None
        for tp in tps:
            self._check_hw_waiters(tp)

        def expire() -> None:
            for fut in futs:
                if not fut.done():
                    fut.set_result(ErrorCode.REQUEST_TIMED_OUT)

        # Awaited directly: the waiter runs on the loop turn after the HW moved (wait_for(shield(...)) took three
        # more turns, on the path of every transaction state write and marker). A future already done does not
        # suspend. The time-out is a plain timer that answers what is left (asyncio.timeout() cost ~16 us a wait).
        timer = None if all(fut.done() for fut in futs) else loop.call_later(timeout_ms / 1000, expire)
        try:
            for fut in futs:
                await fut
        finally:
            if timer is not None:
                timer.cancel()
            for fut in futs:
                if not fut.done():
                    fut.cancel()
            for tp in tps:
                left = [w for w in self._hw_waiters.get(tp, []) if not w[1].done()]
                if left:
                    self._hw_waiters[tp] = left
                else:
                    self._hw_waiters.pop(tp, None)
        return [fut.result() for fut in futs]

    def _check_hw_waiters(self, tp: TopicPartition) -> None:
        partition = self.partitions.get(tp)
        for offset, fut in self._hw_waiters.get(tp, []):
            if fut.done():
                continue
            if partition is None or not partition.is_leader:
                fut.set_result(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            elif partition.high_watermark >= offset:
                fut.set_result(ErrorCode.NONE if len(partition.isr) >= partition.min_insync_replicas
                               else ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)

    # ------------------------------------------------------------------ data path
    def append(self, topic: str, index: int, records: Any, acks: int = 1) -> AppendResult:
        partition, error = self.leader_partition(topic, index)
        if partition is None:
            return AppendResult(error)
        if records is None or len(records) == 0:
            return AppendResult(ErrorCode.CORRUPT_MESSAGE, message="empty records")
        if acks == -1 and len(partition.isr) < partition.min_insync_replicas:
            return AppendResult(ErrorCode.NOT_ENOUGH_REPLICAS,
                                message=f"The size of the current ISR {partition.isr} is insufficient to satisfy "
                                        f"the min.isr requirement of {partition.min_insync_replicas}")
        hw = partition.high_watermark
        try:
            info = partition.append_as_leader(records)
        except DuplicateSequence as dup:
            return AppendResult(ErrorCode.NONE, dup.first_offset, -1, partition.log.log_start_offset,
                                last_offset=dup.last_offset)
        except StorageError as exc:
            log.info("append to %s-%d refused: %s", topic, index, exc)
            return AppendResult(exc.error_code, message=str(exc),
                                record_errors=list(getattr(exc, "record_errors", [])))
        except OSError as exc:
            self.log_dir_failed(partition.log.dir.parent, exc)
            return AppendResult(ErrorCode.KAFKA_STORAGE_ERROR, message=f"log dir failed: {exc.strerror}")
        if partition.high_watermark != hw:
            self._hw_changed((topic, index))
        else:
            for listener in self.append_listeners:
                listener((topic, index))
        append_time = info.log_append_time if partition.log.config.log_append_time else -1
        return AppendResult(ErrorCode.NONE, info.first_offset, append_time, partition.log.log_start_offset,
                            last_offset=info.last_offset)

    def append_many(self, topic: str, index: int, records: list[Any], acks: list[int]) -> list[AppendResult]:
        """What ``append`` would answer for each of several requests' records for one partition, in request
        order, written with one log append per ``APPEND_MANY_MAX_BYTES`` (or segment.bytes) of them (issue #21:
        pipelined Produce requests of one connection; the records are copied into one buffer, so the copy is
        bounded). The storage append is all or nothing, so when any request's records are refused (a bad batch,
        a duplicate or out-of-order sequence) nothing is written and each request is appended on its own: every
        request gets exactly the answer it would have had alone, and sequences are checked in request order
        either way."""
        results: list[AppendResult] = [_NO_RESULT] * len(records)
        partition, _ = self.leader_partition(topic, index)
        short_isr = partition is not None and len(partition.isr) < partition.min_insync_replicas
        # And no more than a segment holds: a group never makes a segment larger than its requests alone would.
        limit = min(APPEND_MANY_MAX_BYTES, partition.log.config.segment_bytes) if partition is not None else 0
        run: list[int] = []
        size = 0
        for i, r in enumerate(records):
            if partition is None or r is None or len(r) == 0 or (acks[i] == -1 and short_isr):
                results[i] = self.append(topic, index, r, acks[i])  # its error, as alone
                continue
            if run and size + len(r) > limit:
                self._append_run(topic, index, run, records, acks, results)
                run, size = [], 0
            run.append(i)
            size += len(r)
        if run:
            self._append_run(topic, index, run, records, acks, results)
        return results

    def _append_run(self, topic: str, index: int, run: list[int], records: list[Any], acks: list[int],
                    results: list[AppendResult]) -> None:
        """``results[i]`` for the requests ``run`` (in order) of ``append_many``, with one log append."""
        partition, _ = self.leader_partition(topic, index)
        if len(run) == 1 or partition is None:
            for i in run:
                results[i] = self.append(topic, index, records[i], acks[i])
            return
        hw = partition.high_watermark
        try:
            infos = partition.append_many_as_leader([records[i] for i in run])
        except StorageError:
            for i in run:
                results[i] = self.append(topic, index, records[i], acks[i])
            return
        except OSError as exc:
            self.log_dir_failed(partition.log.dir.parent, exc)
            for i in run:
                results[i] = AppendResult(ErrorCode.KAFKA_STORAGE_ERROR, message=f"log dir failed: {exc.strerror}")
            return
        if partition.high_watermark != hw:
            self._hw_changed((topic, index))
        else:
            for listener in self.append_listeners:
                listener((topic, index))
        append_time = partition.log.config.log_append_time
        for i, info in zip(run, infos):
            results[i] = AppendResult(ErrorCode.NONE, info.first_offset, info.log_append_time if append_time else -1,
                                      info.log_start_offset, last_offset=info.last_offset)

    def append_marker(self, topic: str, index: int, producer_id: int, producer_epoch: int, committed: bool,
                      coordinator_epoch: int) -> AppendResult:
        """WriteTxnMarkers on the leader: append a COMMIT/ABORT control batch (acks=all rules: the ISR must
        satisfy min.insync.replicas). The caller waits for the high watermark to pass ``last_offset``."""
        partition, error = self.leader_partition(topic, index)
        if partition is None:
            return AppendResult(error)
        if len(partition.isr) < partition.min_insync_replicas:
            return AppendResult(ErrorCode.NOT_ENOUGH_REPLICAS)
        hw = partition.high_watermark
        try:
            info = partition.log.append_marker(producer_id, producer_epoch, committed, coordinator_epoch,
                                               partition.leader_epoch)
        except StorageError as exc:
            log.info("transaction marker for %s-%d refused: %s", topic, index, exc)
            return AppendResult(exc.error_code, message=str(exc))
        except OSError as exc:
            self.log_dir_failed(partition.log.dir.parent, exc)
            return AppendResult(ErrorCode.KAFKA_STORAGE_ERROR, message=f"log dir failed: {exc.strerror}")
        partition.maybe_advance_high_watermark()
        if partition.high_watermark != hw:
            self._hw_changed((topic, index))
        else:
            for listener in self.append_listeners:
                listener((topic, index))
        return AppendResult(ErrorCode.NONE, info.first_offset, -1, partition.log.log_start_offset,
                            last_offset=info.last_offset)

    def transaction_marker_written(self, topic: str, index: int, producer_id: int, committed: bool) -> None:
        for listener in self.txn_marker_listeners:
            try:
                listener.on_transaction_marker(topic, index, producer_id, committed)
            except Exception:
                log.exception("transaction marker listener %r failed for %s-%d", listener, topic, index)
    def log_start_moved(self, topic: str, index: int) -> None:
        """DeleteRecords moved the leader's log start offset: the partition's fetch answers change (followers
        learn it from their next answer and then report their own, which DeleteRecords waits for)."""
        for listener in self.append_listeners:
            listener((topic, index))

    def isr_of(self, topic: str, index: int) -> list[int]:
        partition = self.partitions.get((topic, index))
        return partition.isr if partition is not None else []

    def may_have_news(self, topic: str, index: int, fetch_offset: int, follower: bool, high_watermark_sent: int,
                      log_start_sent: int, current_leader_epoch: int) -> bool:
        """Whether a session fetch must read the partition: data past ``fetch_offset`` (the log end for a
        follower, the HW for a consumer), a HW or log start offset other than the last answer's, or an error."""
        partition = self.partitions.get((topic, index))
        if partition is None or not partition.is_leader or current_leader_epoch not in (-1, partition.leader_epoch):
            return True
        log_ = partition.log
        hw = partition.high_watermark
        return (fetch_offset < (log_.log_end_offset if follower else hw) or hw != high_watermark_sent
                or log_.log_start_offset != log_start_sent)

    def follower_caught_up(self, topic: str, index: int, fetch_offset: int, current_leader_epoch: int) -> bool:
        """Whether a follower's fetch from ``fetch_offset`` would read nothing and no error here: the partition is
        led here in that epoch (-1: any), its log ends at ``fetch_offset`` and starts at or below it."""
        partition = self.partitions.get((topic, index))
        if partition is None or not partition.is_leader or current_leader_epoch not in (-1, partition.leader_epoch):
            return False
        log_ = partition.log
        return log_.log_end_offset == fetch_offset and log_.log_start_offset <= fetch_offset

    def read(self, topic: str, index: int, offset: int, max_bytes: int, *, consumer: bool,
             min_one: bool = True, current_leader_epoch: int = -1, read_committed: bool = False) -> ReadResult:
        partition = self.partitions.get((topic, index))
        if partition is None:
            return ReadResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if not partition.is_leader:
            return ReadResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if current_leader_epoch >= 0 and current_leader_epoch != partition.leader_epoch:
            return ReadResult(ErrorCode.FENCED_LEADER_EPOCH if current_leader_epoch < partition.leader_epoch
                              else ErrorCode.UNKNOWN_LEADER_EPOCH)
        log_ = partition.log
        hw = partition.high_watermark
        leo = log_.log_end_offset
        result = ReadResult(ErrorCode.NONE, hw, log_.log_start_offset, leo, None, 0,
                            log_.last_stable_offset if consumer else -1)
        # Consumers read only below the high watermark (read_committed: below the last stable offset): a fetch at
        # or above it is an empty answer, not an error, as long as it is within the log. Followers read up to
        # the log end offset.
        upper = (result.last_stable_offset if read_committed else hw) if consumer else None
        if read_committed:
            result.aborted_transactions = []
        if offset == leo or (upper is not None and upper <= offset <= leo):
            return result
        try:
            data = log_.read(offset, max_bytes, max_offset=upper, min_one=min_one)
        except OffsetOutOfRangeError:
            result.error = ErrorCode.OFFSET_OUT_OF_RANGE
            return result
        except StorageError as exc:
            result.error = exc.error_code
            return result
        except OSError as exc:
            self.log_dir_failed(log_.dir.parent, exc)
            result.error = ErrorCode.KAFKA_STORAGE_ERROR
            return result
        result.records = RecordsView(data.regions, data.size)
        result.size = data.size
        if read_committed and upper is not None and data.size:
            result.aborted_transactions = log_.aborted_txns_for(offset, data, upper)
        return result

    # ------------------------------------------------------------------ leader: followers and the ISR
    def update_follower(self, topic: str, index: int, replica_id: int, fetch_offset: int,
                        log_start_offset: int = -1, current_leader_epoch: int = -1, now_ms: int = -1) -> None:
        """A follower's fetch: its log end offset (and log start offset), caught-up time, the HW, and an ISR
        expansion when due. ``now_ms``: the clock's time, when the caller read it once for many partitions."""
        partition = self.partitions.get((topic, index))
        if partition is None or partition.leader_id != self.broker_id:
            return
        if current_leader_epoch >= 0 and current_leader_epoch != partition.leader_epoch:
            # Another epoch's fetch is fenced by the read (FENCED_/UNKNOWN_LEADER_EPOCH) and says nothing about
            # this epoch (as Kafka: the epoch is checked before the follower's state is updated). Without this, a
            # broker that had just done a controlled shutdown, its fetch from before its LeaderAndIsr still in
            # flight, was put back into the ISR it had been taken out of.
            return
        follower = partition.followers.get(replica_id)
        old_start = follower.log_start_offset if follower is not None else -1
        if partition.update_follower(replica_id, fetch_offset, now_ms if now_ms >= 0 else self.clock.time_ms(),
                                     log_start_offset):
            self._hw_changed((topic, index))
        if log_start_offset > old_start and self.low_watermark_listeners:
            for listener in self.low_watermark_listeners:
                listener((topic, index))
        if replica_id not in partition.isr:  # an ISR member needs no expansion
            expanded = partition.isr_with(replica_id)
            if expanded is not None:
                self._change_isr(partition, expanded)

    def maybe_shrink_isrs(self) -> None:
        """Leaves out of the ISR the followers that fell behind (run every replica.lag.time.max.ms / 2)."""
        now = self.clock.time_ms()
        for partition in list(self.partitions.values()):
            shrink = partition.isr_without_lagging(now, self.replica_lag_time_max_ms)
            if shrink is not None:
                lagging, new_isr = shrink
                log.info("%s-%d: replicas %s are out of sync (lag > %d ms); shrinking the ISR %s", partition.topic,
                         partition.index, lagging, self.replica_lag_time_max_ms, partition.isr)
                self._change_isr(partition, new_isr)

    def _change_isr(self, partition: Partition, new_isr: list[int]) -> None:
        if self.isr_writer is None or not partition.begin_isr_change(new_isr):
            return
        task = asyncio.get_running_loop().create_task(self._write_isr(partition, new_isr),
                                                      name=f"isr-{partition.topic}-{partition.index}")
        self._isr_tasks.add(task)
        task.add_done_callback(self._isr_tasks.discard)

    async def _write_isr(self, partition: Partition, new_isr: list[int]) -> None:
        assert self.isr_writer is not None
        epoch, old_isr = partition.leader_epoch, partition.isr
        try:
            written = await self.isr_writer(partition, new_isr)
        except Exception as exc:
            log.warning("%s-%d: writing the ISR %s failed: %r", partition.topic, partition.index, new_isr, exc)
            written = None
        outcome = partition.finish_isr_change(new_isr, epoch, written)
        if outcome is IsrOutcome.SUPERSEDED:
            return
        if outcome is IsrOutcome.CONFLICT:
            log.info("%s-%d: the partition state changed under us (zk version %d); waiting for the controller",
                     partition.topic, partition.index, partition.zk_version)
            return
        if outcome is IsrOutcome.DIVERGED:
            log.info("%s-%d: ZooKeeper holds ISR %s (zk version %d); building on it", partition.topic,
                     partition.index, partition.isr, partition.zk_version)
            self._hw_changed((partition.topic, partition.index))
            return
        for listener in self.isr_change_listeners:
            listener(len(new_isr) < len(old_isr))
        log.info("%s-%d: ISR %s -> %s (zk version %d)", partition.topic, partition.index, old_isr, new_isr,
                 partition.zk_version)
        partition.maybe_advance_high_watermark()
        self._hw_changed((partition.topic, partition.index))

    # ------------------------------------------------------------------ checkpoints and shutdown
    def high_watermarks(self) -> dict[TopicPartition, int]:
        return {tp: p.high_watermark for tp, p in self.partitions.items()} | self.checkpointed_hw

    def checkpoint_high_watermarks(self) -> None:
        """Writes every log dir's high-watermark checkpoint now, on this thread (at shutdown)."""
        self.log_manager.write_high_watermarks(self.high_watermarks())

    async def checkpoint_high_watermarks_in_background(self) -> None:
        """The periodic checkpoint (``replica.high.watermark.checkpoint.interval.ms``): the event loop only takes
        the snapshot; the files are formatted, written and fsynced on a worker thread, and not at all when no
        entry changed since the last one. In the loop (two fsyncs included) it paused every broker of a
        10,000-partition cluster ~125 ms every 5 s on a loaded machine, failovers included."""
        files = self.log_manager.high_watermark_files(self.high_watermarks())
        if files == self._last_hw_files:
            return
        write = self.log_manager.offset_files_writer(files)
        await asyncio.get_running_loop().run_in_executor(None, write)
        self._last_hw_files = files

    async def shutdown(self) -> None:
        await cancel_and_wait(list(self._isr_tasks))

    # ------------------------------------------------------------------ metrics
    def under_replicated_count(self) -> int:
        return sum(1 for p in self.partitions.values() if p.is_leader and len(p.isr) < len(p.replicas))

    def under_min_isr_count(self) -> int:
        """Partitions led here where acks=all is refused before append (the leader's own in-memory ISR)."""
        return sum(1 for p in self.partitions.values() if p.is_leader and len(p.isr) < p.min_insync_replicas)

    def leader_count(self) -> int:
        return sum(1 for p in self.partitions.values() if p.is_leader)


class _MovesTogether:
    """``ReplicaManager.high_watermark_moves_together``'s block: the outermost one collects the moves and tells
    them at its end."""

    __slots__ = ("_rm", "_moved")

    def __init__(self, rm: ReplicaManager) -> None:
        self._rm = rm
        self._moved: dict[TopicPartition, None] | None = None

    def __enter__(self) -> None:
        rm = self._rm
        if rm._hw_moved is None:
            self._moved = rm._hw_moved = {}

    def __exit__(self, *exc: object) -> None:
        moved = self._moved
        if moved is not None:
            self._moved = None
            rm = self._rm
            rm._hw_moved = None
            if moved:
                rm._tell_moves(moved)
