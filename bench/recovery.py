"""Start-up time of a broker with a large log, after kill -9 and after a clean shutdown (issue #21).

    .venv/bin/python bench/recovery.py --gb 10 --partitions 1000
    .venv/bin/python bench/recovery.py --gb 1 --partitions 100 --segment-mb 16 --recovery-threads 4

One standalone broker (log.segment.bytes=``--segment-mb``, Kafka's other defaults). A topic of ``--partitions``
partitions is filled with ``--gb`` GiB (confluent-kafka, idempotent, 10 KB records round-robin over the
partitions), then:
  1. kill -9 (after ``--settle-s`` s, so that the rolled segments have been flushed and the recovery point
     checkpoint written, log.flush.offset.checkpoint.interval.ms=``--checkpoint-ms``) and a restart;
  2. a clean shutdown (SIGTERM) and a restart.
Each restart is timed from the process start until it serves: ApiVersions and Metadata (the client's bootstrap),
one produce and a fetch of that record all succeeded. The broker's own breakdown of its log loading (its
"log loading:" line: checkpoints, opening segments with trusted indexes, segment scans with index rebuild,
producer state) is printed beside it. The data is in the page cache when the broker restarts (a process crash,
not a machine crash).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.integration.harness import BrokerProcess  # noqa: E402

RECORD = 10_000


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def fill(bootstrap: str, topic: str, partitions: int, total_bytes: int) -> float:
    """Writes ``total_bytes`` of records; returns MB/s."""
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20,
                  "batch.size": 1048576, "compression.type": "none", "queue.buffering.max.kbytes": 1048576,
                  "message.timeout.ms": 600000})
    value = os.urandom(RECORD)
    count = total_bytes // RECORD
    errors: list[object] = []
    start = time.perf_counter()
    for i in range(count):
        while True:
            try:
                p.produce(topic, value, partition=i % partitions,
                          on_delivery=lambda err, _m: err is not None and errors.append(err))
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)
            if i % 100_000 == 0:
                log(f"  {i * RECORD / 2**30:.1f} GiB")
    left = p.flush(600)
    elapsed = time.perf_counter() - start
    if left or errors:
        raise RuntimeError(f"{left} undelivered, errors {errors[:3]}")
    return count * RECORD / elapsed / 1e6


def serving(broker: BrokerProcess, topic: str, timeout: float = 600) -> float:
    """Starts ``broker``; seconds until a bootstrap (ApiVersions + Metadata), a produce and its fetch succeed."""
    start = time.monotonic()
    broker.start(timeout=timeout)
    deadline = start + timeout
    got: list[tuple[int, object]] = []

    def delivered(err: object, m: Message) -> None:
        got.append((m.offset() or 0, err))

    while time.monotonic() < deadline:
        try:
            p = Producer({"bootstrap.servers": broker.bootstrap, "acks": 1, "message.timeout.ms": 5000})
            got.clear()
            p.produce(topic, b"probe", partition=0, on_delivery=delivered)
            p.flush(10)
            if not got or got[0][1] is not None:
                continue
            c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "probe", "enable.auto.commit": False})
            c.assign([TopicPartition(topic, 0, got[0][0])])
            msg = c.poll(10)
            c.close()
            if msg is not None and msg.error() is None and msg.value() == b"probe":
                return time.monotonic() - start
        except Exception as exc:  # noqa: BLE001 - not serving yet
            log(f"  not serving yet: {exc!r}")
        time.sleep(0.05)
    raise TimeoutError("the broker did not serve in time")


def breakdown(broker: BrokerProcess) -> str:
    lines = re.findall(r"log loading: .*", broker.stderr_text())
    return lines[-1] if lines else "(no log loading line)"


def run(args: argparse.Namespace) -> str:
    root = Path(args.dir or tempfile.mkdtemp(prefix="moldau-recovery-"))
    broker = BrokerProcess(root / "b", overrides={
        "log.segment.bytes": str(args.segment_mb << 20),
        "log.flush.offset.checkpoint.interval.ms": str(args.checkpoint_ms),
        "auto.create.topics.enable": "false",
        "num.recovery.threads.per.data.dir": str(args.recovery_threads)})
    rows: list[str] = []
    try:
        broker.start()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("rec", args.partitions, 1)])["rec"].result(timeout=120)
        log(f"filling {args.gb:g} GiB into {args.partitions} partitions (segments of {args.segment_mb} MiB) ...")
        mbs = fill(broker.bootstrap, "rec", args.partitions, int(args.gb * 2**30))
        size = sum(f.stat().st_size for f in broker.log_dir.rglob("*.log"))
        rows.append(f"log: {size / 2**30:.2f} GiB in {args.partitions} partitions, "
                    f"{len(list(broker.log_dir.rglob('*.log')))} segments; filled at {mbs:.0f} MB/s")
        log(rows[-1])
        time.sleep(args.settle_s)
        broker.kill()
        unclean = serving(broker, "rec")
        rows.append(f"after kill -9:          serving in {unclean:6.1f} s; {breakdown(broker)}")
        log(rows[-1])
        stop_start = time.monotonic()
        broker.stop(signal.SIGTERM, timeout=600)
        stopped = time.monotonic() - stop_start
        clean = serving(broker, "rec")
        rows.append(f"after a clean shutdown: serving in {clean:6.1f} s; {breakdown(broker)} (the shutdown "
                    f"itself took {stopped:.1f} s)")
        log(rows[-1])
    finally:
        broker.kill()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gb", type=float, default=10.0)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--segment-mb", type=int, default=4)
    parser.add_argument("--checkpoint-ms", type=int, default=5000)
    parser.add_argument("--settle-s", type=float, default=8.0)
    parser.add_argument("--recovery-threads", type=int, default=1, help="num.recovery.threads.per.data.dir")
    parser.add_argument("--dir", help="work directory (default: a new temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    print(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
