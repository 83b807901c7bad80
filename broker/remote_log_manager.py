"""The remote log manager (Kafka's RemoteLogManager): per tiered partition led here, every
``remote.log.manager.task.interval.ms``

1. once per leadership, catch up on ``__remote_log_metadata`` and finish what a dead leader left: copies that
   started and never finished, and deletes that started, are deleted (their objects and their metadata);
2. copy rolled segments below the high watermark and the last stable offset, oldest first, each as COPY_SEGMENT_STARTED -> objects ->
   COPY_SEGMENT_FINISHED, throttled to ``remote.log.manager.copy.max.bytes.per.second``;
3. tell the log how far it is copied (its local retention then deletes copied segments past
   ``local.retention.ms/bytes``, never an uncopied one);
4. delete remote segments past the total retention (``retention.ms``, ``retention.bytes`` over remote plus
   uncopied local bytes) or below the log start offset (DeleteRecords), then move the log start offset up.

Remote reads (fetches below the local log start offset) run on a pool of ``remote.log.reader.threads`` threads,
throttled to ``remote.log.manager.fetch.max.bytes.per.second``. The storage manager's calls block, so each runs in
a thread; the event loop never waits on remote storage.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from moldau.broker.apis.context import TopicDeps
from moldau.broker.config import BrokerConfig
from moldau.broker.metadata import StandaloneMetadata
from moldau.broker.partition import Partition
from moldau.broker.remote_log_metadata import RemoteLogMetadataManager, TopicBasedRemoteLogMetadataManager
from moldau.broker.topics import TopicCreationError, create_topic, plan_topic
from moldau.protocol.errors import ErrorCode
from moldau.protocol.types import TopicPartition
from moldau.storage.config import Clock
from moldau.storage.remote.api import (
    IndexType,
    RemoteLogSegmentMetadata,
    RemoteStorageError,
    RemoteStorageManager,
    SegmentState,
    load_remote_storage_manager,
    rsm_configs,
)
from moldau.storage.remote.metadata import METADATA_TOPIC, SegmentUpdate
from moldau.storage.remote.reader import (
    IndexCache,
    collect_aborted_txns,
    offset_for_timestamp,
    read_span,
)
from moldau.storage.remote.segments import segment_data, segment_metadata
from moldau.storage.txn_index import AbortedTxn
from moldau.tasks import cancel_and_wait

log = logging.getLogger(__name__)

MAX_BACKOFF_MS = 30_000  # longest pause of a partition's tasks after failures in a row
UNCLAIMED_READ_S = 60.0  # how long a finished remote read waits for a fetch of its position to take it


class Throttle:
    """A byte-rate bound: ``await acquire(n)`` returns once sending n more bytes keeps the rate."""

    def __init__(self, bytes_per_second: int) -> None:
        self.rate = bytes_per_second
        self._free_at = 0.0

    def delay(self, n: int, now: float) -> float:
        start = max(now, self._free_at)
        self._free_at = start + n / self.rate
        return start - now

    async def acquire(self, n: int) -> None:
        wait = self.delay(n, time.monotonic())
        if wait > 0:
            await asyncio.sleep(wait)


@dataclass(slots=True)
class RemoteRead:
    """The answer of a remote read: batches (possibly empty) or an error code."""

    error: ErrorCode
    records: bytes = b""
    aborted: list[AbortedTxn] | None = None  # read_committed: the aborted transactions of the range
    next_offset: int = -1  # the offset after the last batch of ``records``


@dataclass(slots=True)
class TieringStats:
    copied_segments: int = 0
    copied_bytes: int = 0
    copy_errors: int = 0
    deleted_segments: int = 0
    fetched_bytes: int = 0
    fetch_errors: int = 0
    fetches: int = 0
    fetch_seconds: float = 0.0  # summed remote-read latency (sum/count: the mean)


class RemoteLogManager:
    def __init__(self, broker_id: int, rsm: RemoteStorageManager, metadata: RemoteLogMetadataManager,
                 partitions: dict[TopicPartition, Partition], clock: Clock, *, task_interval_ms: int,
                 reader_threads: int, copy_bytes_per_second: int, fetch_bytes_per_second: int,
                 fetch_max_wait_ms: int = 500) -> None:
        self.broker_id = broker_id
        self.rsm = rsm
        self.metadata = metadata
        self.partitions = partitions
        self.clock = clock
        self.task_interval_ms = task_interval_ms
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self._read_ready: set[TopicPartition] = set()
        # Remote reads by (topic, partition, offset, max bytes, read_committed): a fetch that gave up waiting
        # leaves its read here, and the client's next fetch of the same position takes its result (an error
        # included) instead of starting another read behind it.
        self._reads: dict[tuple[str, int, int, int, bool], asyncio.Task[RemoteRead]] = {}
        self.copy_throttle = Throttle(copy_bytes_per_second)
        self.fetch_throttle = Throttle(fetch_bytes_per_second)
        self.stats = TieringStats()
        self._readers = ThreadPoolExecutor(reader_threads, thread_name_prefix="remote-log-reader")
        self._copier = ThreadPoolExecutor(1, thread_name_prefix="remote-log-copier")
        self._indexes = IndexCache()
        # Transaction indexes: mostly empty, one per remote segment, each read by every read_committed remote read
        # before it (the search runs to the end without transactions): room for thousands.
        self._txn_indexes = IndexCache(capacity=100_000, max_bytes=64 * 1024 * 1024, kind=IndexType.TRANSACTION)
        self._synced: dict[TopicPartition, int] = {}  # partition -> leader epoch it caught up for
        self._failures: dict[TopicPartition, tuple[int, float]] = {}  # (failures in a row, retry not before)
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Starts the metadata manager (retrying until the cluster can take its topic) and then the tasks."""
        self._task = asyncio.get_running_loop().create_task(self._start_and_run())

    async def _start_and_run(self) -> None:
        while True:
            try:
                await self.metadata.start()
                break
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("remote log metadata manager not started yet: %r", exc)
                await self.metadata.close()
                await asyncio.sleep(1)
        log.info("remote log manager started (task interval %d ms)", self.task_interval_ms)
        await self._run()

    async def close(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])
        for read in list(self._reads.values()):
            read.cancel()
        await self.metadata.close()
        self._readers.shutdown(wait=False, cancel_futures=True)
        self._copier.shutdown(wait=False, cancel_futures=True)
        self.rsm.close()

    def trigger(self) -> None:
        """Run the tasks now (tests and tools; the interval timer does it otherwise)."""
        self._wake.set()

    async def _run(self) -> None:
        while True:
            for tp, partition in list(self.partitions.items()):
                if not partition.log.config.remote_storage_enable:
                    continue
                if not partition.is_leader:  # a follower deletes locally what its leader copied
                    self._synced.pop(tp, None)
                    partition.log.remote_copied_offset = self.metadata.cache.highest_copied_offset(*tp)
                    continue
                failures, not_before = self._failures.get(tp, (0, 0.0))
                if time.monotonic() < not_before:
                    continue
                try:
                    await self.run_partition(tp, partition)
                    self._failures.pop(tp, None)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # remote storage down, metadata not writable: retried with backoff
                    self.stats.copy_errors += 1
                    delay = min(self.task_interval_ms * 2 ** failures, MAX_BACKOFF_MS) / 1000
                    self._failures[tp] = (failures + 1, time.monotonic() + delay)
                    log.warning("tiered storage task of %s-%d failed (retry in %.1f s): %r", tp[0], tp[1], delay,
                                exc)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.task_interval_ms / 1000):  # not wait_for: see moldau.tasks
                    await self._wake.wait()
            self._wake.clear()

    # ------------------------------------------------------------------ leader tasks
    async def run_partition(self, tp: TopicPartition, partition: Partition) -> None:
        epoch = partition.leader_epoch
        if self._synced.get(tp) != epoch:
            if not await self.metadata.wait_caught_up(*tp):
                log.info("%s-%d: remote log metadata not caught up yet", *tp)
                return
            self._synced[tp] = epoch
        cache = self.metadata.cache
        remote_start = cache.log_start_offset(*tp)
        log_ = partition.log
        if remote_start is not None and log_.log_start_offset < remote_start <= log_.local_log_start_offset:
            # The log start offset checkpoint lags the remote deletions (or is gone): the remote log start wins.
            partition.advance_log_start_offset(min(remote_start, partition.high_watermark))
        for m in cache.unfinished_segments(*tp) + cache.redundant_segments(*tp):
            log.info("%s-%d: deleting remote segment %s left in state %s", tp[0], tp[1], m.segment_id, m.state.name)
            await self._delete_remote(m)
        partition.log.remote_copied_offset = cache.highest_copied_offset(*tp)
        await self._copy_segments(tp, partition, epoch)
        await self._enforce_remote_retention(tp, partition)
        partition.log.delete_expired_segments(self.clock.time_ms())

    def _still_leading(self, partition: Partition, epoch: int) -> bool:
        return partition.is_leader and partition.leader_epoch == epoch

    async def _copy_segments(self, tp: TopicPartition, partition: Partition, epoch: int) -> None:
        log_ = partition.log
        loop = asyncio.get_running_loop()
        for seg, end in log_.sealed_segments():
            # the bound first: a segment already copied is not opened (after a clean restart most are unopened)
            if end - 1 <= log_.remote_copied_offset or seg.size == 0 or seg.next_offset - 1 <= log_.remote_copied_offset:
                continue
            # Below the high watermark and the last stable offset: no open transaction is copied.
            upper = min(partition.high_watermark, log_.last_stable_offset)
            if seg.next_offset > upper or not self._still_leading(partition, epoch):
                return
            meta = segment_metadata(log_, seg, self.broker_id, self.clock.time_ms())
            data = segment_data(log_, seg)
            await self.metadata.publish(meta)
            await self.copy_throttle.acquire(seg.size)
            try:
                await loop.run_in_executor(self._copier, self.rsm.copy_log_segment_data, meta, data)
            except RemoteStorageError:
                self.stats.copy_errors += 1
                raise  # the STARTED record stays: the next run deletes the attempt and copies again
            await self.metadata.publish(SegmentUpdate(meta.segment_id, self.broker_id, self.clock.time_ms(),
                                                      SegmentState.COPY_SEGMENT_FINISHED))
            log_.remote_copied_offset = max(log_.remote_copied_offset, meta.end_offset)
            self.stats.copied_segments += 1
            self.stats.copied_bytes += seg.size
            log.info("%s-%d: copied segment [%d, %d] (%d bytes) to remote storage", tp[0], tp[1],
                     meta.start_offset, meta.end_offset, seg.size)

    async def _delete_remote(self, m: RemoteLogSegmentMetadata) -> None:
        if m.state != SegmentState.DELETE_SEGMENT_STARTED:
            await self.metadata.publish(SegmentUpdate(m.segment_id, self.broker_id, self.clock.time_ms(),
                                                      SegmentState.DELETE_SEGMENT_STARTED))
        await asyncio.get_running_loop().run_in_executor(self._copier, self.rsm.delete_log_segment_data, m)
        await self.metadata.publish(SegmentUpdate(m.segment_id, self.broker_id, self.clock.time_ms(),
                                                  SegmentState.DELETE_SEGMENT_FINISHED))
        self.stats.deleted_segments += 1

    async def _enforce_remote_retention(self, tp: TopicPartition, partition: Partition) -> None:
        log_ = partition.log
        cfg = log_.config
        chain = self.metadata.cache.copied_segments(*tp)
        if not chain:
            return
        now = self.clock.time_ms()
        uncopied_local = sum(s.size for s in log_.segments if s.base_offset > log_.remote_copied_offset)
        excess = (sum(m.segment_size_in_bytes for m in chain) + uncopied_local - cfg.retention_bytes
                  if cfg.delete_enabled and cfg.retention_bytes >= 0 else -1)
        doomed: list[RemoteLogSegmentMetadata] = []
        for m in chain:
            below_start = m.end_offset < log_.log_start_offset
            too_old = cfg.delete_enabled and cfg.retention_ms >= 0 and now - m.max_timestamp_ms > cfg.retention_ms
            too_big = excess - m.segment_size_in_bytes >= 0
            if not (below_start or too_old or too_big):
                break
            excess -= m.segment_size_in_bytes
            doomed.append(m)
        for m in doomed:
            await self._delete_remote(m)
            log.info("%s-%d: deleted remote segment [%d, %d] past retention", tp[0], tp[1], m.start_offset,
                     m.end_offset)
        if doomed:
            rest = self.metadata.cache.copied_segments(*tp)
            # Past the deleted segments (local copies of them go too: they are past the total retention).
            new_start = rest[0].start_offset if rest else doomed[-1].end_offset + 1
            if new_start > log_.log_start_offset:
                partition.advance_log_start_offset(min(new_start, partition.high_watermark))

    def copy_lag(self) -> list[tuple[str, int, int, int]]:
        """(topic, partition, segments, bytes) rolled below the high watermark and not yet in remote storage,
        per tiered partition led here (read on the metrics scrape thread: lists are snapshotted)."""
        out = []
        for (topic, index), p in list(self.partitions.items()):
            if not (p.is_leader and p.log.config.remote_storage_enable):
                continue
            copied, hw = p.log.remote_copied_offset, p.high_watermark
            waiting = [seg for seg, end in p.log.sealed_segments()
                       if end - 1 > copied and seg.next_offset - 1 > copied and seg.next_offset <= hw]
            out.append((topic, index, len(waiting), sum(seg.size for seg in waiting)))
        return out

    # ------------------------------------------------------------------ reads
    async def offset_for_timestamp(self, topic: str, partition: int, timestamp: int,
                                   log_start_offset: int) -> tuple[int, int] | None:
        """ListOffsets by timestamp over the remote segments: the first record at or above the log start offset
        with a timestamp >= ``timestamp`` (None: not in remote storage, look locally)."""
        for meta in self.metadata.cache.copied_segments(topic, partition):
            if meta.end_offset < log_start_offset or meta.max_timestamp_ms < timestamp:
                continue
            found = await asyncio.get_running_loop().run_in_executor(
                self._readers, offset_for_timestamp, self.rsm, meta, timestamp, log_start_offset, self._indexes)
            if found is not None:
                return found
        return None

    async def read(self, topic: str, partition: int, offset: int, max_bytes: int,
                   read_committed: bool = False) -> RemoteRead:
        """Batches from remote storage at ``offset`` (below the local log start offset); with ``read_committed``
        also the aborted transactions they overlap (remote transaction indexes, then the local log's).

        Cancelling the caller (the fetch stopped waiting after ``remote.fetch.max.wait.ms``) leaves the read
        running: the next read of the same position joins it, so a store that hangs ends in one answer (the
        store's error once its client times out, KAFKA_STORAGE_ERROR) rather than a new read per fetch, each
        answered empty before it can fail."""
        local = self.partitions.get((topic, partition))
        if local is not None and offset < local.log.log_start_offset:  # also for a read finished before
            return RemoteRead(ErrorCode.OFFSET_OUT_OF_RANGE)
        key = (topic, partition, offset, max_bytes, read_committed)
        task = self._start_read(key)
        result = await asyncio.shield(task)
        self._forget_read(key, task)
        if result.error == ErrorCode.NONE and result.records:
            # Read ahead: a consumer catching up asks for the next position at once; its fetch then finds that
            # read running or done instead of waiting a whole store round trip (and at most one is ahead).
            following = result.next_offset
            if local is not None and following < local.log.local_log_start_offset:
                self._start_read((topic, partition, following, max_bytes, read_committed))
        return result

    def _start_read(self, key: tuple[str, int, int, int, bool]) -> asyncio.Task[RemoteRead]:
        task = self._reads.get(key)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._read(*key))
            self._reads[key] = task
            # Nobody came back for it (the consumer moved or left): forget it after a while.
            task.add_done_callback(lambda t: asyncio.get_running_loop().call_later(
                UNCLAIMED_READ_S, self._forget_read, key, t))
        return task

    def _forget_read(self, key: tuple[str, int, int, int, bool], task: asyncio.Task[RemoteRead]) -> None:
        if self._reads.get(key) is task:
            del self._reads[key]

    async def _read(self, topic: str, partition: int, offset: int, max_bytes: int,
                    read_committed: bool) -> RemoteRead:
        tp = (topic, partition)
        local = self.partitions.get(tp)
        if local is not None and offset < local.log.log_start_offset:
            return RemoteRead(ErrorCode.OFFSET_OUT_OF_RANGE)
        cache = self.metadata.cache
        meta = cache.segment_for_offset(topic, partition, offset)
        if meta is None and tp not in self._read_ready:
            # The metadata must be replayed to its end before "no such remote offset" is an answer (once per
            # partition). A segment found is read at once: waiting cost a first catch-up read ~0.25 s, the end
            # offsets' request queued behind the metadata consumer's long-polling fetch.
            if not await self.metadata.wait_caught_up(topic, partition, self.fetch_max_wait_ms / 1000):
                return RemoteRead(ErrorCode.NONE)
            self._read_ready.add(tp)
            meta = cache.segment_for_offset(topic, partition, offset)
        if meta is None:
            return RemoteRead(ErrorCode.OFFSET_OUT_OF_RANGE)
        chain = [m for m in cache.copied_segments(topic, partition) if m.end_offset >= meta.start_offset]
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        try:
            data, upper = await loop.run_in_executor(self._readers, read_span, self.rsm, chain, offset, max_bytes,
                                                     self._indexes)
        except Exception as exc:  # the store failed, or its data does not parse: retriable for the client
            self.stats.fetch_errors += 1
            log.warning("remote read of %s-%d at %d failed: %r", topic, partition, offset, exc)
            return RemoteRead(ErrorCode.KAFKA_STORAGE_ERROR)
        aborted: list[AbortedTxn] | None = None
        if read_committed:
            try:
                found, complete = await loop.run_in_executor(self._readers, collect_aborted_txns, self.rsm, chain,
                                                             offset, upper, self._txn_indexes)
            except Exception as exc:
                self.stats.fetch_errors += 1
                log.warning("remote transaction index of %s-%d failed: %r", topic, partition, exc)
                return RemoteRead(ErrorCode.KAFKA_STORAGE_ERROR)
            if not complete and local is not None:
                found += local.log.collect_aborted_txns(max(offset, local.log.local_log_start_offset), upper)
            aborted = found
        self.stats.fetches += 1
        self.stats.fetch_seconds += time.monotonic() - started
        await self.fetch_throttle.acquire(len(data))
        self.stats.fetched_bytes += len(data)
        return RemoteRead(ErrorCode.NONE, data, aborted, upper)


