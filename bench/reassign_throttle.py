"""A throttled reassignment next to an acks=all producer (issue #23, KIP-73).

    .venv/bin/python bench/reassign_throttle.py                       # 1 GiB moved under --throttle 10000000
    .venv/bin/python bench/reassign_throttle.py --mib 256             # scaled down

ZooKeeper and three brokers. Topic ``big`` (one partition, only on broker 1) is filled with ``--mib`` MiB; topic
``live`` (one partition, replicas [1, 3], min.insync.replicas=2) takes an acks=all confluent-kafka producer
(1 KiB records), so its follower on broker 3 fetches from broker 1 exactly as the reassignment's new replica does.
First the producer alone (``--alone-s``, after ``--warmup-s``), then ``moldau-reassign-partitions --execute
--throttle`` moves ``big`` from [1] to [1, 3] while the producer keeps going, then (the move verified) the producer
alone again: "alone" is the mean of the two alone phases. Before each alone phase the page cache is written back
(sync), and the phases are long, so both see the same disk: with a 2 s warm-up and 10 s phases they were 1.8x and
2.0x apart (in opposite directions) in two runs, with 20 s and 45 s 1.06x. The copy rate is the new replica's
log on broker 3 growing from 20% to 95% of the partition (sampled every 0.5 s), past the replication quota's first-window allowance
(throttle x (replication.quota.window.num - 1) x window size = 100 MB, which a move gets at once, as in Kafka);
the producer's rate is its acknowledged bytes over the same interval. Then ``--verify`` runs until the move is
done and the throttle configs must be gone.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench._cluster import cluster  # noqa: E402
from tests.integration.harness import wait_until  # noqa: E402


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class AcksAllProducer:
    """An acks=all producer in a thread; ``acked`` counts acknowledged bytes, ``samples`` (time, acked)."""

    def __init__(self, bootstrap: str) -> None:
        self.acked = 0
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        value = b"p" * 1024

        def acked(err: object, msg: object) -> None:
            if err is None:
                self.acked += 1024
        last = 0.0
        while not self._stop.is_set():
            try:
                self._p.produce("live", value, on_delivery=acked)
            except BufferError:
                self._p.poll(0.05)
            self._p.poll(0)
            now = time.monotonic()
            if now - last >= 0.25:
                self.samples.append((now, self.acked))
                last = now
        self._p.flush(10)

    def rate(self, t0: float, t1: float) -> float:
        def at(t: float) -> int:
            before = [n for ts, n in self.samples if ts <= t]
            return before[-1] if before else 0
        return (at(t1) - at(t0)) / (t1 - t0)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.glob("*.log")) if path.exists() else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mib", type=int, default=1024, help="size of the partition moved (default 1 GiB)")
    ap.add_argument("--throttle", type=int, default=10_000_000, help="--throttle of the reassignment, bytes/s")
    ap.add_argument("--alone-s", type=float, default=45.0,
                    help="each alone phase (before and after the move); long enough to take in the write-back of "
                         "the producer's own data, as the ~100 s move phase does")
    ap.add_argument("--warmup-s", type=float, default=20.0,
                    help="the producer runs this long before its first alone phase, so that phase, like the one "
                         "after the move, sees the page cache's write-back of the producer's own data going")
    ap.add_argument("--work-dir", default=None, help="where the brokers' logs go (default: the system's temp dir; "
                    "a 1 GiB fill into /dev/shm stalled this 2-core VM for minutes)")
    args = ap.parse_args()
    with cluster(work_dir=args.work_dir, prefix="moldau-bench-reassign-",
                 overrides={"log.retention.check.interval.ms": "1000", "log.segment.delete.delay.ms": "1000"}) as c:
        root, brokers, bootstrap = c.root, c.brokers, c.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for f in admin.create_topics([
                NewTopic("big", num_partitions=1, replica_assignment=[[1]]),
                # The producer writes ~100 MiB/s to two replicas for ~4 minutes: without a bound its log took
                # the disk's last 38 GB (2026-11-27 02:32). Only its last 1 GiB is kept.
                NewTopic("live", num_partitions=1, replica_assignment=[[1, 3]],
                         config={"min.insync.replicas": "2", "segment.bytes": str(64 << 20),
                                 "retention.bytes": str(1 << 30)})]).values():
            f.result(30)
        log(f"filling big with {args.mib} MiB")
        t = time.monotonic()
        filler = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1048576})
        value = b"b" * 1024
        for _ in range(args.mib * 1024):
            while True:
                try:
                    filler.produce("big", value)
                    break
                except BufferError:
                    filler.poll(0.05)
            filler.poll(0)
        assert filler.flush(120) == 0
        big_size = dir_size(brokers[0].partition_dir("big", 0))
        log(f"filled {big_size / 1e6:.0f} MB in {time.monotonic() - t:.0f} s")
        # Nothing of the fill left to write back when the first alone phase starts (as for the second, below).
        t = time.monotonic()
        os.sync()
        log(f"sync took {time.monotonic() - t:.1f} s")

        producer = AcksAllProducer(bootstrap)
        time.sleep(args.warmup_s)
        a0 = time.monotonic()
        time.sleep(args.alone_s)
        alone = producer.rate(a0, time.monotonic())

        plan = root / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "big", "partition": 0,
                                                                  "replicas": [1, 3]}]}))

        def tool(*argv: str) -> str:
            for _ in range(3):  # the loaded machine: a connect can time out
                proc = subprocess.run([sys.executable, "-m", "moldau.tools.reassign_partitions", "--bootstrap-server",
                                       bootstrap, "--reassignment-json-file", str(plan), *argv],
                                      capture_output=True, text=True, timeout=120, cwd=ROOT)
                if proc.returncode == 0:
                    return proc.stdout
                log(proc.stderr.strip())
            raise RuntimeError(proc.stderr)

        started = time.monotonic()
        log(tool("--execute", "--throttle", str(args.throttle)).strip())
        target = brokers[2].partition_dir("big", 0)
        sizes: list[tuple[float, int]] = []
        while True:
            size = dir_size(target)
            sizes.append((time.monotonic(), size))
            if size >= big_size:
                break
            if time.monotonic() - started > 4 * args.mib * 1048576 / args.throttle + 120:
                raise RuntimeError(f"the move did not finish: {size} of {big_size} bytes")
            time.sleep(0.5)
        copied = time.monotonic()
        log(" ".join(f"{t - started:.1f}s:{n / 1e6:.0f}MB" for t, n in sizes))
        lo = next(s for s in sizes if s[1] >= 0.2 * big_size)
        hi = next(s for s in sizes if s[1] >= 0.95 * big_size)
        if hi[0] <= lo[0]:
            raise RuntimeError("the move was too quick to measure (no throttle?)")
        copy_rate = (hi[1] - lo[1]) / (hi[0] - lo[0])
        beside = producer.rate(lo[0], hi[0])
        wait_until(lambda: "is completed" in tool("--verify"), 120, "the reassignment")
        # Alone again once the move is done: the mean of before and after takes a drift of the machine's load
        # over the minutes of the move out of the ratio (one phase before and one after weigh it alike).
        # And the new replica's 1 GiB written back before that phase too, as the fill was before the first one.
        t = time.monotonic()
        os.sync()
        log(f"sync took {time.monotonic() - t:.1f} s")
        a2 = time.monotonic()
        time.sleep(args.alone_s)
        after = producer.rate(a2, time.monotonic())
        producer.stop()
        import kazoo.client
        zkc = kazoo.client.KazooClient(c.zk_connect)
        zkc.start(timeout=10)
        try:
            leftover = [k for k in json.loads(zkc.get("/config/topics/big")[0])["config"] if "throttled" in k]
            for i in (1, 2, 3):
                if zkc.exists(f"/config/brokers/{i}"):
                    leftover += [k for k in json.loads(zkc.get(f"/config/brokers/{i}")[0])["config"]
                                 if "throttled" in k]
        finally:
            zkc.stop()
        print(f"\nmoved {big_size / 1e6:.0f} MB under --throttle {args.throttle} in {copied - started:.1f} s "
              f"(tool start-up included)\n")
        print("| partition moved | --throttle | copy rate (20-95%) | vs throttle | acks=all producer alone | "
              "during the move | ratio | throttle configs after --verify |")
        print("|---|---|---|---|---|---|---|---|")
        print(f"| {big_size / 1048576:.0f} MiB | {args.throttle / 1e6:.0f} MB/s | {copy_rate / 1e6:.2f} MB/s | "
              f"{copy_rate / args.throttle:.2f}x | {(alone + after) / 2 / 1048576:.2f} MiB/s (before "
              f"{alone / 1048576:.2f}, after {after / 1048576:.2f}) | {beside / 1048576:.2f} MiB/s | "
              f"{beside / ((alone + after) / 2):.2f} | {', '.join(leftover) or 'none'} |")


if __name__ == "__main__":
    main()
