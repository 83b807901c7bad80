"""storage/cleaner_process.py, the process the broker runs each cleaning in: a pickled job in, the same result as
cleaning on a thread out; errors come back as exceptions; a niceness argument lowers its priority."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from moldau.protocol.records import Record, build_batch, iter_headers, iter_records
from moldau.storage import Log, LogConfig
from moldau.storage.cleaner import JobResult, LogCleaner, UncleanableError

pytestmark = pytest.mark.integration

NOW = 1_700_000_000_000


def _log(path: Path) -> Log:
    log = Log(path, LogConfig(segment_bytes=4096, index_interval_bytes=256, file_delete_delay_ms=0,
                              cleanup_policy="compact"))
    for i in range(300):
        log.append_as_leader(build_batch([(b"k%d" % (i % 11), b"v%d" % i, None, NOW),
                                          (b"j%d" % (i % 5), b"w%d" % i, None, NOW)]), 0)
    log.roll()
    return log


def _records(log: Log) -> list[Record]:
    data = log.read(0, 1 << 30).read()
    return [r for p, h in iter_headers(data) for r in iter_records(data[p : p + h.total_size])]


def _run_process(job: object, nice: int = 0) -> tuple[str, object, int]:
    proc = subprocess.run([sys.executable, "-m", "moldau.storage.cleaner_process", str(os.getpid()), str(nice)],
                          input=pickle.dumps(job), capture_output=True, timeout=120, check=True)
    status, value = pickle.loads(proc.stdout)
    return status, value, proc.returncode


def test_a_job_run_in_the_process_cleans_like_a_thread(tmp_path: Path) -> None:
    by_thread = _log(tmp_path / "a" / "t-0")
    by_process = _log(tmp_path / "b" / "t-0")
    LogCleaner(1 << 20).clean(by_thread, NOW)
    cleaner = LogCleaner(1 << 20)
    job, segments = cleaner.plan(by_process, NOW)
    status, result, _ = _run_process(job, nice=5)
    assert status == "ok" and isinstance(result, JobResult)
    assert result.stats.records_removed == 600 - 16
    assert cleaner.finish(cleaner.adopt(by_process, segments, result))
    assert _records(by_process) == _records(by_thread)
    assert len(_records(by_process)) == 16
    by_thread.close()
    by_process.close()


def test_errors_come_back_as_exceptions(tmp_path: Path) -> None:
    log = _log(tmp_path / "t-0")
    job, _ = LogCleaner(200).plan(log, NOW)  # a map too small for even the first segment
    status, value, _ = _run_process(job)
    assert status == "error" and isinstance(value, UncleanableError)
    assert "log.cleaner.dedupe.buffer.size" in str(value)
    assert not [p for p in log.dir.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    log.close()
