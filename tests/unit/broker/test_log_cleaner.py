from __future__ import annotations

import asyncio
from pathlib import Path

from moldau.broker.config import BrokerConfig
from moldau.broker.log_cleaner import CleanerService
from moldau.broker.metrics import BrokerMetrics
from moldau.protocol.records import build_batch, iter_headers, iter_records
from moldau.storage.config import ManualClock
from moldau.storage.log_manager import LogManager


def _setup(tmp_path: Path, **props: str) -> tuple[CleanerService, LogManager, BrokerMetrics, ManualClock]:
    cfg = BrokerConfig({"log.dirs": str(tmp_path), **props})
    clock = ManualClock()
    lm = LogManager([tmp_path], cfg.log_config({"cleanup.policy": "compact", "segment.bytes": "2048"}), clock)
    lm.load()
    metrics = BrokerMetrics()
    return CleanerService(lambda: lm, cfg, metrics, clock, isolate=False), lm, metrics, clock


def _fill(lm: LogManager, clock: ManualClock) -> None:
    log = lm.get_or_create_log("t", 0)
    for i in range(200):
        log.append_as_leader(build_batch([(b"k%d" % (i % 7), b"v%d" % i, None, clock.now)]), 0)
    log.roll()


async def test_cleans_the_dirtiest_log_and_reports_metrics(tmp_path: Path) -> None:
    service, lm, metrics, clock = _setup(tmp_path)
    assert not await service.clean_once()  # nothing to clean yet
    _fill(lm, clock)
    assert await service.clean_once()
    log = lm.get_log("t", 0)
    assert log is not None
    data = log.read(0, 1 << 20).read()
    values = {r.key: r.value for p, h in iter_headers(data) for r in iter_records(data[p : p + h.total_size])}
    assert len([1 for p, h in iter_headers(data) for _ in range(h.records_count)]) == 7
    assert values[b"k0"] == b"v196"
    text = metrics.render().decode()
    assert "moldau_log_cleaner_runs_total 1.0" in text
    assert "moldau_log_cleaner_records_removed_total 193.0" in text
    assert "moldau_log_cleaner_max_dirty_ratio 1.0" in text
    assert not await service.clean_once()  # clean now: below min.cleanable.dirty.ratio
    lm.close()


async def test_a_log_whose_segment_does_not_fit_the_map_is_uncleanable(tmp_path: Path) -> None:
    service, lm, metrics, clock = _setup(tmp_path, **{"log.cleaner.dedupe.buffer.size": "200"})
    _fill(lm, clock)
    assert await service.clean_once()
    assert service.cleaner.uncleanable == {("t", 0)}
    assert "moldau_log_cleaner_uncleanable_partitions 1.0" in metrics.render().decode()
    assert not await service.clean_once()
    lm.close()


def _cleaner_tasks() -> set[str]:
    return {t.get_name() for t in asyncio.all_tasks() if t.get_name().startswith("log-cleaner-") and not t.done()}


async def _wait_for_tasks(names: set[str]) -> None:
    for _ in range(1000):  # bounded: 10 s
        if _cleaner_tasks() == names:
            return
        await asyncio.sleep(0.01)
    assert _cleaner_tasks() == names


async def test_dynamic_reconfigure_resizes_the_pool_and_applies_settings(tmp_path: Path) -> None:
    service, lm, _metrics, _clock = _setup(tmp_path, **{"log.cleaner.backoff.ms": "10"})
    [supervisor] = service.start()
    try:
        await _wait_for_tasks({"log-cleaner-0"})
        service.reconfigure(BrokerConfig({"log.dirs": str(tmp_path), "log.cleaner.threads": "3",
                                          "log.cleaner.backoff.ms": "10",
                                          "log.cleaner.io.max.bytes.per.second": "1000000",
                                          "log.cleaner.dedupe.buffer.size": "3000000"}))
        await _wait_for_tasks({"log-cleaner-0", "log-cleaner-1", "log-cleaner-2"})
        assert service.cleaner.throttler.rate == 1000000 and service.cleaner.dedupe_buffer_bytes == 1000000
        service.reconfigure(BrokerConfig({"log.dirs": str(tmp_path), "log.cleaner.backoff.ms": "10"}))
        await _wait_for_tasks({"log-cleaner-0"})  # the extra tasks stop between two cleanings
    finally:
        supervisor.cancel()
        await asyncio.gather(supervisor, return_exceptions=True)
        lm.close()
    assert not _cleaner_tasks()
