"""Log cleaner throughput and its effect on a concurrent produce benchmark, in one run.

    .venv/bin/python bench/cleaner_produce.py                  # 1 GiB of 100-byte records, 10% live keys
    .venv/bin/python bench/cleaner_produce.py --mib 200 --window 5 --skip-standalone

1. Standalone (skipped with --skip-standalone): bench/cleaner.py's measurement in this process: ``--mib`` MiB
   written into a Log, one LogCleaner.clean, MB/s.
2. In a broker: starts one broker process (tests/integration/harness.py BrokerProcess) with
   log.cleaner.threads=0, creates a compacted topic (64 MiB segments) and a plain one, stops the broker, writes
   ``--mib`` MiB into the compacted partition's directory with the storage API (batches of 100 records, as in
   1.), restarts the broker. Then, with confluent-kafka producing 100-byte records to the plain topic (acks=1,
   linger.ms=5, batch.size=1 MiB, a bounded queue so the produce loop runs at the delivery rate) for
   ``--window`` seconds each:
     a. produce rate without cleaning;
     b. log.cleaner.threads is raised to 1 (IncrementalAlterConfigs, a dynamic broker config); once the broker
        has started its cleaner process (storage/cleaner_process.py), produce rate during cleaning; afterwards
        moldau_log_cleaner_runs_total must still be 0, i.e. the cleaning spanned the whole window ("overlap:
        full"), else the overlap is reported as partial;
     c. ``--pairs`` pairs of windows with the cleaner process paused (SIGSTOP) and running, alternately: both
        halves of a pair see the same machine load, which on a shared machine drifts more between a, b and d
        than the cleaner's own effect. The main figure is the ratio of the mean rates (running / paused);
     d. after the cleaning finished (its time is read from the broker's log line), produce rate again without
        cleaning.
   Reports the rates and ratios and the in-broker cleaning's MB/s (which includes the paused windows).
Extra broker settings: ``--override key=value`` (e.g. log.cleaner.io.max.bytes.per.second=20000000).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from cleaner import MiB, write_input  # noqa: E402

from moldau.storage.cleaner import LogCleaner  # noqa: E402
from moldau.storage.config import LogConfig  # noqa: E402
from moldau.storage.log import Log  # noqa: E402
from tests.integration.harness import BrokerProcess  # noqa: E402

COMPACTED, LOAD = "compacted", "load"
VALUE = b"p" * 100
_CLEANED = re.compile(r"cleaned Log\(compacted-0[^)]*\) up to (\d+): (\d+) records and (\d+) bytes removed in ([\d.]+)s")


_T0 = time.monotonic()


def log_line(text: str) -> None:
    """Progress lines with the seconds since start and the machine's 1-minute load average."""
    print(f"[{time.monotonic() - _T0:6.1f}s load {os.getloadavg()[0]:4.1f}] {text}", flush=True)


def standalone(mib: int, key_len: int, dedupe: int) -> float:
    tmp = Path(tempfile.mkdtemp(prefix="moldau-cleaner-bench-"))
    try:
        log = Log(tmp / "bench-0", LogConfig(segment_bytes=64 * MiB, file_delete_delay_ms=0))
        write_input(log, mib, key_len)
        log.config.cleanup_policy = "compact"
        t0 = time.monotonic()
        prepared = LogCleaner(dedupe).clean(log, int(time.time() * 1000))
        elapsed = time.monotonic() - t0
        assert prepared is not None
        mbps = prepared.stats.bytes_read / 1e6 / elapsed
        log_line(f"standalone: cleaned {prepared.stats.bytes_read / 1e6:.1f} MB in {elapsed:.2f}s: {mbps:.1f} MB/s")
        log.close()
        return mbps
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def metric(broker: BrokerProcess, name: str) -> float:
    for line in broker.fetch_metrics().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise KeyError(name)


def wait_for(what: str, cond: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.05)


