"""Schedules storage's LogCleaner: ``log.cleaner.threads`` asyncio tasks, each picking the dirtiest compacted log,
planning the cleaning on the event loop, running it in a cleaner process of its own (storage/cleaner_process.py:
the heavy part only reads sealed segments and writes new files) and swapping the result in on the event loop,
which owns the logs, so appends and fetches never see a half-swapped segment list. ``log.cleaner.backoff.ms`` is
the sleep when nothing needs cleaning.

Why a process and not a thread: the cleaning is CPU-bound Python. On a thread it holds the GIL most of the time,
and each request the event loop wakes up for first waits for the cleaner to drop it (up to the 5 ms switch
interval); with a 1 GiB cleaning running, a concurrent producer lost ~30% of its rate (docs/benchmarks.md). The
process costs ~0.3 s of interpreter start per cleaning. ``isolate=False`` (unit tests) runs it on a thread."""

from __future__ import annotations

import asyncio
import logging
import os
import pickle
import sys
from typing import Protocol

from moldau.broker.config import BrokerConfig
from moldau.broker.metrics import BrokerMetrics
from moldau.storage.cleaner import CleanJob, JobResult, LogCleaner, UncleanableError, run_job
from moldau.storage.config import Clock
from moldau.storage.log_manager import LogManager
from moldau.tasks import cancel_and_wait

log = logging.getLogger(__name__)


class _LogManagerSource(Protocol):
    def __call__(self) -> LogManager: ...


class CleanerService:
    def __init__(self, log_manager: _LogManagerSource, cfg: BrokerConfig, metrics: BrokerMetrics,
                 clock: Clock, isolate: bool = True) -> None:
        self.isolate = isolate
        self.threads = int(cfg.get("log.cleaner.threads"))
        self.backoff_s = int(cfg.get("log.cleaner.backoff.ms")) / 1000
        self.nice = int(cfg.get("log.cleaner.nice"))
        # Kafka splits the dedupe buffer between the cleaner threads.
        dedupe = int(cfg.get("log.cleaner.dedupe.buffer.size")) // max(self.threads, 1)
        self.cleaner = LogCleaner(dedupe, float(cfg.get("log.cleaner.io.max.bytes.per.second")))
        self._log_manager = log_manager
        self.metrics = metrics
        self.clock = clock
        self.last_dirty_ratio = 0.0
        self._resized: asyncio.Event | None = None
        metrics.set_cleaner_callbacks(lambda: self.last_dirty_ratio,
                                      lambda: float(len(self.cleaner.uncleanable)))

    def reconfigure(self, cfg: BrokerConfig) -> None:
        """Dynamic broker configs: backoff, throttle and dedupe buffer apply from the next cleaning; the number
        of cleaner tasks follows log.cleaner.threads."""
        self.backoff_s = int(cfg.get("log.cleaner.backoff.ms")) / 1000
        self.threads = int(cfg.get("log.cleaner.threads"))
        self.cleaner.dedupe_buffer_bytes = int(cfg.get("log.cleaner.dedupe.buffer.size")) // max(self.threads, 1)
        self.cleaner.throttler.rate = float(cfg.get("log.cleaner.io.max.bytes.per.second"))
        if self._resized is not None:
            self._resized.set()

    def start(self) -> list[asyncio.Task[None]]:
        """One supervising task; it keeps ``log.cleaner.threads`` cleaner tasks running (a dynamic change
        resizes the pool: extra tasks stop between two cleanings, never in the middle of one)."""
        self._resized = resized = asyncio.Event()
        return [asyncio.create_task(self._supervise(resized), name="log-cleaner")]

    async def _supervise(self, resized: asyncio.Event) -> None:
        workers: dict[int, asyncio.Task[None]] = {}
        try:
            while True:
                for index in range(self.threads):
                    if index not in workers or workers[index].done():
                        workers[index] = asyncio.create_task(self._work(index), name=f"log-cleaner-{index}")
                await resized.wait()
                resized.clear()
        finally:
            await cancel_and_wait(workers.values())

    async def _run(self, job: CleanJob) -> JobResult | None:
        if not self.isolate:
            return await asyncio.to_thread(run_job, job, self.cleaner.throttler)
        # each process throttles itself; together they stay within log.cleaner.io.max.bytes.per.second
        job.io_max_bytes_per_second = self.cleaner.throttler.rate / max(self.threads, 1)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "moldau.storage.cleaner_process", str(os.getpid()), str(self.nice),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        try:
            out, _ = await proc.communicate(pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL))
        finally:
            if proc.returncode is None:  # cancelled (shutdown): a half-done cleaning leaves only .cleaned files
                proc.kill()
        if proc.returncode != 0 or not out:
            raise RuntimeError(f"the cleaner process for {job.name} exited with code {proc.returncode}")
        status, value = pickle.loads(out)
        if status != "ok":
            raise value
        assert value is None or isinstance(value, JobResult)
        return value

    async def _work(self, index: int = 0) -> None:
        while index < self.threads:
            try:
                cleaned = await self.clean_once()
            except Exception:
                log.exception("log cleaner failed")
                cleaned = False
            if not cleaned:
                await asyncio.sleep(self.backoff_s)

    async def clean_once(self) -> bool:
        """Cleans the dirtiest log if one qualifies; False when there was nothing to do."""
        now = self.clock.time_ms()
        picked = self.cleaner.grab_filthiest(self._log_manager().all_logs(), now)
        if picked is None:
            return False
        target, ratio = picked
        self.last_dirty_ratio = ratio
        try:
            job, segments = self.cleaner.plan(target, now)
            result = await self._run(job)
            prepared = None if result is None else self.cleaner.adopt(target, segments, result)
            if prepared is not None and self.cleaner.finish(prepared):
                st = prepared.stats
                self.metrics.cleaner_run(st.bytes_read - st.bytes_written, st.records_removed, st.elapsed_s)
                log.info("cleaned %s up to %d: %d records and %d bytes removed in %.2fs", target,
                         prepared.end_offset, st.records_removed, st.bytes_read - st.bytes_written, st.elapsed_s)
        except UncleanableError as exc:
            log.error("marking %s uncleanable: %s", target, exc)
            self.cleaner.uncleanable.add((target.topic, target.partition))
        finally:
            self.cleaner.done(target)
        return True
