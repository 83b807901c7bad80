"""Client quotas with four clients: a throttled client held to its quota next to an unthrottled one (issue #23).

    .venv/bin/python bench/quotas.py --work-dir /dev/shm              # every client, every quota: ~35 min
    .venv/bin/python bench/quotas.py --clients confluent --quotas produce --seconds 30
    .venv/bin/python bench/quotas.py --clients confluent --quotas produce --control   # the bench's own noise
    .venv/bin/python bench/quotas.py --work-dir /dev/shm --toggle --window-s 5      # one neighbour process per row

One standalone broker with Kafka's default quota windows (quota.window.num 11 x quota.window.size.seconds 1).
For each client library (confluent-kafka, kafka-python, aiokafka, Moldau's) and each quota:
  * produce: ``producer_byte_rate=1048576`` on one client id; 8 KiB records as fast as the client takes them;
  * fetch: ``consumer_byte_rate=1048576``; a consumer re-reading a 64 MiB topic from the start, again and again;
  * request: ``request_percentage`` (default 0.02) on a tight loop of Metadata requests;
the unthrottled client alone, and the throttled and the unthrottled client together ("beside"), in ``--pairs``
pairs interleaved A B B A (default 2 pairs), so that a drift of the machine weighs on both sides alike; the row
gives the means. Every phase measures its clients from their first answer plus ``--warmup-s`` (which holds the
first-window allowance, quota x (num - 1) x size, that a new client gets at once, as in Kafka) for ``--seconds``:
the same part of a client's run on both sides, since a client's rate moves over its run. ``--control`` runs the
beside phases without the throttled client and its quota: the ratio then measures only the bench's noise.
``--toggle`` keeps one unthrottled client process through the row and stops / resumes the throttled one next to
it every ``--window-s`` (see toggle_row): both sides are then the same process, interleaved finely. ``--work-dir /dev/shm`` keeps the broker's log in memory, so the producer rows measure the broker rather than the
disk's write-back (which makes an unthrottled producer's rate swing 2-3x from second to second). Each client runs in a process of
its own (so one client's GIL or event loop cannot slow the other). Rates are what the clients count (bytes acknowledged / records' bytes
received / Metadata answers); the throttled client's request time is the broker's
``moldau_client_quota_recorded_total`` over the same interval. "throttle" is the largest throttle time the
throttled client itself saw (librdkafka's throttle_cb, kafka-python's throttle log, the responses aiokafka's
connection returned, Moldau's connection total) and the throttle time the broker imposed on it. "CPU" is each
process's share of a core over the same intervals (the client's own process time, every thread; the broker's from
/proc/<pid>/stat): on a 2-core machine it tells a neighbour slowed by the broker from one slowed by the throttled
client process's own CPU use.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.integration.harness import BrokerProcess  # noqa: E402

CLIENTS = ("confluent", "kafka-python", "aiokafka", "moldau")
QUOTAS = {"produce": "producer_byte_rate", "fetch": "consumer_byte_rate", "request": "request_percentage"}
VALUE = b"q" * 8192  # large enough records that even the pure-Python clients produce well above the quota
TOPIC, READ_TOPIC = "quota-produce", "quota-read"
# Each producer's own buffer: a throttled producer then waits for the broker instead of filling gigabytes of
# client memory at full CPU (librdkafka's default queue holds 1 GB), which would slow the unthrottled one down.
BUFFER = 16 * 1048576
# librdkafka's batch.size (1 MB) for every producer: with the pure-Python clients' 16 KiB default, two 8 KiB records
# per request kept kafka-python and aiokafka below 1 MiB/s on the loaded machine, and Moldau's idempotent
# producer hit OUT_OF_ORDER_SEQUENCE_NUMBER and stalled (also on main: reported, not this benchmark's subject).
BATCH = 1048576
STARTUP_S = 8.0  # the together phase's slack for client start-up
# The produce topic keeps only its last 512 MiB (64 MiB segments, retention checked every second). An unthrottled
# producer writes 200-500 MiB/s: unbounded, the log grew by gigabytes per phase, the page cache filled and each
# write began to pay for reclaim, so a producer alone for 40 s averaged half its rate over 10 s. That decay fell
# on the later, together phase and read as the throttled neighbour's doing (0.33-0.38x in confluent's row).
PRODUCE_TOPIC_CONFIG = {"segment.bytes": str(64 << 20), "retention.bytes": str(512 << 20)}
# Deleted segments are removed a second after retention renames them (Kafka's default waits 60 s): an unthrottled
# producer writes 300+ MiB/s, and a minute of .deleted segments filled /dev/shm (24 GB, the VM's whole memory) in
# the first --toggle run, whose neighbour writes for minutes without a pause.
BROKER_OVERRIDES = {"log.retention.check.interval.ms": "1000", "log.segment.delete.delay.ms": "1000"}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------- workers
class Counter:
    """A running count (bytes or requests) and the process's CPU time, sampled every 0.25 s with their monotonic
    time (one clock for every process on the machine), plus the largest throttle time the client reported."""

    def __init__(self) -> None:
        self.count = 0
        self.throttle_max_ms = 0.0
        self.throttled = 0
        self.samples: list[tuple[float, int]] = []
        self.cpu: list[tuple[float, float]] = []  # (monotonic time, CPU seconds of this process so far)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def throttle(self, ms: float) -> None:
        if ms > 0:
            self.throttled += 1
            self.throttle_max_ms = max(self.throttle_max_ms, ms)

    def _sample(self) -> None:
        while not self._stop.wait(0.25):
            self._take()

    def _take(self) -> None:
        now = time.monotonic()
        self.samples.append((now, self.count))
        self.cpu.append((now, time.process_time()))  # every thread of the process (librdkafka's too)

    def report(self) -> None:
        self._stop.set()
        self._thread.join()
        self._take()
        print(json.dumps({"samples": self.samples, "cpu": self.cpu, "throttle_max_ms": self.throttle_max_ms,
                          "throttled": self.throttled}), flush=True)


def confluent_worker(role: str, bootstrap: str, client_id: str, until: float, c: Counter) -> None:
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

    conf = {"bootstrap.servers": bootstrap, "client.id": client_id,
            "throttle_cb": lambda e: c.throttle(e.throttle_time * 1000)}
    if role == "produce":
        p = Producer({**conf, "linger.ms": 5, "queue.buffering.max.kbytes": BUFFER // 1024})

        def acked(err: Any, msg: Any) -> None:
            if err is None:
                c.count += len(msg.value())
        while time.monotonic() < until:
            try:
                p.produce(TOPIC, VALUE, on_delivery=acked)
            except BufferError:
                p.poll(0.05)
                continue
            p.poll(0)
        p.purge(in_queue=True)
        p.flush(5)
    elif role == "fetch":
        cons = Consumer({**conf, "group.id": client_id, "enable.partition.eof": True,
                         "enable.auto.commit": False})
        cons.assign([TopicPartition(READ_TOPIC, 0, 0)])
        while time.monotonic() < until:
            for m in cons.consume(1000, 0.2):
                if m.error() is None:
                    c.count += len(m.value())
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    cons.seek(TopicPartition(READ_TOPIC, 0, 0))
        cons.close()
    else:
        p = Producer(conf)
        while time.monotonic() < until:
            try:
                p.list_topics(timeout=max(until - time.monotonic(), 0.1))
                c.count += 1
            except KafkaException:  # no answer before the end of the run: a throttle time can be seconds
                pass
            p.poll(0)  # serves throttle_cb


class _ThrottleLog(logging.Handler):
    """kafka-python logs each throttled response ('... throttled by broker (N ms)') and pauses the connection."""

    def __init__(self, c: Counter) -> None:
        super().__init__()
        self.c = c

    def emit(self, record: logging.LogRecord) -> None:
        m = re.search(r"throttled by broker \((\d+) ms\)", record.getMessage())
        if m:
            self.c.throttle(float(m.group(1)))


def kafka_python_worker(role: str, bootstrap: str, client_id: str, until: float, c: Counter) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.errors import KafkaError, KafkaTimeoutError

    logging.getLogger("kafka").addHandler(_ThrottleLog(c))
    logging.getLogger("kafka").setLevel(logging.WARNING)
    if role == "produce":
        p = KafkaProducer(bootstrap_servers=bootstrap, client_id=client_id, linger_ms=5, max_block_ms=500,
                          batch_size=BATCH)

        def acked(_: Any) -> None:
            c.count += len(VALUE)
        sent = 0
        while time.monotonic() < until:
            # kafka-python 3 has no buffer.memory (its queue is unbounded): bound what is unanswered here, or a
            # throttled producer spends a core filling memory and slows the unthrottled one down.
            if (sent - c.count) > BUFFER:
                time.sleep(0.01)
                continue
            try:
                p.send(TOPIC, VALUE).add_callback(acked)
                sent += len(VALUE)
            except KafkaTimeoutError:
                continue
        p.close(timeout=2)
    elif role == "fetch":
        tp = TopicPartition(READ_TOPIC, 0)
        cons = KafkaConsumer(bootstrap_servers=bootstrap, client_id=client_id, group_id=None,
                             enable_auto_commit=False)
        cons.assign([tp])
        cons.seek_to_beginning(tp)
        end = cons.end_offsets([tp])[tp]
        while time.monotonic() < until:
            for records in cons.poll(timeout_ms=200).values():
                c.count += sum(len(r.value) for r in records)
            if cons.position(tp) >= end:
                cons.seek_to_beginning(tp)
        cons.close()
    else:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id=client_id)
        while time.monotonic() < until:
            try:
                admin.list_topics()
                c.count += 1
            except KafkaError:  # the connection paused by a throttle time: NodeNotReadyError
                time.sleep(0.01)
        admin.close()


async def aiokafka_worker(role: str, bootstrap: str, client_id: str, until: float, c: Counter) -> None:
    from aiokafka import AIOKafkaClient, AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.conn import AIOKafkaConnection

    # aiokafka does not read throttle_time_ms (nor wait it out): observe what its connection receives.
    send = AIOKafkaConnection.send

    def observed(self: Any, request: Any, expect_response: bool = True) -> Any:
        fut = send(self, request, expect_response)

        async def inspect() -> Any:
            response = await fut
            c.throttle(float(getattr(response, "throttle_time_ms", 0) or 0))
            return response
        return inspect() if expect_response else fut
    AIOKafkaConnection.send = observed  # type: ignore[method-assign]
    loop = asyncio.get_running_loop()
    if role == "produce":
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id=client_id, linger_ms=5, max_batch_size=BATCH)
        await p.start()

        def acked(f: asyncio.Future[Any]) -> None:
            if not f.cancelled() and f.exception() is None:
                c.count += len(VALUE)
        while time.monotonic() < until:
            try:
                fut = await asyncio.wait_for(p.send(TOPIC, VALUE), max(until - time.monotonic(), 0.01))
            except TimeoutError:
                break
            fut.add_done_callback(acked)
        try:
            await asyncio.wait_for(p.stop(), 2)  # what is still buffered after the run is not counted
        except TimeoutError:
            pass
    elif role == "fetch":
        tp = TopicPartition(READ_TOPIC, 0)
        cons = AIOKafkaConsumer(bootstrap_servers=bootstrap, client_id=client_id, group_id=None,
                                enable_auto_commit=False)
        await cons.start()
        cons.assign([tp])
        await cons.seek_to_beginning(tp)
        end = (await cons.end_offsets([tp]))[tp]
        while time.monotonic() < until:
            for records in (await cons.getmany(timeout_ms=200)).values():
                c.count += sum(len(r.value) for r in records)
            if await cons.position(tp) >= end:
                await cons.seek_to_beginning(tp)
        await cons.stop()
    else:
        client = AIOKafkaClient(bootstrap_servers=bootstrap, client_id=client_id)
        await client.bootstrap()
        while time.monotonic() < until:
            await client.fetch_all_metadata()
            c.count += 1
        await client.close()
    del loop


async def moldau_worker(role: str, bootstrap: str, client_id: str, until: float, c: Counter) -> None:
    from moldau.aio import Consumer, Producer, TopicPartition
    from moldau.connection import BrokerConnection, api_for
    from moldau.protocol.api import ApiKey

    if role == "produce":
        p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5,
                      "buffer.memory": BUFFER, "batch.size": BATCH,
                      # Moldau's idempotent producer gets OUT_OF_ORDER_SEQUENCE_NUMBER from a single broker now and
                      # then and stalls (with or without quotas or Produce pipelining; reported, not this bench's
                      # subject): the other three clients are not idempotent by default either.
                      "enable.idempotence": False})
        await p.start()

        def acked(f: asyncio.Future[Any]) -> None:
            if not f.cancelled() and f.exception() is None:
                c.count += len(VALUE)
        while time.monotonic() < until:
            try:
                fut = await asyncio.wait_for(p.send(TOPIC, VALUE), max(until - time.monotonic(), 0.01))
            except TimeoutError:
                break
            fut.add_done_callback(acked)
        conns = list(p.cluster._conns.values())
        try:
            await p.close(timeout=2)  # what is still buffered after the run is not counted
        except TimeoutError:
            pass
    elif role == "fetch":
        tp = TopicPartition(READ_TOPIC, 0)
        cons = Consumer({"bootstrap.servers": bootstrap, "client.id": client_id, "enable.auto.commit": False})
        await cons.start()
        cons.assign([tp])
        cons.seek_to_beginning(tp)
        end = (await cons.end_offsets([tp]))[tp]
        while time.monotonic() < until:
            for records in (await cons.getmany(timeout_ms=200)).values():
                c.count += sum(len(r.value) for r in records)
            if await cons.position(tp) >= end:
                cons.seek_to_beginning(tp)
        conns = list(cons._cluster._conns.values())
        await cons.close(autocommit=False)
    else:
        host, port = bootstrap.rsplit(":", 1)
        async with BrokerConnection(host, int(port), client_id=client_id) as conn:
            while time.monotonic() < until:
                await conn.send(api_for(ApiKey.METADATA), {"topics": None, "allow_auto_topic_creation": False})
                c.count += 1
            conns = [conn]
    # Moldau's connection waits out each throttle time before its next request; it keeps their sum.
    c.throttle(float(sum(conn.throttle_time_ms_total for conn in conns)))


def run_worker(args: argparse.Namespace) -> None:
    c = Counter()
    until = args.until
    fn: Callable[..., Any] = {"confluent": confluent_worker, "kafka-python": kafka_python_worker,
                              "aiokafka": aiokafka_worker, "moldau": moldau_worker}[args.client]
    try:
        result = fn(args.role, args.bootstrap, args.client_id, until, c)
        if asyncio.iscoroutine(result):
            asyncio.run(result)
    except Exception:  # e.g. a close() timing out on what is still buffered: the counts so far stand
        if time.monotonic() < until:
            raise
        traceback.print_exc()
    c.report()


# ----------------------------------------------------------------------------------------------- coordinator
def start_worker(client: str, role: str, bootstrap: str, client_id: str, until: float) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, __file__, "--worker", "--client", client, "--role", role,
                             "--bootstrap", bootstrap, "--client-id", client_id, "--until", repr(until)],
                            stdout=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = proc.communicate(timeout=120)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"worker failed ({proc.returncode}): {out[-2000:]}")
    return dict(json.loads(lines[-1]))


def rate_between(result: dict[str, Any], t0: float, t1: float) -> float:
    """Count per second between t0 and t1 (monotonic), from the worker's samples."""
    def at(t: float) -> float:
        before = [float(n) for ts, n in result["samples"] if ts <= t]
        return float(before[-1]) if before else 0.0
    return (at(t1) - at(t0)) / (t1 - t0)


