"""All partition logs of a broker across its ``log.dirs``.

Per log dir: a ``.lock`` file (flock, so two brokers cannot share a directory), the three offset checkpoints and,
after a clean shutdown, a ``.kafka_cleanshutdown`` marker. The marker lets the next start skip recovery; it is
removed as soon as the directory is loaded, so a crash afterwards is detected.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

from moldau.storage.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CheckpointError,
    TopicPartition,
    can_sync_filesystem,
    fsync_dir,
    read_offsets,
    sync_filesystem,
    write_offsets,
)
from moldau.storage.config import Clock, LogConfig, SystemClock
from moldau.storage.errors import LogDirLockedError, StorageError
from moldau.storage.load_stats import LoadStats
from moldau.storage.log import Log, parse_topic_partition

logger = logging.getLogger(__name__)


class ShutdownProgress:
    """How far a clean shutdown's log close has come, for the broker's exit watchdog (written by the closing
    thread, read by the watchdog's: plain attributes, each read or written whole)."""

    def __init__(self) -> None:
        self.logs_closed = -1  # -1: the log close has not begun
        self.logs_total = 0
        self.syncing = False  # inside the file-system sync, which the process could not exit from anyway

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
DELETE_DIR_SUFFIX = "-delete"
EPOCH_CHECKPOINT_DELAY_MS = 10_000  # a changed leader-epoch checkpoint is written this long after (take_rolled)
# At most this many leader-epoch checkpoints per take_rolled (the broker's flush task: once a second). The first
# records in 10,000 new partitions change every replica's epochs at once; written in one pass, 10,000 files per
# broker (100-250 us of CPU each) took both cores from the consumers and replication of the next seconds.
EPOCH_CHECKPOINTS_PER_PASS = 1_000
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


class LogManager:
    def __init__(
        self, log_dirs: Sequence[Path | str], default_config: LogConfig, clock: Clock | None = None,
        recovery_threads: int = 1,
    ) -> None:
        self.recovery_threads = recovery_threads  # num.recovery.threads.per.data.dir
        if not log_dirs:
            raise ValueError("at least one log dir is required")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.default_config = default_config
        self.clock: Clock = clock if clock is not None else SystemClock()
        self._logs: dict[TopicPartition, Log] = {}
        # Logs per dir, kept as logs come and go: placing a new log must not walk all of them (10,000 partitions
        # created by one LeaderAndIsr made that quadratic).
        self._dir_counts: dict[Path, int] = {}
        self.load_stats = LoadStats()
        self._rolled: dict[TopicPartition, Log] = {}  # logs with segments finished by a roll and not yet flushed
        # Logs whose leader-epoch checkpoint changed, with when it first did (see take_rolled)
        self._epochs_changed: dict[TopicPartition, tuple[Log, int]] = {}
        # High-watermark checkpoint writes, possibly on worker threads: one at a time, newest snapshot wins.
        self._offsets_lock = threading.Lock()
        self._offsets_taken = 0
        self._offsets_written: dict[Path, int] = {}
        # Log dirs that failed (an I/O error: disk full, gone, read-only): never written again until a restart.
        self.offline_dirs: set[Path] = set()
        self._locks: list[int] = []
        self._loaded = False
        try:
            for d in self.log_dirs:
                d.mkdir(parents=True, exist_ok=True)
                self._locks.append(self._lock(d))
        except BaseException:
            self._release_locks()
            raise

    @staticmethod
    def _lock(d: Path) -> int:
        fd = os.open(d / LOCK_FILE, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise LogDirLockedError(f"{d} is in use by another broker") from None
            raise
        return fd

    def _release_locks(self) -> None:
        for fd in self._locks:
            os.close(fd)  # closing the descriptor drops the flock
        self._locks = []

    # --- loading ---------------------------------------------------------------------------------------------

    def load(self, topic_configs: Mapping[str, LogConfig] | None = None) -> None:
        """Opens every ``<topic>-<partition>`` directory. Without a clean-shutdown marker, segments from the
        recovery point on are re-validated (and torn tails truncated). ``-delete`` directories are removed."""
        if self._loaded:
            return
        topic_configs = topic_configs or {}
        stats = self.load_stats
        started = time.perf_counter()
        pending: dict[TopicPartition, Callable[[], Log]] = {}
        for d in self.log_dirs:
            marker = d / CLEAN_SHUTDOWN_FILE
            clean = marker.exists()
            # a brand-new dir (no partition, no checkpoint yet) was never shut down at all: say so, not "unclean"
            fresh = not clean and not (d / RECOVERY_POINT_CHECKPOINT).exists() and not any(
                child.is_dir() for child in d.iterdir())
            checkpoints_started = time.perf_counter()
            recovery_points = self._read_checkpoint(d / RECOVERY_POINT_CHECKPOINT)
            start_offsets = self._read_checkpoint(d / LOG_START_OFFSET_CHECKPOINT)
            stats.checkpoints_s += time.perf_counter() - checkpoints_started
            for child in sorted(d.iterdir()):
                if not child.is_dir():
                    continue
                if child.name.endswith(DELETE_DIR_SUFFIX):
                    logger.info("removing %s (deleted before the last shutdown)", child)
                    shutil.rmtree(child, ignore_errors=True)
                    continue
                try:
                    tp = parse_topic_partition(child.name)
                except ValueError:
                    logger.warning("ignoring %s: not a <topic>-<partition> directory", child)
                    continue
                if tp in self._logs or tp in pending:
                    raise StorageError(f"{tp[0]}-{tp[1]} exists twice, the second time in {d}")
                self._count(d, 1)
                pending[tp] = partial(
                    Log, child, topic_configs.get(tp[0], self.default_config), self.clock,
                    recovery_point=recovery_points.get(tp, 0), log_start_offset=start_offsets.get(tp, 0),
                    clean_shutdown=clean, stats=LoadStats())
            self._open_logs(pending)
            pending.clear()
            if clean:
                marker.unlink()
                fsync_dir(d)
            logger.info("loaded %s (%s)", d, "new log dir" if fresh else "clean shutdown" if clean
                        else "unclean shutdown")
        self._loaded = True
        stats.total_s = time.perf_counter() - started
        logger.info("%s", stats.summary())

    def _open_logs(self, pending: dict[TopicPartition, Callable[[], Log]]) -> None:
        """Opens (and recovers) one dir's logs on ``recovery_threads`` threads (num.recovery.threads.per.data.dir):
        loading is mostly file-system calls, which let go of the GIL."""
        if self.recovery_threads <= 1 or len(pending) <= 1:
            opened = [make() for make in pending.values()]
        else:
            with ThreadPoolExecutor(self.recovery_threads, thread_name_prefix="log-recovery") as pool:
                opened = list(pool.map(lambda make: make(), pending.values()))
        for tp, log in zip(pending, opened):
            log.on_roll = self._note_roll
            log.on_epochs_changed = self._note_epochs
            self._logs[tp] = log
            self.load_stats.add(log.load_stats)

    @staticmethod
    def _read_checkpoint(path: Path) -> dict[TopicPartition, int]:
        try:
            return read_offsets(path)
        except CheckpointError as exc:
            logger.warning("ignoring corrupt checkpoint: %s", exc)
            return {}

    # --- partitions ------------------------------------------------------------------------------------------

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> list[Log]:
        return list(self._logs.values())

    def partition_counts(self) -> dict[Path, int]:
        """Partitions per log dir (every configured dir appears, possibly with 0)."""
        counts = {d: 0 for d in self.log_dirs}
        counts.update(self._dir_counts)
        return counts

    def _count(self, d: Path, delta: int) -> None:
        self._dir_counts[d] = self._dir_counts.get(d, 0) + delta

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        """The partition's log, created in the log dir holding the fewest partitions if it does not exist."""
        if not self._loaded:
            self.load()
        existing = self._logs.get((topic, partition))
        if existing is not None:
            return existing
        if not _LEGAL_TOPIC.match(topic) or topic in (".", ".."):
            raise ValueError(f"illegal topic name {topic!r}")
        if partition < 0:
            raise ValueError(f"illegal partition {partition}")
        counts = self.partition_counts()
        online = self.online_dirs
        if not online:
            raise StorageError("every log dir is offline")
        target = min(online, key=lambda d: counts[d])  # ties: the first listed dir
        # The new directory's entry in ``target`` becomes durable at the log's first flush (Log.flush syncs the
        # parent of a new log), not here: one fsync of the log dir per created partition made a LeaderAndIsr
        # of thousands of new partitions take seconds, and unflushed data is not durable anyway.
        path = target / f"{topic}-{partition}"
        log = Log(path, config or self.default_config, self.clock, clean_shutdown=True, new=not path.exists())
        self._logs[(topic, partition)] = log
        log.on_roll = self._note_roll
        log.on_epochs_changed = self._note_epochs
        self._count(target, 1)
        logger.info("created log %s-%d in %s", topic, partition, target)
        return log

    @property
    def online_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def mark_dir_offline(self, d: Path) -> list[TopicPartition]:
        """Takes a failed log dir out of service (Kafka's JBOD handling, KIP-112): its logs are closed as far as
        the failing disk allows and forgotten; nothing is written there again (checkpoints included) until the
        broker restarts and recovers them. Returns the partitions that were in it."""
        if d in self.offline_dirs:
            return []
        self.offline_dirs.add(d)
        gone = [tp for tp, lg in self._logs.items() if lg.dir.parent == d]
        self._dir_counts.pop(d, None)
        for tp in gone:
            lg = self._logs.pop(tp)
            try:
                lg.close(take_snapshot=False)
            except (OSError, StorageError) as exc:
                logger.debug("closing %s-%d in failed dir %s: %r", *tp, d, exc)
        logger.error("log dir %s is offline; %d partitions in it are no longer served here", d, len(gone))
        return gone

    def delete_log(self, topic: str, partition: int) -> bool:
        """Closes the log, renames its directory to ``<topic>-<partition>.<uuid>-delete`` and removes it."""
        log = self._logs.pop((topic, partition), None)
        if log is None:
            return False
        self._count(log.dir.parent, -1)
        log.close(take_snapshot=False)
        doomed = log.dir.with_name(f"{log.dir.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        os.replace(log.dir, doomed)
        fsync_dir(doomed.parent)
        shutil.rmtree(doomed, ignore_errors=True)
        return True

    # --- background work (the broker schedules these) --------------------------------------------------------

    def cleanup(self, now_ms: int | None = None) -> int:
        """Retention on every log, then removal of segment files whose delete delay has passed."""
        now = self.clock.time_ms() if now_ms is None else now_ms
        deleted = 0
        for log in self.all_logs():
            deleted += log.delete_expired_segments(now)
            log.delete_pending_segments(now)
        return deleted

    def _note_roll(self, log: Log) -> None:
        self._rolled[(log.topic, log.partition)] = log

    def _note_epochs(self, log: Log) -> None:
        key = (log.topic, log.partition)
        found = self._epochs_changed.get(key)
        if found is None:
            self._epochs_changed[key] = (log, self.clock.time_ms())
        elif found[0] is not log:  # the partition's log was replaced (deleted, created again): the newest one
            self._epochs_changed[key] = (log, found[1])

    def take_rolled(self, now_ms: int | None = None) -> list[Log]:
        """The logs rolled since the last call, and those whose leader epochs changed at least
        ``EPOCH_CHECKPOINT_DELAY_MS`` ago (for :meth:`flush_logs`, which may run on another thread).

        A leader-epoch checkpoint waits that long: a failover changes the epochs of every partition a broker
        holds twice within seconds (its LeaderAndIsr, then each follower's first append in the new epoch), and
        each is a file written and renamed, 100-200 us of CPU on this VM's ext4: 10,000 partitions took 1-2 s
        per broker right while the survivors replicated the first writes after the failover. Waiting loses
        nothing: a flush writes the checkpoint first (so a recovery point never passes an epoch the file lacks),
        a clean shutdown writes it, and after a crash recovery re-derives the epochs of unflushed segments from
        their batches (an epoch without batches answers OffsetForLeaderEpoch as its absence does). At most
        ``EPOCH_CHECKPOINTS_PER_PASS`` of them per call, the longest waiting first: the rest come with the next
        calls."""
        logs = list(self._rolled.values())
        self._rolled.clear()
        due = (self.clock.time_ms() if now_ms is None else now_ms) - EPOCH_CHECKPOINT_DELAY_MS
        changed = self._epochs_changed
        taken: list[TopicPartition] = []
        for tp, (log, since) in changed.items():  # in the order of their first change
            if since > due or len(taken) >= EPOCH_CHECKPOINTS_PER_PASS:
                break
            taken.append(tp)
            logs.append(log)
        for tp in taken:
            del changed[tp]
        return logs

    @staticmethod
    def flush_logs(logs: Sequence[Log]) -> int:
        """Writes out changed leader-epoch checkpoints and flushes the rolled segments of ``logs`` (Kafka flushes
        a segment right after its roll, in the background), so the recovery point follows the rolls and a restart
        after a crash re-scans only what was written since. Returns how many logs were flushed; a log closed
        meanwhile is skipped."""
        flushed = 0
        for log in logs:
            try:
                flushed += log.flush_rolled()
            except (OSError, ValueError) as exc:
                logger.debug("flushing the rolled segments of %s: %r", log, exc)
        return flushed

    def flush_due(self, now_ms: int | None = None) -> int:
        """Applies each log's flush policy; returns how many logs were flushed."""
        now = self.clock.time_ms() if now_ms is None else now_ms
        return sum(1 for log in self.all_logs() if log.flush_due(now))

    def _by_dir(self) -> dict[Path, list[Log]]:
        groups: dict[Path, list[Log]] = {d: [] for d in self.online_dirs}
        for log in self._logs.values():
            groups.setdefault(log.parent_dir, []).append(log)
        return groups

    def checkpoint(self) -> None:
        """Writes the recovery-point and log-start-offset checkpoints of every log dir."""
        for d, logs in self._by_dir().items():
            write_offsets(
                d / RECOVERY_POINT_CHECKPOINT, {(lg.topic, lg.partition): lg.recovery_point for lg in logs}
            )
            write_offsets(
                d / LOG_START_OFFSET_CHECKPOINT,
                {(lg.topic, lg.partition): lg.log_start_offset for lg in logs},
            )

    def write_high_watermarks(self, high_watermarks: Mapping[TopicPartition, int]) -> None:
        """Writes ``replication-offset-checkpoint`` in each log dir for the partitions it holds."""
        self.write_offset_files(self.high_watermark_files(high_watermarks))

    def high_watermark_files(self, high_watermarks: Mapping[TopicPartition, int]) \
            -> list[tuple[Path, dict[TopicPartition, int]]]:
        """Each log dir's ``replication-offset-checkpoint`` and its entries (the partitions the dir holds), for
        :meth:`write_offset_files`; taken where the logs may change (the event loop)."""
        files = []
        for d, logs in self._by_dir().items():
            entries = {
                (lg.topic, lg.partition): high_watermarks[(lg.topic, lg.partition)]
                for lg in logs
                if (lg.topic, lg.partition) in high_watermarks
            }
            files.append((d / REPLICATION_OFFSET_CHECKPOINT, entries))
        return files

    def write_offset_files(self, files: list[tuple[Path, dict[TopicPartition, int]]]) -> None:
        """Writes (and fsyncs) the checkpoint files of :meth:`high_watermark_files`. May run on a worker thread;
        writes are serialized, and one taken earlier than a file's last write is skipped (an older snapshot that
        reached the lock late must not overwrite a newer one)."""
        self.offset_files_writer(files)()

    def _write_offset_files(self, files: list[tuple[Path, dict[TopicPartition, int]]], taken: int) -> None:
        with self._offsets_lock:
            for path, entries in files:
                if self._offsets_written.get(path, 0) > taken:
                    continue
                write_offsets(path, entries)
                self._offsets_written[path] = taken

    def offset_files_writer(self, files: list[tuple[Path, dict[TopicPartition, int]]]) -> Callable[[], None]:
        """:meth:`write_offset_files` as a call for a worker thread, its place in the order of writes taken now
        (on the calling thread)."""
        with self._offsets_lock:
            self._offsets_taken += 1
            taken = self._offsets_taken
        return partial(self._write_offset_files, files, taken)

    def read_high_watermarks(self) -> dict[TopicPartition, int]:
        result: dict[TopicPartition, int] = {}
        for d in self.log_dirs:
            result.update(self._read_checkpoint(d / REPLICATION_OFFSET_CHECKPOINT))
        return result

    # --- shutdown --------------------------------------------------------------------------------------------

    def shutdown(self, progress: ShutdownProgress | None = None) -> None:
        """Flushes and closes every log, writes the checkpoints and the clean-shutdown markers. ``progress`` counts
        the logs closed and marks the file-system sync for the broker's exit watchdog.

        Where the platform has it (Linux), the logs are closed without an fsync each and every log dir's file
        system is synced once (syncfs) before the checkpoints move the recovery points to the log ends: a few
        flushes of the device instead of several fsyncs per partition, which made the clean shutdown of a broker
        with 2,000 idle partitions take 21 s (10 ms per partition) and would have run a broker with 10,000 into
        its stop timeout, whose SIGKILL means a full recovery at the next start. A failed sync leaves the old
        recovery points and no clean-shutdown marker in that dir: the next start recovers it."""
        started = time.monotonic()
        every_log = self.all_logs()
        progress = progress if progress is not None else ShutdownProgress()
        progress.logs_total, progress.logs_closed = len(every_log), 0
        if not can_sync_filesystem():
            for log in every_log:
                log.close(flush=True)
                progress.logs_closed += 1
            closed = time.monotonic()
            synced = set(self.online_dirs)
        else:
            ends = {d: [(log, log.log_end_offset) for log in logs] for d, logs in self._by_dir().items()}
            for log in every_log:
                log.close(flush=True, fsync=False)
                progress.logs_closed += 1
            closed = time.monotonic()
            synced = set()
            progress.syncing = True
            try:
                for d in self.online_dirs:
                    try:
                        sync_filesystem(d)
                    except OSError as exc:
                        logger.error("clean shutdown: syncing the file system of %s failed (%s); it is left "
                                     "without a clean-shutdown marker and will be recovered at the next start", d,
                                     exc)
                        continue
                    synced.add(d)
                    for log, end in ends.get(d, []):
                        log.recovery_point = max(log.recovery_point, end)
            finally:
                progress.syncing = False
        flushed = time.monotonic()
        self.checkpoint()
        for d in self.online_dirs:
            if d not in synced:
                continue
            with open(d / CLEAN_SHUTDOWN_FILE, "wb") as f:
                os.fsync(f.fileno())
            fsync_dir(d)
        self._logs.clear()
        self._dir_counts.clear()
        self._release_locks()
        # What a slow clean shutdown spent its time on: the broker's exit watchdog ends one that runs too long.
        logger.info("clean shutdown of %d logs in %d dirs: %.2f s (closing the logs %.2f s, syncing %.2f s, "
                    "checkpoints and markers %.2f s)", len(every_log), len(synced), time.monotonic() - started,
                    closed - started, flushed - closed, time.monotonic() - flushed)

    def close(self) -> None:
        """Closes files and locks without flushing or marking the shutdown clean (error paths, crash tests)."""
        for log in self.all_logs():
            log.close(take_snapshot=False)
        self._logs.clear()
        self._dir_counts.clear()
        self._release_locks()
