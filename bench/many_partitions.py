"""Many partitions on a 3-broker ZooKeeper cluster (issue #21).

    .venv/bin/python bench/many_partitions.py --partitions 10000 --topics 10 --rf 3
    .venv/bin/python bench/many_partitions.py --partitions 1000 --records 100000 --kill controller
    .venv/bin/python bench/many_partitions.py --partitions 10000 --skip-throughput --kill follower --keep
    .venv/bin/python bench/many_partitions.py --partitions 10000 --records 100000,300000,1000000 --client moldau --skip-failover
    .venv/bin/python bench/many_partitions.py --partitions 10000 --records 1000000 --client moldau --rounds 3

Starts ZooKeeper and three brokers (zookeeper.session.timeout.ms=6000 unless --session-timeout-ms), then:
  * create: ``--topics`` topics with ``--partitions`` partitions in all (RF ``--rf``, min.insync.replicas=2 when
    RF > 1); time from CreateTopics until every partition has a leader and a full ISR in a Metadata answer;
  * warm-up (unless ``--no-settle``): one record to every partition, then a bounded wait until every partition
    replica has written its ``leader-epoch-checkpoint`` (a new replica writes it 10 s after its first epoch or
    append, a file creation each: before this wait they fell into whichever timed phase ran then, 10 or 10,000
    partitions) and the brokers are idle;
  * throughput: ``--records`` records of 100 B (acks=all, linger.ms=5), spread round-robin over the 10 partitions
    of a small topic, then over every partition; then one consumer reads them all back (records/s of each side,
    and the ratio many/10). ``--rounds N`` repeats this, every other round with the many partitions first, and
    reports the median ratios. ``--client confluent`` (default) uses confluent-kafka: librdkafka puts one partition
    in each ProduceRequest (its issue #1700), so over 10,000 partitions it sends a request per batch of one or two
    records and the phase measures the broker's request rate. ``--client moldau`` uses Moldau's own client, which,
    like the Java client, kafka-python and aiokafka, puts every ready partition of one leader in one request, so
    the phase measures the broker's cost per partition (records handed over with ``send_many_partitions``, one
    call per topic);
  * RSS of each broker (and per partition replica) after the traffic;
  * failover: SIGKILL of one broker (``--kill follower``: one that is not the controller, ``controller``: the
    controller), or SIGTERM of one that is not the controller (``--kill shutdown``: a controlled shutdown, which
    moves its leaderships before it exits; the time until the process exits is reported too); time until every partition has a live leader in Metadata, until the dead broker has left every
    ISR in Metadata, and until one acks=all record has been written to every partition (each time from the kill;
    the same write is first timed with every broker up, the "no failure" figure).

The write probe (``--probe moldau``, the default) is Moldau's own producer (acks=all, idempotence off): like
Kafka's Java producer it packs the batches of every partition a broker leads into one Produce request and retries
only the partitions that failed. ``--probe librdkafka`` uses confluent-kafka instead, which sends one partition per
ProduceRequest (librdkafka issue #1700), so 10,000 partitions become 10,000 acks=all requests; with
``message.timeout.ms`` 5000 many of them expire in the client's queue on a 2-core machine and are sent again, so
that figure measures the client's request fan-out as much as the broker's failover. ``--skip-throughput`` skips
the produce/consume phase (the failover is then measured on empty logs); ``--skip-failover`` stops after the
traffic and the RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import functools
import logging
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from moldau.loop_thread import run as on_client_loop  # noqa: E402
from moldau.producer import Producer as MoldauProducer  # noqa: E402
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
    return wait_metadata(bootstrap, sizes, timeout, lambda p: p.leader >= 0 and p.leader != dead and (
        dead is not None or len(p.isrs) >= rf))


def wait_metadata(bootstrap: str, sizes: dict[str, int], timeout: float, ok: Any) -> float:
    """Seconds until ``ok(partition metadata)`` holds for every partition of ``sizes`` in one Metadata answer."""
    probe = Producer({"bootstrap.servers": bootstrap})
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        try:
            md = probe.list_topics(timeout=10)
        except Exception:  # noqa: BLE001 - a broker may be gone; retry
            time.sleep(0.2)
            continue
        if all((t := md.topics.get(name)) is not None and t.error is None and len(t.partitions) == n
               and all(ok(p) for p in t.partitions.values()) for name, n in sizes.items()):
            return time.monotonic() - start
        time.sleep(0.2)
    raise TimeoutError(f"Metadata condition not met within {timeout:.0f} s")


def wait_brokers(bootstrap: str, count: int, timeout: float) -> None:
    probe = Producer({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while len(probe.list_topics(timeout=10).brokers) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"fewer than {count} brokers registered within {timeout:.0f} s")
        time.sleep(0.2)


def leaders(bootstrap: str) -> dict[tuple[str, int], int]:
    md = Producer({"bootstrap.servers": bootstrap}).list_topics(timeout=30)
    return {(t.topic, p.id): p.leader for t in md.topics.values() for p in t.partitions.values()}


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
        # ... of every topic: send_many_partitions of a topic the producer has not seen yet waits for its metadata
        # first (before, 9 of the 10 topics of the 10,000-partition phase did so inside the timed part)
        topics = sorted({t for t, _ in targets})
        cluster = p.aio.cluster

        async def known() -> None:
            cluster.add_topics(topics)
            for topic in topics:
                await cluster.wait_for_topic(topic, 60)

        t0 = time.perf_counter()
        on_client_loop(known(), what="metadata")
        if len(topics) > 1:
            log(f"  metadata of {len(topics)} topics: {time.perf_counter() - t0:.2f} s (not timed)")
        start = time.perf_counter()
        base, extra = divmod(records, len(targets))
        # Its batch call for many partitions, one per topic (one send_many per partition, 10,000 hand-overs to
        # the client's loop, made the client the bottleneck; the per-record send() path even more so)
        by_topic: dict[str, dict[int, list[bytes]]] = {}
        for i, (topic, part) in enumerate(targets):
            if base or i < extra:
                by_topic.setdefault(topic, {})[part] = [VALUE] * (base + (1 if i < extra else 0))
        futures = [p.send_many_partitions(topic, values) for topic, values in by_topic.items()]
        counts = [f.result(600) for f in futures]
        elapsed = time.perf_counter() - start
    if sum(counts) != records:
        raise RuntimeError(f"{sum(counts)} of {records} records acknowledged")
    return records / elapsed


def end_offsets(bootstrap: str, targets: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """Each partition's log end offset (ListOffsets), where the next phase's records will start."""
    from moldau import Consumer as MoldauConsumer
    from moldau import TopicPartition as MoldauTP

    c = MoldauConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        ends = c.end_offsets([MoldauTP(t, p) for t, p in targets])
    finally:
        c.close(autocommit=False)
    return {(tp.topic, tp.partition): offset for tp, offset in ends.items()}


def consume_moldau(bootstrap: str, targets: list[tuple[str, int]], records: int,
                   start: dict[tuple[str, int], int]) -> float:
    from moldau import Consumer as MoldauConsumer
    from moldau import TopicPartition as MoldauTP

    c = MoldauConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest",
                       fetch_max_wait_ms=100, max_poll_records=100_000)
    c.assign(targets)
    for t, p in targets:
        c.seek(MoldauTP(t, p), start.get((t, p), 0))
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


def consume(bootstrap: str, targets: list[tuple[str, int]], records: int,
            start: dict[tuple[str, int], int]) -> float:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"many-{time.time_ns()}", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(t, p, start.get((t, p), OFFSET_BEGINNING)) for t, p in targets])
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


def write_everywhere_librdkafka(bootstrap: str, targets: list[tuple[str, int]], start: float,
                                timeout: float) -> dict[tuple[str, int], float]:
    """Per partition, seconds from ``start`` until one acks=all record was acknowledged (confluent-kafka: one
    ProduceRequest per partition; the partitions not yet written are produced again after each round)."""
    pending = set(targets)
    p = producer(bootstrap, len(targets), timeout_ms=5000)
    acked: dict[tuple[str, int], float] = {}

    def delivered(err: Any, m: Any) -> None:
        if err is None:
            acked.setdefault((m.topic(), m.partition()), time.monotonic() - start)

    while pending and time.monotonic() - start < timeout:
        for topic, part in pending:
            p.produce(topic, VALUE, partition=part, on_delivery=delivered)
        p.flush(30)
        pending.difference_update(acked)
    if pending:
        raise TimeoutError(f"{len(pending)} partitions not writable within {timeout:.0f} s")
    return acked


def write_everywhere_moldau(bootstrap: str, targets: list[tuple[str, int]], start: float,
                            timeout: float) -> dict[tuple[str, int], float]:
    """Per partition, seconds from ``start`` until one acks=all record was acknowledged (Moldau's producer: one
    Produce request per leader with all its partitions; failed partitions are retried by the producer)."""
    acked: dict[tuple[str, int], float] = {}
    retries = RetryCounter()
    producer_log = logging.getLogger("moldau.client.producer")
    producer_log.setLevel(logging.DEBUG)
    producer_log.addHandler(retries)

    async def probe() -> None:
        left = max(timeout - (time.monotonic() - start), 1.0)
        async with MoldauProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=False,
                                  linger_ms=0, delivery_timeout_ms=int(left * 1000), request_timeout_ms=30000,
                                  max_in_flight_requests_per_connection=5) as p:
            def done(fut: asyncio.Future[Any], tp: tuple[str, int]) -> None:
                if not fut.cancelled() and fut.exception() is None:
                    acked.setdefault(tp, time.monotonic() - start)

            topics = sorted({t for t, _ in targets})
            p.cluster.add_topics(topics)
            for topic in topics:
                await p.cluster.wait_for_topic(topic, 30)
            futures = []
            # Appended without yielding, so the sender finds every batch at once: one request per leader.
            for tp in targets:
                fut = p.send_nowait(tp[0], VALUE, partition=tp[1])
                assert fut is not None, "metadata known and buffer.memory not full"
                fut.add_done_callback(functools.partial(done, tp=tp))
                futures.append(fut)
            results = await asyncio.gather(*futures, return_exceptions=True)
        failed = [r for r in results if isinstance(r, BaseException)]
        if failed:
            raise TimeoutError(f"{len(failed)} partitions not writable within {timeout:.0f} s: {failed[:3]}")

    try:
        asyncio.run(probe())
    finally:
        producer_log.removeHandler(retries)
    if retries.errors:
        log(f"  the producer retried {sum(retries.errors.values()):,} partition batches: "
            + ", ".join(f"{n:,} x {e}" for e, n in retries.errors.most_common(4)))
    return acked


class RetryCounter(logging.Handler):
    """Counts the producer's "retrying <tp> (attempt n): <error>" debug lines by error."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.errors: collections.Counter[str] = collections.Counter()

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg.startswith("retrying"):
            self.errors[str(record.args[-1]).split(":")[0] if record.args else "?"] += 1


