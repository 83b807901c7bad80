"""Many partitions on a 3-broker ZooKeeper cluster (issue #21).

    .venv/bin/python bench/many_partitions.py --partitions 10000 --topics 10 --rf 3
    .venv/bin/python bench/many_partitions.py --partitions 1000 --records 100000 --kill controller

Starts ZooKeeper and three brokers (zookeeper.session.timeout.ms=6000 unless --session-timeout-ms), then:
  * create: ``--topics`` topics with ``--partitions`` partitions in all (RF ``--rf``, min.insync.replicas=2 when
    RF > 1); time from CreateTopics until every partition has a leader and a full ISR in a Metadata answer;
  * throughput: ``--records`` records of 100 B (acks=all, linger.ms=5), spread round-robin over the 10 partitions
    of a small topic, then over every partition; then one consumer reads them all back (records/s of each side,
    and the ratio many/10). ``--client confluent`` (default) uses confluent-kafka: librdkafka puts one partition
    in each ProduceRequest (its issue #1700), so over 10,000 partitions it sends a request per batch of one or two
    records and the phase measures the broker's request rate. ``--client moldau`` uses Moldau's own client, which,
    like the Java client, kafka-python and aiokafka, puts every ready partition of one leader in one request, so
    the phase measures the broker's cost per partition;
  * RSS of each broker (and per partition replica) after the traffic;
  * failover: SIGKILL of one broker (``--kill follower``: one that is not the controller, ``controller``: the
    controller); time until every partition has a live leader in Metadata, and until one acks=all record has
    been written to every partition.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.integration.harness import BrokerProcess  # noqa: E402
from tests.integration.zookeeper import ZooKeeperProcess  # noqa: E402

VALUE = b"x" * 100


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def topic_sizes(partitions: int, topics: int) -> dict[str, int]:
    base, extra = divmod(partitions, topics)
    return {f"many-{i}": base + (1 if i < extra else 0) for i in range(topics)}


def wait_all_led(bootstrap: str, sizes: dict[str, int], rf: int, timeout: float,
                 dead: int | None = None) -> float:
    """Seconds until every partition of ``sizes`` has a leader (not ``dead``) and, when dead is None, a full ISR."""
    probe = Producer({"bootstrap.servers": bootstrap})
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        try:
            md = probe.list_topics(timeout=10)
        except Exception:  # noqa: BLE001 - a broker may be gone; retry
            time.sleep(0.2)
            continue
        ok = True
        for name, n in sizes.items():
            t = md.topics.get(name)
            if t is None or t.error is not None or len(t.partitions) != n:
                ok = False
                break
            for p in t.partitions.values():
                if p.leader < 0 or p.leader == dead or (dead is None and len(p.isrs) < rf):
                    ok = False
                    break
            if not ok:
                break
        if ok:
            return time.monotonic() - start
        time.sleep(0.2)
    raise TimeoutError(f"not every partition led within {timeout:.0f} s")


def producer(bootstrap: str, records: int, timeout_ms: int = 300000) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "acks": -1, "linger.ms": 5, "batch.size": 1048576,
                     "queue.buffering.max.messages": max(records + 1000, 100000),
                     "queue.buffering.max.kbytes": 2097151, "compression.type": "none",
                     "message.timeout.ms": timeout_ms, "request.timeout.ms": 120000, "sticky.partitioning.linger.ms": 0})


def produce_moldau(bootstrap: str, targets: list[tuple[str, int]], records: int) -> float:
    from moldau import Producer as MoldauProducer

    with MoldauProducer(bootstrap_servers=bootstrap, acks=-1, linger_ms=5, batch_size=1048576,
                        buffer_memory=1 << 30, max_request_size=8 << 20, request_timeout_ms=120000,
                        delivery_timeout_ms=300000) as p:
        p.send(targets[0][0], VALUE, partition=targets[0][1]).result(60)  # metadata and connections first
        start = time.perf_counter()
        base, extra = divmod(records, len(targets))
        # Its batch call, one per partition (the per-record send() path makes the client the bottleneck)
        futures = [p.send_many(topic, [VALUE] * (base + (1 if i < extra else 0)), partition=part)
                   for i, (topic, part) in enumerate(targets) if base or i < extra]
        counts = [f.result(600) for f in futures]
        elapsed = time.perf_counter() - start
    if sum(counts) != records:
        raise RuntimeError(f"{sum(counts)} of {records} records acknowledged")
    return records / elapsed


def consume_moldau(bootstrap: str, targets: list[tuple[str, int]], records: int) -> float:
    from moldau import Consumer as MoldauConsumer

    c = MoldauConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest",
                       fetch_max_wait_ms=100, max_poll_records=100_000)
    c.assign(targets)
    got = 0
    start = time.perf_counter()
    deadline = time.monotonic() + 600
    while got < records and time.monotonic() < deadline:
        got += len(c.poll(timeout_ms=500))
    elapsed = time.perf_counter() - start
    c.close(autocommit=False)
    if got < records:
        raise RuntimeError(f"consumed {got} of {records}")
    return records / elapsed


def produce(bootstrap: str, targets: list[tuple[str, int]], records: int) -> float:
    errors: list[Any] = []
    p = producer(bootstrap, records)
    p.list_topics(timeout=10)
    start = time.perf_counter()
    n = len(targets)
    for i in range(records):
        topic, part = targets[i % n]
        while True:
            try:
                p.produce(topic, VALUE, partition=part, on_delivery=lambda err, _m: err and errors.append(err))
                break
            except BufferError:
                p.poll(0.001)
        if i & 0x3FFF == 0:
            p.poll(0)
    remaining = p.flush(600)
    elapsed = time.perf_counter() - start
    if remaining or errors:
        raise RuntimeError(f"{remaining} undelivered, errors {errors[:3]}")
    return records / elapsed


def consume(bootstrap: str, targets: list[tuple[str, int]], records: int) -> float:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"many-{time.time_ns()}", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in targets])
    got = 0
    start = time.perf_counter()
    deadline = time.monotonic() + 600
    while got < records and time.monotonic() < deadline:
        for msg in c.consume(10000, 0.5):
            if msg.error() is None:
                got += 1
    elapsed = time.perf_counter() - start
    c.close()
    if got < records:
        raise RuntimeError(f"consumed {got} of {records}")
    return records / elapsed


def write_everywhere(bootstrap: str, targets: list[tuple[str, int]], start: float, timeout: float) -> float:
    """Seconds from ``start`` until one acks=all record has been written to every partition (retrying the rest)."""
    pending = set(targets)
    p = producer(bootstrap, len(targets), timeout_ms=5000)
    done: list[tuple[str, int]] = []

    def delivered(err: Any, m: Any) -> None:
        if err is None:
            done.append((m.topic(), m.partition()))

    while pending and time.monotonic() - start < timeout:
        for topic, part in pending:
            p.produce(topic, VALUE, partition=part, on_delivery=delivered)
        p.flush(30)
        pending.difference_update(done)
    if pending:
        raise TimeoutError(f"{len(pending)} partitions not writable within {timeout:.0f} s")
    return time.monotonic() - start


def controller_id(bootstrap: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return int(admin.describe_cluster().result(timeout=30).controller.id)


def run(args: argparse.Namespace) -> str:
    root = Path(tempfile.mkdtemp(prefix="moldau-many-"))
    zk = ZooKeeperProcess(root / "zk")
    brokers: list[BrokerProcess] = []
    rows: list[str] = []
    try:
        zk.start()
        for i in (1, 2, 3):
            brokers.append(BrokerProcess(root / f"b{i}", broker_id=i, overrides={
                "zookeeper.connect": zk.connect + "/many",
                "zookeeper.session.timeout.ms": str(args.session_timeout_ms),
                "auto.leader.rebalance.enable": "false", "auto.create.topics.enable": "false"}).start())
        bootstrap = ",".join(b.bootstrap for b in brokers)
        sizes = topic_sizes(args.partitions, args.topics)
        config = {"min.insync.replicas": str(min(args.rf, 2))}
        admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 300000})
        deadline = time.monotonic() + 60  # every broker registered before RF 3 topics are asked for
        while len(admin.list_topics(timeout=10).brokers) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        admin.create_topics([NewTopic("ten", 10, args.rf, config=config)])["ten"].result(timeout=60)
        wait_all_led(bootstrap, {"ten": 10}, args.rf, 60)
        rss0 = [b.rss_bytes() for b in brokers]
        log(f"creating {args.partitions:,} partitions in {args.topics} topics, RF {args.rf} ...")
        t0 = time.monotonic()
        futures = admin.create_topics([NewTopic(n, k, args.rf, config=config) for n, k in sizes.items()],
                                      operation_timeout=300, request_timeout=600)
        for f in futures.values():
            f.result(timeout=600)
        answered = time.monotonic() - t0
        led = answered + wait_all_led(bootstrap, sizes, args.rf, 900)
        rows.append(f"create {args.partitions:,} partitions: CreateTopics answered {answered:.1f} s, every "
                    f"partition led with a full ISR {led:.1f} s")
        log(rows[-1])
        ten = [("ten", p) for p in range(10)]
        many = [(n, p) for n, k in sizes.items() for p in range(k)]
        log(f"produce {args.records:,} x 100 B over 10 partitions ...")
        put, get = (produce_moldau, consume_moldau) if args.client == "moldau" else (produce, consume)
        p10 = put(bootstrap, ten, args.records)
        log(f"produce {args.records:,} x 100 B over {len(many):,} partitions ...")
        pmany = put(bootstrap, many, args.records)
        log("consume both ...")
        c10 = get(bootstrap, ten, args.records)
        cmany = get(bootstrap, many, args.records)
        rows.append(f"{f'{args.client}, acks=all, linger.ms=5':<24} {'10 partitions':>15} "
                    f"{f'{len(many):,} partitions':>18} {'ratio':>6}")
        rows.append(f"{'produce records/s':<24} {p10:>15,.0f} {pmany:>18,.0f} {pmany / p10:>6.2f}")
        rows.append(f"{'consume records/s':<24} {c10:>15,.0f} {cmany:>18,.0f} {cmany / c10:>6.2f}")
        rss = [b.rss_bytes() for b in brokers]
        replicas = args.partitions * args.rf / 3
        rows.append("RSS MB per broker: " + ", ".join(f"{r / 2**20:.0f}" for r in rss) + " (before the topics: "
                    + ", ".join(f"{r / 2**20:.0f}" for r in rss0) + f"); ~{(sum(rss) - sum(rss0)) / 3 / replicas / 1024:.1f}"
                    f" KB per partition replica")
        log("\n".join(rows[-4:]))
        controller = controller_id(bootstrap)
        victim = next(b for b in brokers if (b.broker_id == controller) == (args.kill == "controller"))
        survivors = [b for b in brokers if b is not victim]
        sb = ",".join(b.bootstrap for b in survivors)
        log(f"SIGKILL broker {victim.broker_id} ({args.kill}; controller was {controller}) ...")
        start = time.monotonic()
        victim.kill()
        led_s = wait_all_led(sb, sizes, args.rf, 300, dead=victim.broker_id)
        writable = write_everywhere(sb, many, start, 300)
        rows.append(f"SIGKILL of broker {victim.broker_id} ({args.kill}), session timeout "
                    f"{args.session_timeout_ms / 1000:.0f} s: every partition led by a survivor {led_s:.1f} s, "
                    f"one acks=all record written to every partition {writable:.1f} s")
        log(rows[-1])
    finally:
        for b in brokers:
            b.kill()
        zk.stop()
        shutil.rmtree(root, ignore_errors=True)
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--rf", type=int, default=3)
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--kill", choices=("follower", "controller"), default="follower")
    parser.add_argument("--client", choices=("confluent", "moldau"), default="confluent",
                        help="the client of the throughput phase (see above)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the clean-up (brokers, ZooKeeper, files)
    print(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