class CpuWatch:
    """Samples a process's CPU seconds (user + system, /proc/<pid>/stat) every 0.25 s in a thread."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        tick = os.sysconf("SC_CLK_TCK")
        while not self._stop.wait(0.25):
            with open(f"/proc/{self.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            self.samples.append((time.monotonic(), (int(fields[11]) + int(fields[12])) / tick))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def cpu_between(samples: list[Any], t0: float, t1: float) -> float:
    """Share of one core used between t0 and t1, from (time, CPU seconds so far) samples."""
    return rate_between({"samples": samples}, t0, t1)


def broker_metric(broker: BrokerProcess, name: str, quota: str, client_id: str) -> float:
    m = re.search(rf'^{name}{{client_id="{client_id}",quota="{quota}",user=""}} (\S+)$', broker.fetch_metrics(),
                  re.M)
    return float(m.group(1)) if m else 0.0


@dataclass
class Row:
    client: str
    quota: str
    bound: float
    throttled: list[float]  # per beside phase: rate over the measured interval (B/s or % of a handler)
    throttled_with_warmup: list[float]
    client_throttle_ms: float
    broker_throttle_s: float
    alone: list[float]  # the unthrottled client's rate alone, per alone phase
    together: list[float]  # ... next to the throttled one, per beside phase
    load: tuple[float, float]  # the machine's 1-minute load average, highest of the alone / the beside phases
    # Shares of a core over the measured intervals, means over the phases: (unthrottled client, broker) alone;
    # (throttled client, unthrottled client, broker) together.
    cpu_alone: tuple[float, ...] = (0.0, 0.0)
    cpu_together: tuple[float, ...] = (0.0, 0.0, 0.0)


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def alone_phase(broker: BrokerProcess, client: str, quota: str, cid: str, args: argparse.Namespace
                ) -> tuple[float, tuple[float, float], float]:
    """The unthrottled client alone: (rate, (its CPU, the broker's CPU), load average after)."""
    until = time.monotonic() + STARTUP_S + args.warmup_s + args.seconds
    proc = start_worker(client, quota, broker.bootstrap, cid, until)
    watch = CpuWatch(broker.pid)
    observe(broker, quota, f"slow-{cid}", until)  # as the beside phase watches its throttled client
    watch.stop()
    alone = finish(proc)
    if args.alone_s:  # the short alone phase of old: from its 2nd second to its end
        first = next((t for t, n in alone["samples"] if n > 0), until)
        a0, a1 = first + 1.0, min(first + args.alone_s, until)
    else:  # the same part of its life as beside the throttled one (a client's rate moves over its run)
        a0, a1 = measured_interval(alone, until, args)
    return (rate_between(alone, a0, a1), (cpu_between(alone["cpu"], a0, a1), cpu_between(watch.samples, a0, a1)),
            os.getloadavg()[0])


def observe(broker: BrokerProcess, quota: str, client_id: str, until: float) -> list[tuple[float, float]]:
    """The broker's running quota total for ``client_id``, scraped every 0.5 s until ``until``. The alone phases
    scrape the same way for a client that is not there: each scrape costs the broker a metrics rendering, and
    the two sides must differ only by the throttled client."""
    recorded: list[tuple[float, float]] = []
    while time.monotonic() < until:
        recorded.append((time.monotonic(), broker_metric(broker, "moldau_client_quota_recorded_total", quota,
                                                         client_id)))
        time.sleep(0.5)
    return recorded


def set_quota(broker: BrokerProcess, client_id: str, key: str, bound: float | None) -> None:
    """Sets (None: removes) a client-id quota, with a short-lived admin client (none is open during a phase)."""
    from moldau.sync import AdminClient

    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.alter_client_quotas([({"client-id": client_id}, {key: bound})])


def measured_interval(result: dict[str, Any], until: float, args: argparse.Namespace) -> tuple[float, float]:
    """From a client's first answer plus --warmup-s, for --seconds (shorter if the client started late)."""
    first = next((t for t, n in result["samples"] if n > 0), until)
    m0 = first + args.warmup_s
    return m0, min(m0 + args.seconds, until)


@dataclass
class Beside:
    throttled: float
    with_warmup: float
    fast: float
    client_throttle_ms: float
    broker_throttle_s: float
    cpu: tuple[float, float, float]
    load: float


def beside_phase(broker: BrokerProcess, client: str, quota: str, bound: float, slow: str, fast: str,
                 args: argparse.Namespace) -> Beside:
    """The throttled and the unthrottled client together, both measured over the same --seconds."""
    key = QUOTAS[quota]
    if not args.control:
        set_quota(broker, slow, key, bound)
    try:
        # The warm-up counts from the throttled client's first answer (a client process can take seconds to
        # start on the loaded machine, and its first-window allowance must not fall into the measurement).
        until = time.monotonic() + STARTUP_S + args.warmup_s + args.seconds
        # --control: the same phase without the throttled client (and without a quota), so the row's ratio
        # is what this machine's noise alone makes of two identical phases.
        procs = [start_worker(client, quota, broker.bootstrap, cid, until)
                 for cid in ((fast,) if args.control else (slow, fast))]
        watch = CpuWatch(broker.pid)
        recorded = observe(broker, quota, slow, until)  # the broker's running total for the throttled client
        load = os.getloadavg()[0]
        throttle_s = broker_metric(broker, "moldau_client_quota_throttle_time_seconds_total", quota, slow)
        watch.stop()
        results = [finish(p) for p in procs]
        slow_r, fast_r = results[0], results[-1]
    finally:
        if not args.control:
            set_quota(broker, slow, key, None)
    first = next((t for t, n in slow_r["samples"] if n > 0), until)
    if os.environ.get("QUOTA_BENCH_DEBUG"):
        log(f"slow samples: {[(round(t - first, 1), n) for t, n in slow_r['samples'][::4]]}")
    m0, m1 = measured_interval(slow_r, until, args)
    if m1 - m0 < args.seconds:
        log(f"{client} {quota}: measured over {m1 - m0:.0f} s only (slow start)")
    if quota == "request":  # the client counts requests; the broker knows their handler time
        throttled = rate_between({"samples": recorded}, m0, m1)
        with_warmup = rate_between({"samples": recorded}, first, m1)
    else:
        throttled = rate_between(slow_r, m0, m1)
        with_warmup = rate_between(slow_r, first, m1)
    return Beside(throttled, with_warmup, rate_between(fast_r, m0, m1), slow_r["throttle_max_ms"], throttle_s,
                  (cpu_between(slow_r["cpu"], m0, m1), cpu_between(fast_r["cpu"], m0, m1),
                   cpu_between(watch.samples, m0, m1)), load)


def phase_order(pairs: int) -> list[str]:
    """Alone and beside phases interleaved A B B A A B ...: over an even number of pairs a drift of the machine
    (or of the client's own rate over the run) that is linear in time weighs on both sides alike."""
    order: list[str] = []
    for i in range(pairs):
        order += ["alone", "beside"] if i % 2 == 0 else ["beside", "alone"]
    return order


def measure(broker: BrokerProcess, client: str, quota: str, bound: float, args: argparse.Namespace) -> Row:
    tag = f"{client}-{quota}-{int(time.time()) % 100000}"
    alone: list[tuple[float, tuple[float, float], float]] = []
    beside: list[Beside] = []
    for i, phase in enumerate(phase_order(args.pairs)):
        if phase == "alone":
            alone.append(alone_phase(broker, client, quota, f"alone-{tag}-{i}", args))
            log(f"{client} {quota} alone: {fmt_alone(quota, alone[-1][0])}")
        else:
            beside.append(beside_phase(broker, client, quota, bound, f"slow-{tag}-{i}", f"fast-{tag}-{i}", args))
            b = beside[-1]
            log(f"{client} {quota} beside: {fmt_alone(quota, b.fast)}, throttled {fmt_rate(quota, b.throttled)}")
    row = Row(client, quota, bound, [b.throttled for b in beside], [b.with_warmup for b in beside],
              max(b.client_throttle_ms for b in beside), sum(b.broker_throttle_s for b in beside),
              [a[0] for a in alone], [b.fast for b in beside],
              (max(a[2] for a in alone), max(b.load for b in beside)),
              tuple(mean([a[1][k] for a in alone]) for k in range(2)),
              tuple(mean([b.cpu[k] for b in beside]) for k in range(3)))
    log(f"{row}")
    return row


def toggle_order(windows: int) -> list[bool]:
    """Whether the throttled client runs in each window: on off off on on off off on ... (A B B A per pair)."""
    return [(i % 4) in (0, 3) for i in range(windows)]


def toggle_row(broker: BrokerProcess, client: str, quota: str, bound: float, args: argparse.Namespace) -> Row:
    """--toggle: ONE unthrottled client process runs through the whole row, and the throttled client next to it
    is stopped (SIGSTOP) and resumed (SIGCONT) every --window-s seconds, on off off on ...; the unthrottled
    client's rate in the windows with the throttled one running is compared with its rate in the windows without
    it. Each window is measured from --settle-s after its switch. One process on both sides takes out what the
    phase design cannot: a client process's own speed differs from one start to the next (its CPU time per MiB
    moved 0.73-1.14x between phases on this VM), and that is the same process here."""
    key = QUOTAS[quota]
    tag = f"{client}-{quota}-{int(time.time()) % 100000}"
    slow, fast = f"slow-{tag}", f"fast-{tag}"
    order = toggle_order(args.windows)
    start = time.monotonic() + STARTUP_S + args.warmup_s
    until = start + args.windows * args.window_s + 1.0
    set_quota(broker, slow, key, bound)
    try:
        slow_p = start_worker(client, quota, broker.bootstrap, slow, until)
        fast_p = start_worker(client, quota, broker.bootstrap, fast, until)
        watch = CpuWatch(broker.pid)
        windows: list[tuple[bool, float, float]] = []
        running = True
        for i, on in enumerate(order):
            t = start + i * args.window_s
            while time.monotonic() < t:
                time.sleep(min(0.05, max(t - time.monotonic(), 0.0)))
            if on != running:
                slow_p.send_signal(signal.SIGCONT if on else signal.SIGSTOP)
                running = on
            windows.append((on, t + args.settle_s, t + args.window_s))
        if not running:
            slow_p.send_signal(signal.SIGCONT)
        loads = os.getloadavg()[0]
        throttle_s = broker_metric(broker, "moldau_client_quota_throttle_time_seconds_total", quota, slow)
        while time.monotonic() < until:
            time.sleep(0.1)
        watch.stop()
        slow_r, fast_r = finish(slow_p), finish(fast_p)
    finally:
        set_quota(broker, slow, key, None)

    def side(on: bool) -> tuple[list[float], tuple[float, ...]]:
        spans = [(a, b) for w_on, a, b in windows if w_on == on]
        rates = [rate_between(fast_r, a, b) for a, b in spans]
        total = sum(b - a for a, b in spans)

        def share(samples: list[Any]) -> float:
            return sum(cpu_between(samples, a, b) * (b - a) for a, b in spans) / total
        return rates, (share(slow_r["cpu"]), share(fast_r["cpu"]), share(watch.samples))
    beside, cpu_on = side(True)
    alone, cpu_off = side(False)
    on_spans = [(a, b) for w_on, a, b in windows if w_on]
    # The throttled client's rate over the whole row (its stopped windows included would halve it): over the
    # windows it ran, each from its switch (a resumed client first spends what its quota window holds).
    throttled = [rate_between(slow_r, a - args.settle_s, b) for a, b in on_spans]
    return Row(client, quota, bound, throttled, throttled, slow_r["throttle_max_ms"], throttle_s, alone, beside,
               (loads, loads), (cpu_off[1], cpu_off[2]), cpu_on)


def prefill(bootstrap: str, mib: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=1, config=PRODUCE_TOPIC_CONFIG)]
                        )[TOPIC].result(30)
    admin.create_topics([NewTopic(READ_TOPIC, num_partitions=1, replication_factor=1)])[READ_TOPIC].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for _ in range(mib * 1048576 // len(VALUE)):
        while True:
            try:
                p.produce(READ_TOPIC, VALUE)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(60) == 0


def fmt_rate(quota: str, v: float) -> str:
    return f"{v:.3f} %" if quota == "request" else f"{v / 1048576:.2f} MiB/s"


def fmt_alone(quota: str, v: float) -> str:
    return f"{v:.0f} req/s" if quota == "request" else f"{v / 1048576:.1f} MiB/s"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clients", nargs="+", default=list(CLIENTS), choices=CLIENTS)
    ap.add_argument("--quotas", nargs="+", default=list(QUOTAS), choices=list(QUOTAS))
    ap.add_argument("--byte-rate", type=int, default=1048576)
    # A tight Metadata loop takes 0.07-0.35% of a handler's time (measured here): the quota must be below that.
    ap.add_argument("--request-percentage", type=float, default=0.02)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--warmup-s", type=float, default=5.0)
    ap.add_argument("--alone-s", type=float, default=None,
                    help="a short alone phase instead, measured from the client's 2nd second (old behaviour)")
    ap.add_argument("--pairs", type=int, default=2,
                    help="alone/beside pairs per row, interleaved A B B A ...; rates are the means (default 2)")
    ap.add_argument("--read-topic-mib", type=int, default=64)
    ap.add_argument("--toggle", action="store_true",
                    help="one unthrottled client through the row, the throttled one stopped and resumed every "
                         "--window-s (on off off on ...): see toggle_row")
    ap.add_argument("--windows", type=int, default=16, help="--toggle: windows per row (a multiple of 4)")
    ap.add_argument("--window-s", type=float, default=10.0, help="--toggle: length of a window")
    ap.add_argument("--settle-s", type=float, default=1.0,
                    help="--toggle: each window is measured from this long after its switch")
    ap.add_argument("--control", action="store_true",
                    help="beside phases without the throttled client: the ratio then shows the bench's own noise")
    ap.add_argument("--work-dir", default=None,
                    help="where the broker's log.dirs go (default: the temp dir; /dev/shm takes the disk's "
                         "write-back out of the producer rows)")
    # worker mode (one client in its own process)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--client", help=argparse.SUPPRESS)
    ap.add_argument("--role", help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", help=argparse.SUPPRESS)
    ap.add_argument("--client-id", help=argparse.SUPPRESS)
    ap.add_argument("--until", type=float, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        run_worker(args)
        return
    root = Path(tempfile.mkdtemp(prefix="moldau-bench-quotas-", dir=args.work_dir))
    broker = BrokerProcess(root / "broker", overrides=BROKER_OVERRIDES)
    rows: list[Row] = []
    try:
        broker.start()
        prefill(broker.bootstrap, args.read_topic_mib)
        for quota in args.quotas:
            bound = args.request_percentage if quota == "request" else float(args.byte_rate)
            for client in args.clients:
                try:
                    rows.append(toggle_row(broker, client, quota, bound, args) if args.toggle
                                else measure(broker, client, quota, bound, args))
                    if args.toggle:
                        log(f"{rows[-1]}")
                except Exception as exc:  # one client's failure does not lose the others' rows
                    log(f"{client} {quota}: {exc}")
    finally:
        broker.kill()
        shutil.rmtree(root, ignore_errors=True)
    if args.toggle:
        print(f"\nquota windows 11 x 1 s; --toggle: one unthrottled client process per row, the throttled one "
              f"stopped and resumed every {args.window_s:g} s ({args.windows} windows, on off off on ...; each "
              f"measured from {args.settle_s:g} s after its switch); 'alone' = the windows with the throttled "
              f"client stopped, 'beside' = with it running; the throttled client's rate is per running window "
              f"(a resumed client first spends what its quota window holds: the held-to-quota figures are the "
              f"phase design's)\n")
    else:
        print(f"\nquota windows 11 x 1 s; each phase measured over {args.seconds:.0f} s after a "
              f"{args.warmup_s:.0f} s warm-up; {args.pairs} alone and {args.pairs} beside phases per row, "
              f"interleaved ({' '.join(p[0].upper() for p in phase_order(args.pairs))}); rates are means over "
              f"the phases\n")
    print("| client | quota | throttled client (per phase) | vs quota (worst phase) | incl. warm-up | "
          "throttle seen by client (max) | broker throttle total | unthrottled alone (per phase) | "
          "unthrottled beside (per phase) | ratio of means | load avg (alone, beside) | "
          "CPU alone: unthrottled, broker | CPU beside: throttled, unthrottled, broker |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        name = f"{QUOTAS[r.quota]}={r.bound:.0f}" if r.quota != "request" else f"{QUOTAS[r.quota]}={r.bound:g}"
        worst = max(r.throttled, key=lambda v: abs(v / r.bound - 1.0))
        # --toggle has no broker-side handler time per window: a request row gives the throttled client's
        # Metadata answers per second there, and no ratio to the quota.
        per_s = args.toggle and r.quota == "request"

        def fmt(v: float, q: str = r.quota, per_s: bool = per_s) -> str:
            return f"{v:.1f} req/s" if per_s else fmt_rate(q, v)
        vs = "-" if args.toggle and r.quota == "request" else f"{worst / r.bound:.2f}x"
        vs_w = "-" if args.toggle and r.quota == "request" else f"{mean(r.throttled_with_warmup) / r.bound:.2f}x"
        print(f"| {r.client} | {name} | {fmt(mean(r.throttled))} "
              f"({' / '.join(fmt(v) for v in r.throttled)}) | {vs} | "
              f"{vs_w} | {r.client_throttle_ms:.0f} ms | "
              f"{r.broker_throttle_s:.1f} s | {fmt_alone(r.quota, mean(r.alone))} "
              f"({' / '.join(fmt_alone(r.quota, v) for v in r.alone)}) | {fmt_alone(r.quota, mean(r.together))} "
              f"({' / '.join(fmt_alone(r.quota, v) for v in r.together)}) | "
              f"{mean(r.together) / mean(r.alone):.2f} | {r.load[0]:.0f}, {r.load[1]:.0f} | "
              + ", ".join(f"{v:.2f}" for v in r.cpu_alone) + " | " + ", ".join(f"{v:.2f}" for v in r.cpu_together)
              + " |" if mean(r.alone) else f"{r} |")

if __name__ == "__main__":
    main()