def controller_id(bootstrap: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return int(admin.describe_cluster().result(timeout=30).controller.id)


def throughput(bootstrap: str, many: list[tuple[str, int]], records: int, client: str, later: bool,
               many_first: bool = False) -> tuple[list[str], float, float]:
    """One round: produce over 10 partitions and over ``many`` (in that order, or the other with ``many_first``),
    then consume both. Returns the rows and the produce and consume ratios (many / 10)."""
    ten = [("ten", p) for p in range(10)]
    put, get = (produce_moldau, consume_moldau) if client == "moldau" else (produce, consume)
    # A later phase (--records a,b,...) writes to the same partitions: each phase reads from where it began.
    start = end_offsets(bootstrap, ten + many) if later else {}
    rates: dict[str, float] = {}
    for side in (("many", "ten") if many_first else ("ten", "many")):
        targets = many if side == "many" else ten
        log(f"produce {records:,} x 100 B over {len(targets):,} partitions ({records / len(targets):,.0f} per "
            "partition) ...")
        rates[side] = put(bootstrap, targets, records)
    p10, pmany = rates["ten"], rates["many"]
    log(f"consume {records:,} over 10 partitions ...")
    c10 = get(bootstrap, ten, records, start)
    log(f"consume {records:,} over {len(many):,} partitions ...")
    cmany = get(bootstrap, many, records, start)
    log("end of the consume phases")
    rows = [f"{f'{client}, {records:,} records':<24} {'10 partitions':>15} {f'{len(many):,} partitions':>18} "
            f"{'ratio':>6}" + (f"   ({len(many):,} first)" if many_first else ""),
            f"{'produce records/s':<24} {p10:>15,.0f} {pmany:>18,.0f} {pmany / p10:>6.2f}",
            f"{'consume records/s':<24} {c10:>15,.0f} {cmany:>18,.0f} {cmany / c10:>6.2f}"]
    log("\n".join(rows))
    return rows, pmany / p10, cmany / c10


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def epoch_checkpoints(log_dirs: list[Path]) -> tuple[int, int]:
    """(partition replicas whose leader-epoch-checkpoint holds an entry, partition replicas) in ``log_dirs``."""
    done = total = 0
    for d in log_dirs:
        with os.scandir(d) as entries:
            for e in entries:
                if not e.is_dir() or "-" not in e.name:
                    continue
                total += 1
                try:
                    with open(os.path.join(e.path, "leader-epoch-checkpoint"), "rb") as f:
                        lines = f.read().split(b"\n")
                except FileNotFoundError:
                    continue
                if len(lines) > 1 and lines[1].strip() not in (b"", b"0"):
                    done += 1
    return done, total


def settle(brokers: list[BrokerProcess], timeout: float) -> str:
    """Waits (bounded) until the brokers have done the one-time work of new partitions and are idle: every
    partition replica's leader-epoch-checkpoint written (a leader writes it 10 s after its first epoch, a follower
    10 s after its first append: EPOCH_CHECKPOINT_DELAY_MS, paced at 1,000 a second per broker) and the brokers'
    CPU under a tenth of a core each over a second (idle, three brokers of 10,000 partitions use ~0.06 each: the
    followers' empty fetches). Returns what it waited for, for the report."""
    start = time.monotonic()
    dirs = [d for b in brokers for d in b.log_dirs]
    while True:
        done, total = epoch_checkpoints(dirs)
        if done == total:
            break
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"settle: {done:,} of {total:,} leader-epoch checkpoints written after {timeout} s")
        time.sleep(0.5)
    written = time.monotonic() - start
    while True:
        before = sum(_cpu_seconds(b.pid) for b in brokers)
        time.sleep(1.0)
        busy = sum(_cpu_seconds(b.pid) for b in brokers) - before
        if busy < 0.1 * len(brokers):
            break
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"settle: the brokers still used {busy:.2f} s of CPU a second after {timeout} s")
    return (f"settled in {time.monotonic() - start:.1f} s ({total:,} replicas' leader-epoch checkpoints written "
            f"after {written:.1f} s, then the brokers idle: {busy:.2f} s of CPU a second together)")


