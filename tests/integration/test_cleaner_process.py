"""storage/cleaner_process.py, the process the broker runs each cleaning in: a pickled job in, the same result as
cleaning on a thread out; errors come back as exceptions; it dies with a killed broker."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from moldau.protocol.records import Record, build_batch, iter_headers, iter_records
from moldau.storage import Log, LogConfig
from moldau.storage.cleaner import JobResult, LogCleaner, UncleanableError

from .harness import BrokerProcess, wait_until

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


@pytest.mark.slow
def test_the_cleaner_process_dies_with_a_killed_broker(broker_factory: Callable[..., BrokerProcess],
                                                        topic: str) -> None:
    """kill -9 of the broker in the middle of a cleaning: the cleaner process goes too (it must not write under
    a restarted broker), and the restarted broker serves every key's latest value."""
    # no cleaner while the data is written; then the throttle stretches the cleaning of ~1 MB over a minute or more
    broker = broker_factory({"log.cleaner.threads": "0", "log.cleaner.backoff.ms": "100",
                             "log.cleaner.io.max.bytes.per.second": "20000"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    configs = {"cleanup.policy": "compact", "segment.bytes": "65536", "min.cleanable.dirty.ratio": "0.01"}
    for f in admin.create_topics([NewTopic(topic, 1, 1, config=configs)]).values():
        f.result(30)
    # small batches: one 1 MB batch would fill the active segment alone, and the active segment is never cleaned
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "batch.size": 16384})
    latest: dict[bytes, bytes] = {}
    for i in range(8000):
        key, value = b"k%d" % (i % 500), b"v%d-" % i + b"x" * 100
        producer.produce(topic, key=key, value=value)
        latest[key] = value
    assert producer.flush(30) == 0
    threads = ConfigResource(ConfigResource.Type.BROKER, "0", incremental_configs=[
        ConfigEntry("log.cleaner.threads", "1", incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([threads]).values():
        f.result(30)

    def cleaner() -> psutil.Process | None:
        for child in psutil.Process(broker.pid).children():
            if "moldau.storage.cleaner_process" in child.cmdline():
                return child
        return None

    proc = wait_until(cleaner, 60, "the broker to start a cleaner process")
    assert proc.is_running()
    broker.kill()
    gone, _ = psutil.wait_procs([proc], timeout=10)
    assert gone, "the cleaner process outlived the broker"
    broker.overrides["log.cleaner.enable"] = "false"
    broker.start()
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    seen: dict[bytes, bytes] = {}
    offsets: list[int] = []

    def read_all() -> bool:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            seen[msg.key()] = msg.value()
            offsets.append(msg.offset())
        return seen == latest

    wait_until(read_all, 60, "the latest value of every key", interval=0)
    consumer.close()
    assert offsets == sorted(set(offsets))
    part = broker.partition_dir(topic)
    assert part is not None and not [p.name for p in part.iterdir() if p.name.endswith((".cleaned", ".swap"))]