def build_remote_log_manager(config: BrokerConfig, broker_id: int, partitions: dict[TopicPartition, Partition],
                             clock: Clock, bootstrap: str, topics: TopicDeps) -> RemoteLogManager | None:
    """The remote log manager of ``remote.log.storage.system.enable`` (None when off): loads the storage manager
    (``rsm.config.*`` configure it) and the metadata manager, a client of this cluster at ``bootstrap``."""
    if not config.get("remote.log.storage.system.enable"):
        return None
    rsm = load_remote_storage_manager(config.get("remote.log.storage.manager.class.name"),
                                      rsm_configs(config.originals))
    num_partitions = int(config.get("rlmm.config.remote.log.metadata.topic.num.partitions"))

    async def ensure_topic() -> None:
        if topics.metadata.topic(METADATA_TOPIC) is not None:
            return
        live = len(topics.metadata.live_brokers())
        replication = int(config.get("rlmm.config.remote.log.metadata.topic.replication.factor"))
        if isinstance(topics.metadata, StandaloneMetadata):
            replication = min(replication, live)  # one broker: its own metadata
        elif live < replication:  # as Kafka: wait for the brokers rather than create it under-replicated
            raise RuntimeError(f"{METADATA_TOPIC} needs {replication} live brokers, {live} registered")
        configs = {"cleanup.policy": "delete", "retention.ms": "-1"}
        try:
            plan = plan_topic(topics, METADATA_TOPIC, num_partitions, replication, [], configs)
            await create_topic(topics, METADATA_TOPIC, plan, configs, timeout_ms=30_000)
        except TopicCreationError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
        log.info("created %s with %d partitions, replication factor %d", METADATA_TOPIC, num_partitions,
                 replication)

    metadata = TopicBasedRemoteLogMetadataManager(bootstrap, num_partitions, ensure_topic)
    return RemoteLogManager(
        broker_id, rsm, metadata, partitions, clock,
        task_interval_ms=int(config.get("remote.log.manager.task.interval.ms")),
        reader_threads=int(config.get("remote.log.reader.threads")),
        copy_bytes_per_second=int(config.get("remote.log.manager.copy.max.bytes.per.second")),
        fetch_bytes_per_second=int(config.get("remote.log.manager.fetch.max.bytes.per.second")),
        fetch_max_wait_ms=int(config.get("remote.fetch.max.wait.ms")))
