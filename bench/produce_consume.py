"""Produce/consume throughput of one Moldau broker, measured with confluent-kafka (librdkafka).

    .venv/bin/python bench/produce_consume.py                      # 1,000,000 x 100 B, then 200,000 x 1 KiB
    .venv/bin/python bench/produce_consume.py --records 200000 --skip-1k --json
    .venv/bin/python bench/produce_consume.py --replicated             # RF 3 acks=all vs 1 broker acks=1 (replicated.py)

Starts its own broker process (like the test fixture) on a free 127.0.0.1 port with a temporary log dir.
For each record size it measures:
  * produce: records/s and MB/s until every record is acknowledged (acks=1, linger.ms=5, batch.size=1 MiB,
    one partition, no compression);
  * client ceiling: the same produce() loop against an address where no broker listens, with a queue big
    enough to hold every record, i.e. how fast this Python process can hand records to librdkafka at all;
  * consume: records/s and MB/s reading them all back (assign from the beginning, large fetches).
It also reports the broker's RSS at rest and after the runs. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.integration.harness import BrokerProcess, closed_port  # noqa: E402

MB = 1_000_000


@dataclass(slots=True)
class Result:
    size: int
    records: int
    produce_s: float
    produce_rps: float
    produce_mbps: float
    ceiling_s: float
    ceiling_rps: float
    consume_s: float
    consume_first_s: float
    consume_rps: float
    consume_steady_rps: float
    consume_mbps: float
    broker_cpu_produce_s: float
    broker_cpu_consume_s: float


def producer_conf(bootstrap: str, records: int, size: int) -> dict[str, Any]:
    queue_kbytes = max(1024, records * (size + 64) // 1024 + 1024)
    return {
        "bootstrap.servers": bootstrap,
        "acks": 1,
        "linger.ms": 5,
        "batch.size": 1048576,
        "batch.num.messages": 1000000,
        "queue.buffering.max.messages": max(records + 1000, 100000),
        "queue.buffering.max.kbytes": min(queue_kbytes, 2147483647),
        "compression.type": "none",
        "message.timeout.ms": 300000,
        "delivery.report.only.error": True,
    }


def produce_loop(producer: Producer, topic: str, value: bytes, records: int) -> None:
    produce = producer.produce
    poll = producer.poll
    for i in range(records):
        while True:
            try:
                produce(topic, value, partition=0)
                break
            except BufferError:
                poll(0.001)
        if i & 0x3FFF == 0:
            poll(0)


def measure_ceiling(topic: str, value: bytes, records: int) -> float:
    """Seconds to hand `records` records to librdkafka when no broker is reachable (queue holds them all)."""
    conf = producer_conf(f"127.0.0.1:{closed_port()}", records, len(value))
    conf["log_level"] = 0  # connection refused is expected here
    producer = Producer(conf)
    start = time.perf_counter()
    produce_loop(producer, topic, value, records)
    elapsed = time.perf_counter() - start
    producer.purge()
    producer.flush(0)
    return elapsed


def run_size(broker: BrokerProcess, size: int, records: int, log: Any) -> Result:
    topic = f"bench-{size}-{records}-{int(time.time())}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(timeout=30)
    value = (b"0123456789abcdef" * (size // 16 + 1))[:size]

    log(f"[{size} B] client ceiling: {records:,} produce() calls with no reachable broker (best of 2) ...")
    ceiling_s = min(measure_ceiling(topic, value, records) for _ in range(2))

    log(f"[{size} B] producing {records:,} records ...")
    errors: list[KafkaError] = []
    conf = producer_conf(broker.bootstrap, records, size)
    conf["on_delivery"] = lambda err, _msg: errors.append(err) if err is not None else None
    producer = Producer(conf)
    producer.list_topics(topic, timeout=10)  # connect and learn the leader before the clock starts
    cpu0 = broker_cpu(broker)
    start = time.perf_counter()
    produce_loop(producer, topic, value, records)
    remaining = producer.flush(300)
    produce_s = time.perf_counter() - start
    cpu1 = broker_cpu(broker)
    if remaining or errors:
        raise RuntimeError(f"produce failed: {remaining} undelivered, errors: {errors[:5]}")

    log(f"[{size} B] consuming {records:,} records ...")
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "moldau-bench",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "fetch.max.bytes": 52428800,
            "max.partition.fetch.bytes": 10485760,
            # Let librdkafka prefetch everything: with the defaults it stops at 100,000 queued messages and then
            # backs off for fetch.queue.backoff.ms (1 s), which would measure that pause, not the broker.
            "queued.min.messages": min(records + 1, 10_000_000),
            "queued.max.messages.kbytes": 2097151,
            "fetch.queue.backoff.ms": 10,
            "fetch.wait.max.ms": 100,
        }
    )
    got = 0
    last_offset = -1
    first_s = 0.0
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        start = time.perf_counter()
        deadline = time.monotonic() + 600
        while got < records:
            if time.monotonic() > deadline:
                raise RuntimeError(f"consumed only {got:,} of {records:,} records in 600 s")
            msgs = consumer.consume(num_messages=min(10000, records - got), timeout=1.0)  # a short batch waits its timeout
            if msgs and not first_s:
                first_s = time.perf_counter() - start
            for msg in msgs:
                if msg.error() is not None:
                    raise RuntimeError(f"consume error: {msg.error()}")
                got += 1
                last_offset = msg.offset()
        consume_s = time.perf_counter() - start
        cpu2 = broker_cpu(broker)
    finally:
        consumer.close()
    if last_offset != records - 1:
        raise RuntimeError(f"last consumed offset {last_offset}, expected {records - 1}")

    return Result(
        size=size,
        records=records,
        produce_s=produce_s,
        produce_rps=records / produce_s,
        produce_mbps=records * size / produce_s / MB,
        ceiling_s=ceiling_s,
        ceiling_rps=records / ceiling_s,
        consume_s=consume_s,
        consume_first_s=first_s,
        consume_rps=records / consume_s,
        consume_steady_rps=records / max(consume_s - first_s, 1e-9),
        consume_mbps=records * size / consume_s / MB,
        broker_cpu_produce_s=cpu1 - cpu0,
        broker_cpu_consume_s=cpu2 - cpu1,
    )


def broker_cpu(broker: BrokerProcess) -> float:
    import psutil

    t = psutil.Process(broker.pid).cpu_times()
    return float(t.user + t.system)


def table(results: list[Result], rss_rest: int, rss_after: int) -> str:
    head = (
        f"{'size':>6} {'records':>10} | {'produce rec/s':>13} {'MB/s':>7} {'broker cpu':>10} | "
        f"{'client ceiling rec/s':>20} {'% of it':>7} | {'consume rec/s':>13} {'MB/s':>7} {'1st rec':>7} {'after 1st':>10} {'broker cpu':>10}"
    )
    lines = [head, "-" * len(head)]
    for r in results:
        lines.append(
            f"{r.size:>5}B {r.records:>10,} | {r.produce_rps:>13,.0f} {r.produce_mbps:>7.1f} "
            f"{r.broker_cpu_produce_s:>9.1f}s | {r.ceiling_rps:>20,.0f} {100 * r.produce_rps / r.ceiling_rps:>6.0f}% | "
            f"{r.consume_rps:>13,.0f} {r.consume_mbps:>7.1f} {r.consume_first_s:>6.2f}s {r.consume_steady_rps:>10,.0f} {r.broker_cpu_consume_s:>9.1f}s"
        )
    lines.append("rates include start-up (connect, metadata, offset lookup); '1st rec' = time to the first record, "
                 "'after 1st' = consume rec/s from then on; broker cpu = user+sys seconds of the broker process")
    lines.append(f"broker RSS: {rss_rest / 2**20:.0f} MiB at rest, {rss_after / 2**20:.0f} MiB after the runs")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000, help="records of --size bytes (1,000,000)")
    parser.add_argument("--size", type=int, default=100, help="record value size in bytes (100)")
    parser.add_argument("--records-1k", type=int, default=200_000, help="records for the 1 KiB run (200,000)")
    parser.add_argument("--skip-1k", action="store_true", help="skip the 1 KiB run")
    parser.add_argument("--json", action="store_true", help="print the results as JSON on stdout")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", help="broker setting")
    parser.add_argument("--keep", action="store_true", help="keep the broker's data directory")
    parser.add_argument("--replicated", action="store_true",
                        help="three brokers, RF 3, acks=all, min.insync.replicas=2 next to one broker with acks=1, "
                             "plus end-to-end latency at 10,000 records/s (see bench/replicated.py)")
    args = parser.parse_args(argv)
    if args.replicated:
        from bench.replicated import main as replicated_main

        return replicated_main(["--records", str(min(args.records, 500_000))])

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    workdir = Path(tempfile.mkdtemp(prefix="moldau-bench-"))
    overrides = dict(item.split("=", 1) for item in args.override)
    broker = BrokerProcess(workdir, overrides=overrides)
    results: list[Result] = []
    try:
        broker.start()
        time.sleep(1.0)
        rss_rest = broker.rss_bytes()
        log(f"broker on {broker.bootstrap}, pid {broker.pid}, RSS at rest {rss_rest / 2**20:.0f} MiB")
        runs = [(args.size, args.records)]
        if not args.skip_1k:
            runs.append((1024, args.records_1k))
        for size, records in runs:
            results.append(run_size(broker, size, records, log))
        rss_after = broker.rss_bytes()
        code = broker.stop()
        if code != 0:
            log(f"warning: broker exited with code {code} on SIGTERM")
    except BaseException:
        log(f"--- broker stderr (tail) ---\n{broker.stderr_tail()}")
        raise
    finally:
        broker.kill()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)

    if args.json:
        print(json.dumps({"results": [asdict(r) for r in results], "rss_rest": rss_rest, "rss_after": rss_after},
                         indent=2))
    else:
        print(table(results, rss_rest, rss_after))
    return 0


if __name__ == "__main__":
    sys.exit(main())