def make_producer(bootstrap: str, errors: list[Any]) -> Producer:
    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5, "batch.size": 1048576,
        "batch.num.messages": 1000000, "queue.buffering.max.messages": 200000, "compression.type": "none",
        "delivery.report.only.error": True, "on_delivery": lambda err, _msg: errors.append(err),
    })
    producer.produce(LOAD, VALUE, partition=0)
    producer.flush(30)  # connection and metadata outside the windows
    return producer


def produce_for(producer: Producer, seconds: float, errors: list[Any]) -> float:
    """Records/s acknowledged while producing to LOAD for ``seconds`` (plus the final flush)."""
    produce, poll = producer.produce, producer.poll
    sent = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(5000):
            try:
                produce(LOAD, VALUE, partition=0)
            except BufferError:
                poll(0.001)
                continue
            sent += 1
        poll(0)
    if producer.flush(60):
        raise RuntimeError("records left unacknowledged")
    elapsed = time.perf_counter() - start
    if errors:
        raise RuntimeError(f"{len(errors)} delivery errors, first: {errors[0]}")
    return sent / elapsed


def cleaner_process(broker: BrokerProcess) -> psutil.Process | None:
    for child in psutil.Process(broker.pid).children():
        try:
            if "moldau.storage.cleaner_process" in child.cmdline():
                return child
        except psutil.NoSuchProcess:
            continue
    return None


def alternate(producer: Producer, proc: psutil.Process, args: argparse.Namespace, errors: list[Any]) -> None:
    """Windows with the cleaner process paused (SIGSTOP: no cleaning) and running, alternately, so that both
    see the same machine load; stops when the cleaning ends inside a running window (that pair is dropped)."""
    paused_rates: list[float] = []
    running_rates: list[float] = []
    for _ in range(args.pairs):
        proc.suspend()
        try:
            paused = produce_for(producer, args.window, errors)
        finally:
            proc.resume()
        running = produce_for(producer, args.window, errors)
        if not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE:
            log_line(f"cleaning ended inside a window: pair dropped ({paused:,.0f} / {running:,.0f} records/s)")
            break
        paused_rates.append(paused)
        running_rates.append(running)
        log_line(f"produce with the cleaner paused: {paused:,.0f} records/s, running: {running:,.0f} records/s "
                 f"({running / paused:.2f})")
    if paused_rates:
        ratios = sorted(r / p for p, r in zip(paused_rates, running_rates))
        log_line(f"alternating windows: {len(ratios)} pairs, mean rate paused {statistics.mean(paused_rates):,.0f} "
                 f"running {statistics.mean(running_rates):,.0f} records/s; ratio of means "
                 f"{statistics.mean(running_rates) / statistics.mean(paused_rates):.2f}, median pair ratio "
                 f"{statistics.median(ratios):.2f} (min {ratios[0]:.2f}, max {ratios[-1]:.2f})")


def set_cleaner_threads(admin: AdminClient, threads: int) -> None:
    res = ConfigResource(ConfigResource.Type.BROKER, "0", incremental_configs=[
        ConfigEntry("log.cleaner.threads", str(threads), incremental_operation=AlterConfigOpType.SET)])
    for fut in admin.incremental_alter_configs([res]).values():
        fut.result(30)


