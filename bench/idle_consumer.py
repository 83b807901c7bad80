"""What an idle consumer of many partitions costs the broker, with and without an incremental fetch session
(KIP-227, issue #21).

    .venv/bin/python bench/idle_consumer.py                       # 10,000 partitions, 20 s per consumer
    .venv/bin/python bench/idle_consumer.py --partitions 2000 --seconds 10

Starts one broker (no ZooKeeper: the cost measured is the Fetch path, not replication), creates a topic of
``--partitions`` partitions with nothing in them, and for each consumer in turn assigns all partitions at their end
and lets it poll for ``--seconds`` with fetch.max.wait.ms=500 (Kafka's default) while nothing is produced:
  * moldau, session: Moldau's consumer (an incremental session: after the first fetch its requests name nothing);
  * moldau, no session: the same consumer with sessions turned off in-process (full fetches of every partition,
    what every consumer sent before sessions were given to consumers);
  * kafka-python (asks for a session), confluent-kafka (librdkafka: full fetches).
Reported per consumer: the broker's CPU (% of a core, from /proc/<pid>/stat), the consumer process's own CPU
where it runs in this process (Moldau's, kafka-python's), and the broker's Fetch requests per second. Not part of
the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_END, TopicPartition
from confluent_kafka import Consumer as CkConsumer
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench._cluster import cpu_seconds  # noqa: E402
from tests.integration.harness import BrokerProcess, wait_until  # noqa: E402

TOPIC = "idle"


def fetch_requests(broker: BrokerProcess) -> float:
    with urllib.request.urlopen(broker.metrics_url, timeout=10) as resp:
        text = resp.read().decode()
    found = re.search(r'^moldau_requests_total\{api="fetch"\} ([0-9.e+]+)', text, re.M)
    return float(found.group(1)) if found else 0.0


def measure(broker: BrokerProcess, seconds: float, warmup: float, poll: Any) -> tuple[float, float, float]:
    """(broker CPU %, this process's CPU %, fetches/s) while ``poll()`` runs in a thread."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            poll()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    time.sleep(warmup)  # the first full fetch and the session's opening are left out
    b0, m0, f0, t0 = cpu_seconds(broker.pid), time.process_time(), fetch_requests(broker), time.monotonic()
    time.sleep(seconds)
    b1, m1, f1, t1 = cpu_seconds(broker.pid), time.process_time(), fetch_requests(broker), time.monotonic()
    stop.set()
    thread.join(30)
    dt = t1 - t0
    return 100 * (b1 - b0) / dt, 100 * (m1 - m0) / dt, (f1 - f0) / dt


def moldau_row(broker: BrokerProcess, partitions: int, seconds: float, warmup: float, session: bool
               ) -> tuple[float, float, float]:
    import moldau.fetcher as fetcher
    from moldau.consumer import Consumer
    from moldau.consumer import TopicPartition as MTP

    saved = fetcher.SESSION_VERSION
    if not session:
        fetcher.SESSION_VERSION = 1 << 16  # no Fetch version has sessions: full fetches, as before
    loop = asyncio.new_event_loop()
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "enable.auto.commit": False,
                         "auto.offset.reset": "latest"})
    try:
        loop.run_until_complete(consumer.start())
        consumer.assign([MTP(TOPIC, p) for p in range(partitions)])
        return measure(broker, seconds, warmup,
                       lambda: loop.run_until_complete(consumer.getmany(timeout_ms=1000)))
    finally:
        loop.run_until_complete(consumer.close())
        loop.close()
        fetcher.SESSION_VERSION = saved


def kafka_python_row(broker: BrokerProcess, partitions: int, seconds: float, warmup: float
                     ) -> tuple[float, float, float]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             auto_offset_reset="latest", request_timeout_ms=60000)
    try:
        consumer.assign([KTP(TOPIC, p) for p in range(partitions)])
        consumer.seek_to_end()
        return measure(broker, seconds, warmup, lambda: consumer.poll(timeout_ms=1000))
    finally:
        consumer.close()


def confluent_row(broker: BrokerProcess, partitions: int, seconds: float, warmup: float
                  ) -> tuple[float, float, float]:
    consumer = CkConsumer({"bootstrap.servers": broker.bootstrap, "group.id": f"idle-{time.time_ns()}",
                           "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_END) for p in range(partitions)])
        return measure(broker, seconds, warmup, lambda: consumer.poll(1.0))
    finally:
        consumer.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=10.0)
    parser.add_argument("--clients", default="moldau,moldau-nosession,kafka-python,confluent")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="moldau-idle-"))
    broker = BrokerProcess(root / "broker")
    rows = [f"{'consumer':<22} {'broker CPU %':>12} {'client CPU %':>12} {'fetches/s':>10} {'sessions':>9}"]
    try:
        broker.start()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, num_partitions=args.partitions, replication_factor=1)],
                            operation_timeout=120)[TOPIC].result(timeout=300)
        probe = CkConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "probe"})
        wait_until(lambda: len(probe.list_topics(TOPIC, timeout=30).topics[TOPIC].partitions) == args.partitions,
                   120, "every partition created")
        probe.close()
        time.sleep(2.0)
        b0, t0 = cpu_seconds(broker.pid), time.monotonic()
        time.sleep(5.0)
        idle = 100 * (cpu_seconds(broker.pid) - b0) / (time.monotonic() - t0)
        rows.append(f"{'(no consumer)':<22} {idle:>12.1f}")
        runs = {"moldau": lambda: moldau_row(broker, args.partitions, args.seconds, args.warmup, True),
                "moldau-nosession": lambda: moldau_row(broker, args.partitions, args.seconds, args.warmup, False),
                "kafka-python": lambda: kafka_python_row(broker, args.partitions, args.seconds, args.warmup),
                "confluent": lambda: confluent_row(broker, args.partitions, args.seconds, args.warmup)}
        for name in args.clients.split(","):
            broker_cpu, client_cpu, fetches = runs[name]()
            sessions = broker.gauge("moldau_incremental_fetch_sessions")
            client = "" if name == "confluent" else f"{client_cpu:.1f}"
            rows.append(f"{name:<22} {broker_cpu:>12.1f} {client:>12} {fetches:>10.1f} {sessions:>9.0f}")
            print(rows[-1], file=sys.stderr, flush=True)
        rows.append(f"{args.partitions:,} empty partitions, one broker, fetch.max.wait.ms=500; {args.seconds:.0f} s "
                    f"measured after {args.warmup:.0f} s; 'sessions': the broker's gauge after the run (sessions stay "
                    "until evicted)")
    finally:
        broker.kill()
        shutil.rmtree(root, ignore_errors=True)
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