def failover(args: argparse.Namespace, brokers: list[BrokerProcess], sizes: dict[str, int],
             many: list[tuple[str, int]]) -> list[str]:
    bootstrap = ",".join(b.bootstrap for b in brokers)
    # The same probe with every broker up: what writing one record to every partition costs without a failure.
    t0 = time.monotonic()
    baseline = max(write_everywhere_moldau(bootstrap, many, t0, 300).values()) if args.probe == "moldau" else \
        max(write_everywhere_librdkafka(bootstrap, many, t0, 300).values())
    log(f"no failure: one acks=all record written to every partition in {baseline:.1f} s ({args.probe})")
    controller = controller_id(bootstrap)
    victim = next(b for b in brokers if (b.broker_id == controller) == (args.kill == "controller"))
    dead = victim.broker_id
    led_before = leaders(bootstrap)
    survivors = [b for b in brokers if b is not victim]
    sb = ",".join(b.bootstrap for b in survivors)
    stopped: list[float] = []
    if args.kill == "shutdown":
        # A controlled shutdown: the broker asks the controller to move its leaderships, then exits.
        log(f"SIGTERM broker {dead} (controlled shutdown; controller is {controller}) ...")
        start = time.monotonic()

        def stop() -> None:
            victim.stop(timeout=600)
            stopped.append(time.monotonic() - start)

        stopper = threading.Thread(target=stop, daemon=True)
        stopper.start()
    else:
        log(f"SIGKILL broker {dead} ({args.kill}; controller was {controller}) ...")
        start = time.monotonic()
        victim.kill()
    led_s = wait_all_led(sb, sizes, args.rf, 300, dead=dead)
    log(f"every partition led by a survivor after {led_s:.1f} s; writing ({args.probe}) ...")
    write = write_everywhere_moldau if args.probe == "moldau" else write_everywhere_librdkafka
    acked = write(sb, many, start, 300)
    writable = max(acked.values())
    out_s = (time.monotonic() - start) + wait_metadata(sb, sizes, 300, lambda p: dead not in p.isrs)
    moved = sorted(t for tp, t in acked.items() if led_before.get(tp) == dead)
    stayed = sorted(t for tp, t in acked.items() if led_before.get(tp) != dead)

    def spread(ts: list[float]) -> str:
        return f"{len(ts):,} partitions, first {ts[0]:.1f} / median {ts[len(ts) // 2]:.1f} / last {ts[-1]:.1f} s" \
            if ts else "none"

    if args.kill == "shutdown":
        stopper.join(600)
        rows = [f"SIGTERM (controlled shutdown) of broker {dead}: the process exited after "
                f"{stopped[0] if stopped else float('nan'):.1f} s; every partition led by a survivor {led_s:.1f} s, "
                f"one acks=all record written to every partition {writable:.1f} s after the SIGTERM (probe "
                f"{args.probe}); broker {dead} out of every ISR in Metadata by {out_s:.1f} s; the same write with "
                f"every broker up took {baseline:.1f} s",
                f"  acks per partition, seconds after the SIGTERM: led by broker {dead} before: {spread(moved)}; "
                f"led by another broker: {spread(stayed)}"]
        log("\n".join(rows))
        return rows
    rows = [f"SIGKILL of broker {dead} ({args.kill}), session timeout {args.session_timeout_ms / 1000:.0f} s, probe "
            f"{args.probe}: every partition led by a survivor {led_s:.1f} s, one acks=all record written to every "
            f"partition {writable:.1f} s (bound {args.session_timeout_ms / 1000 + 5:.0f} s); broker {dead} out of "
            f"every ISR in Metadata by {out_s:.1f} s; the same write with every broker up took {baseline:.1f} s",
            f"  acks per partition, seconds after the kill: led by broker {dead} before: {spread(moved)}; "
            f"led by a survivor: {spread(stayed)}"]
    log("\n".join(rows))
    return rows


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
                "auto.leader.rebalance.enable": "false", "auto.create.topics.enable": "false",
                **dict(kv.split("=", 1) for kv in args.broker_config)}).start())
        bootstrap = ",".join(b.bootstrap for b in brokers)
        sizes = topic_sizes(args.partitions, args.topics)
        config = {"min.insync.replicas": str(min(args.rf, 2))}
        admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 300000})
        wait_brokers(bootstrap, len(brokers), 60)  # a broker's port opens before it registers in ZooKeeper
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
        many = [(n, p) for n, k in sizes.items() for p in range(k)]
        if not args.skip_throughput:
            if args.settle:
                # One record to every partition, then wait for the new partitions' one-time work (see settle()), so
                # that it does not fall into whichever timed phase happens to run 10 s later.
                t0 = time.monotonic()
                write_everywhere_moldau(bootstrap, many + [("ten", p) for p in range(10)], t0, 300)
                rows.append(f"warm-up: one record to every partition ({time.monotonic() - t0:.1f} s); "
                            + settle(brokers, 180))
                log(rows[-1])
            ratios: list[tuple[float, float]] = []
            phase = 0
            for rnd in range(args.rounds):
                for records in args.records:
                    section, produced, consumed = throughput(bootstrap, many, records, args.client,
                                                             later=phase > 0 or args.settle,
                                                             many_first=rnd % 2 == 1)
                    rows += section
                    ratios.append((produced, consumed))
                    phase += 1
            if args.rounds > 1:
                rows.append(f"over {len(ratios)} rounds (median): produce ratio "
                            f"{statistics.median(r[0] for r in ratios):.2f} ("
                            + " / ".join(f"{r[0]:.2f}" for r in ratios) + "), consume ratio "
                            f"{statistics.median(r[1] for r in ratios):.2f} ("
                            + " / ".join(f"{r[1]:.2f}" for r in ratios) + ")")
                log(rows[-1])
        rss = [b.rss_bytes() for b in brokers]
        replicas = args.partitions * args.rf / 3
        rows.append("RSS MB per broker: " + ", ".join(f"{r / 2**20:.0f}" for r in rss) + " (before the topics: "
                    + ", ".join(f"{r / 2**20:.0f}" for r in rss0) + f"); ~{(sum(rss) - sum(rss0)) / 3 / replicas / 1024:.1f}"
                    f" KB per partition replica")
        log(rows[-1])
        if not args.skip_failover:
            rows += failover(args, brokers, sizes, many)
    finally:
        for b in brokers:
            b.kill()
        zk.stop()
        if args.keep:
            log(f"kept {root} (broker logs: b*/broker.stderr)")
        else:
            shutil.rmtree(root, ignore_errors=True)
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--rf", type=int, default=3)
    parser.add_argument("--records", type=lambda v: [int(x) for x in v.split(",")], default=[500_000],
                        help="records per phase; several (e.g. 100000,300000,1000000) run one after the other on "
                             "the same partitions (records per partition = records / partitions)")
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--kill", choices=("follower", "controller", "shutdown"), default="follower",
                        help="SIGKILL a broker that is not the controller, or the controller; or 'shutdown': "
                             "SIGTERM one that is not the controller (a controlled shutdown), timed the same way")
    parser.add_argument("--client", choices=("confluent", "moldau"), default="confluent",
                        help="the client of the throughput phase (see above)")
    parser.add_argument("--probe", choices=("moldau", "librdkafka"), default="moldau",
                        help="the client that writes one acks=all record to every partition after the kill")
    parser.add_argument("--skip-throughput", action="store_true", help="no produce/consume phase before the kill")
    parser.add_argument("--skip-failover", action="store_true", help="no SIGKILL and failover after the traffic")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (broker logs) afterwards")
    parser.add_argument("--broker-config", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker setting for all three brokers (repeatable)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="repeat the throughput phase(s), every other round with the many partitions first; "
                             "the median ratios are reported")
    parser.add_argument("--no-settle", dest="settle", action="store_false",
                        help="start the throughput phase right after the creation, without the warm-up write and "
                             "the wait for the new partitions' one-time work (the behaviour before 2026-11-27)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the clean-up (brokers, ZooKeeper, files)
    print(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