def prepare_broker(workdir: Path, args: argparse.Namespace) -> BrokerProcess:
    overrides = {"log.cleaner.threads": "0", "log.cleaner.backoff.ms": "500",
                 "log.cleaner.dedupe.buffer.size": str(args.dedupe_buffer)}
    overrides.update(dict(kv.split("=", 1) for kv in args.override))
    broker = BrokerProcess(workdir, overrides=overrides).start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topics = [NewTopic(COMPACTED, 1, 1, config={"cleanup.policy": "compact", "segment.bytes": str(64 * MiB)}),
              NewTopic(LOAD, 1, 1)]
    for fut in admin.create_topics(topics).values():
        fut.result(30)
    wait_for("the partitions", lambda: broker.partition_dir(COMPACTED) is not None, 30)
    del admin  # its background thread would keep reconnecting while the broker is down
    broker.stop()
    part_dir = broker.partition_dir(COMPACTED)
    t0 = time.monotonic()
    log = Log(part_dir, LogConfig(segment_bytes=64 * MiB, file_delete_delay_ms=0))
    records = write_input(log, args.mib, args.key_len)
    size = log.size
    log.flush()  # fsync: writeback of a GiB of dirty pages must not overlap the produce measurements
    log.close()
    log_line(f"wrote {records:,} records ({size / 1e6:.1f} MB) into {part_dir.name} in {time.monotonic() - t0:.1f}s")
    broker.start()
    # one record through the broker moves the high watermark to the end of the written data (nothing above the
    # high watermark is cleanable); it lands in the active segment, which is never cleaned
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": 1})
    p.produce(COMPACTED, b"v", key=b"hw", partition=0)
    if p.flush(30):
        raise RuntimeError("could not produce to the compacted topic")
    log_line("broker restarted with the compacted log")
    return broker


def in_broker(args: argparse.Namespace) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="moldau-cleaner-produce-"))
    broker: BrokerProcess | None = None
    try:
        broker = prepare_broker(workdir, args)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        errors: list[Any] = []
        producer = make_producer(broker.bootstrap, errors)
        produce_for(producer, 2, errors)  # warm-up
        before = produce_for(producer, args.window, errors)
        log_line(f"produce without cleaning: {before:,.0f} records/s")
        b = broker
        set_cleaner_threads(admin, 1)
        wait_for("the cleaner process", lambda: cleaner_process(b) is not None, 60)
        proc = cleaner_process(broker)
        assert proc is not None
        during = produce_for(producer, args.window, errors)
        runs = metric(broker, "moldau_log_cleaner_runs_total")
        overlap = "full" if runs == 0 else "partial (the cleaning finished inside the window)"
        log_line(f"produce during cleaning: {during:,.0f} records/s (overlap: {overlap})")
        alternate(producer, proc, args, errors)
        wait_for("the cleaning to finish", lambda: _CLEANED.search(b.stderr_text()) is not None, 1800)
        set_cleaner_threads(admin, 0)
        after = produce_for(producer, args.window, errors)
        log_line(f"produce after cleaning: {after:,.0f} records/s")
        found = _CLEANED.search(broker.stderr_text())
        assert found is not None
        bytes_removed, seconds = int(found.group(3)), float(found.group(4))
        size = sum(p.stat().st_size for p in broker.partition_dir(COMPACTED).glob("*.log"))  # type: ignore[union-attr]
        cleaned = (size + bytes_removed) / 1e6
        log_line(f"in-broker cleaning: ~{cleaned:.1f} MB in {seconds:.2f}s including the paused windows: "
                 f"{cleaned / seconds:.1f} MB/s ({int(found.group(2)):,} records removed)")
        log_line(f"ratio during/before: {during / before:.2f}; during/after: {during / after:.2f}; "
              f"during/mean(before, after): {2 * during / (before + after):.2f}")
    finally:
        if broker is not None and broker.is_running():
            broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=1024, help="compacted log size, MiB of 100-byte records")
    ap.add_argument("--key-len", type=int, default=11)
    ap.add_argument("--window", type=float, default=4.0, help="seconds of each produce measurement")
    ap.add_argument("--pairs", type=int, default=5, help="paused/running window pairs during the cleaning")
    ap.add_argument("--dedupe-buffer", type=int, default=256 * MiB, help="log.cleaner.dedupe.buffer.size")
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", help="broker setting")
    ap.add_argument("--skip-standalone", action="store_true")
    args = ap.parse_args()
    if not args.skip_standalone:
        standalone(args.mib, args.key_len, args.dedupe_buffer)
    in_broker(args)


if __name__ == "__main__":
    main()
