"""Steady-state end-to-end latency at fixed rates: the matrix of issue #21.

    .venv/bin/python bench/latency_matrix.py --seconds 20 --warmup 10            # the whole matrix
    .venv/bin/python bench/latency_matrix.py --rates 10000 --linger 0 --clients confluent --seconds 60
    .venv/bin/python bench/latency_matrix.py --rates 1000 --acks all --inflight bounded --single

Starts ZooKeeper and three brokers (and with ``--single`` a standalone broker for RF 1 reference rows), all on
this machine. Every row gets a topic of its own (one partition; RF 3 with min.insync.replicas=2, every replica in
sync before the row starts) and waits until the brokers are idle (the previous row's backlog gone).

Latency = the producer's send call (its wall-clock time in the record's first 20 bytes; 100 B values) to a
consumer receiving the record. The consumer is a confluent-kafka consumer in a process of its own
(fetch.wait.max.ms=100, fetch.min.bytes=1, assigned at the partition's end offset and fetching before the clock
starts), so it shares no GIL with the producer's Python loop. The producer is created and has delivered one record
(connected to the leader; an idempotent one has its producer id) before the clock starts; then it sends at a
fixed rate for ``--warmup`` seconds (left out) and ``--seconds`` seconds (measured). Per row: p50 / p99 / p99.9 of
the measured records, the p50 of the first and second half of them (growth), records still missing ``--grace``
seconds after the last send, and the rate the producer reached in the measured part (a client too slow for the
rate sends late: its latency counts from the send call it managed).

Rows (each flag picks a subset; all by default):
  * confluent-kafka, RF 3: ``--acks`` 1 and all x ``--rates`` 1,000 / 10,000 / 50,000 x ``--linger`` 0 and 5 x
    ``--inflight`` unbounded (librdkafka's non-idempotent default: enable.idempotence=false,
    max.in.flight.requests.per.connection=1,000,000) and bounded (max.in.flight 5; with acks=all the
    idempotent producer, enable.idempotence=true; librdkafka refuses idempotence with acks=1);
  * kafka-python and aiokafka (``--clients``), RF 3: their default producers (only bootstrap servers and acks
    set) at the rates of ``--rates`` up to 10,000/s, both acks;
  * ``--single``: the confluent-kafka rows with acks=1 once more on one standalone broker (RF 1).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import sys
import time
import traceback
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from bench._cluster import Cluster, cluster, cpu_seconds, create_topic  # noqa: E402

CLIENTS = ("confluent", "kafka-python", "aiokafka")
PY_CLIENT_MAX_RATE = 10_000
PAD = b"y" * 80  # + a 20-digit send time: 100 B values
INFLIGHT = ("unbounded", "bounded")


def inflight_config(inflight: str, acks: int) -> dict[str, object]:
    """librdkafka's settings for an in-flight bound. Bounded is the idempotent producer (at most 5 in flight);
    librdkafka refuses idempotence with acks=1, so bounded acks=1 is max.in.flight 5 without it."""
    if inflight == "unbounded":
        return {"enable.idempotence": False, "max.in.flight.requests.per.connection": 1_000_000}
    return {"enable.idempotence": acks == -1, "max.in.flight.requests.per.connection": 5}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def stamp() -> bytes:
    return str(time.time_ns()).rjust(20, "0").encode() + PAD


@dataclass(frozen=True)
class Setup:
    """One row: ``rf`` 3 is the three-broker cluster, 1 the standalone broker; ``linger_ms`` and ``inflight`` are
    confluent-kafka's (None: the client's defaults)."""
    client: str
    rf: int
    acks: int
    rate: int
    linger_ms: int | None = None
    inflight: str | None = None

    def cells(self) -> list[str]:
        return [self.client, str(self.rf), "all" if self.acks == -1 else str(self.acks), f"{self.rate:,}",
                "default" if self.linger_ms is None else str(self.linger_ms), self.inflight or "default"]


COLUMNS = ("client", "RF", "acks", "rate/s", "linger", "in-flight", "p50 ms", "p99 ms", "p99.9 ms", "p50 1st",
           "p50 2nd", "missing", "reached/s")
WIDTHS = (-12, 2, 4, 7, 7, 9, 8, 8, 8, 8, 8, 7, 9)  # negative: left-aligned
BARS = (6, 9, 11, 12)  # a "|" before these columns in the plain table


def line(cells: list[str] | tuple[str, ...], markdown: bool = False) -> str:
    """One row of the table: aligned text, or a markdown row."""
    if markdown:
        return "| " + " | ".join(cells) + " |"
    out = []
    for i, (cell, width) in enumerate(zip(cells, WIDTHS)):
        out.append(("| " if i in BARS else "") + (cell.ljust(-width) if width < 0 else cell.rjust(width)))
    return " ".join(out)


HEADER = line(COLUMNS)


@dataclass
class Result:
    setup: Setup
    sent: int
    received: int
    latencies: list[float]  # ms, of the measured records in the order received
    reached: float  # records/s the producer sent in the measured part
    error: str | None = None  # the row failed

    def cells(self) -> list[str]:
        lat = self.latencies
        if self.error is not None:
            return [*self.setup.cells(), f"error: {self.error}"]
        if len(lat) < 100:
            figures = ["-"] * 5
        else:
            ordered = sorted(lat)
            half = len(lat) // 2
            first, second = sorted(lat[:half]), sorted(lat[half:])
            figures = [f"{v:.1f}" for v in (pct(ordered, 0.5), pct(ordered, 0.99), pct(ordered, 0.999),
                                            pct(first, 0.5), pct(second, 0.5))]
        return [*self.setup.cells(), *figures, f"{max(0, self.sent - self.received):,}", f"{self.reached:,.0f}"]

    def row(self, markdown: bool = False) -> str:
        return line(self.cells(), markdown)


def pct(ordered: list[float], q: float) -> float:
    """The ``q`` quantile of sorted values (nearest rank)."""
    return ordered[min(len(ordered) - 1, max(0, int(q * len(ordered) + 0.5) - 1))]


# ---------------------------------------------------------------------------------------------- the consumer
def _receive(bootstrap: str, topic: str, conn: Connection) -> None:
    """The consumer process: positioned at the partition's end, says ready, then records (send time, receive
    time) of every record until told how many were sent and the deadline (time.monotonic, system-wide)."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"lat-{os.getpid()}-{time.time_ns()}",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 100, "fetch.min.bytes": 1})
    _, end = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
    c.assign([TopicPartition(topic, 0, end)])
    c.poll(0.5)  # the fetcher started; the topic is new and nothing is sent before "ready"
    conn.send(end)
    sent, received = array("q"), array("q")
    expected: int | None = None
    deadline = 0.0
    while expected is None or (len(sent) < expected and time.monotonic() < deadline):
        # poll() returns with the first record; consume(n, 0) takes what else is queued without waiting (a batch
        # consume with a timeout waits the timeout out for a short batch, which would add to every latency).
        first = c.poll(0.02)
        if first is not None:
            for m in [first, *c.consume(10_000, 0)]:
                value = m.value()
                if m.error() is None and value is not None:
                    received.append(time.time_ns())
                    sent.append(int(value[:20]))
        if expected is None and conn.poll():
            expected, deadline = conn.recv()
    c.close()
    conn.send_bytes(sent.tobytes())
    conn.send_bytes(received.tobytes())


class Receiver:
    """The consumer process of one row."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        ctx = multiprocessing.get_context("spawn")  # no fork of a process with librdkafka's threads
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_receive, args=(bootstrap, topic, child), daemon=True)
        self.proc.start()
        child.close()
        if not self.conn.poll(60):
            self.close()
            raise TimeoutError("the consumer process did not get ready")
        self.conn.recv()

    def finish(self, expected: int, deadline: float) -> None:
        self.conn.send((expected, deadline))

    def samples(self, timeout: float) -> tuple[array[int], array[int]]:
        if not self.conn.poll(timeout):
            raise TimeoutError("the consumer process did not report")
        sent, received = array("q"), array("q")
        sent.frombytes(self.conn.recv_bytes())
        received.frombytes(self.conn.recv_bytes())
        self.proc.join(30)
        return sent, received

    def close(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(10)
        self.conn.close()


# ---------------------------------------------------------------------------------------------- the producers
class Pacer:
    """Says how many records to send now to keep ``rate`` for ``warmup + seconds`` seconds: at most 5 ms worth at
    once (a client that falls behind still stops on time), 0 when on schedule (the caller idles briefly)."""

    def __init__(self, rate: int, warmup: float, seconds: float) -> None:
        self.rate, self.warmup, self.seconds = rate, warmup, seconds
        self.sent = 0
        self.at_cut = 0  # records sent before the measured part
        self.cut_ns = self.end_ns = 0

    def bursts(self) -> Iterator[int]:
        start_ns = time.time_ns()
        start = time.perf_counter()
        self.cut_ns = start_ns + int(self.warmup * 1e9)
        cut_passed = False
        most = max(1, self.rate // 200)
        while (elapsed := time.perf_counter() - start) < self.warmup + self.seconds:
            if not cut_passed and elapsed >= self.warmup:
                self.at_cut, cut_passed = self.sent, True
            n = min(most, int(elapsed * self.rate) + 1 - self.sent)
            yield max(0, n)
            self.sent += max(0, n)
        self.end_ns = time.time_ns()

    def reached(self) -> float:
        return (self.sent - self.at_cut) / max(1e-9, (self.end_ns - self.cut_ns) / 1e9)


Finish = Callable[[int], float]  # (records sent in all) -> the deadline (time.monotonic) for the rest


def produce_confluent(bootstrap: str, topic: str, s: Setup, pacer: Pacer, finish: Finish) -> None:
    from confluent_kafka import Producer
    assert s.inflight is not None and s.linger_ms is not None
    p = Producer({"bootstrap.servers": bootstrap, "acks": s.acks, "linger.ms": s.linger_ms,
                  "compression.type": "none", "message.timeout.ms": 300000, "delivery.report.only.error": True,
                  "queue.buffering.max.messages": max(100_000, int(s.rate * (pacer.warmup + pacer.seconds)) + 1000),
                  "queue.buffering.max.kbytes": 2097151, **inflight_config(s.inflight, s.acks)})
    p.produce(topic, stamp(), partition=0)  # start-up: connected to the leader (an idempotent one: its id)
    if p.flush(30):
        raise RuntimeError("the first record was not delivered")
    produce = p.produce
    for n in pacer.bursts():
        for _ in range(n):
            while True:
                try:
                    produce(topic, stamp(), partition=0)
                    break
                except BufferError:
                    p.poll(0.001)
        p.poll(0)
        if not n:
            time.sleep(0.0005)
    deadline = finish(pacer.sent + 1)
    if p.flush(max(0.0, deadline - time.monotonic())):
        p.purge()  # a collapsed row: nothing more goes out (the brokers drain before the next row)
        p.flush(5)


def produce_kafka_python(bootstrap: str, topic: str, s: Setup, pacer: Pacer, finish: Finish) -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError
    p = KafkaProducer(bootstrap_servers=bootstrap, acks=s.acks)
    try:
        p.send(topic, stamp(), partition=0).get(30)  # start-up
        send = p.send
        for n in pacer.bursts():
            for _ in range(n):
                send(topic, stamp(), partition=0)
            if not n:
                time.sleep(0.0005)
        deadline = finish(pacer.sent + 1)
        try:
            p.flush(max(0.1, deadline - time.monotonic()))
        except KafkaTimeoutError:
            pass  # the consumer reports what is missing
    finally:
        p.close(timeout=5)


def produce_aiokafka(bootstrap: str, topic: str, s: Setup, pacer: Pacer, finish: Finish) -> None:
    from aiokafka import AIOKafkaProducer

    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=s.acks)
        await p.start()
        try:
            await (await p.send(topic, stamp(), partition=0))  # start-up
            for n in pacer.bursts():
                for _ in range(n):
                    await p.send(topic, stamp(), partition=0)
                await asyncio.sleep(0 if n else 0.0005)  # the sender task runs in this loop too
            deadline = finish(pacer.sent + 1)
            try:
                await asyncio.wait_for(p.flush(), max(0.1, deadline - time.monotonic()))
            except TimeoutError:
                pass  # the consumer reports what is missing
        finally:
            try:
                await asyncio.wait_for(p.stop(), 10)  # stop() waits for every pending batch
            except TimeoutError:
                log("aiokafka: stop() did not finish within 10 s")
    asyncio.run(run())


PRODUCERS: dict[str, Callable[[str, str, Setup, Pacer, Finish], None]] = {
    "confluent": produce_confluent, "kafka-python": produce_kafka_python, "aiokafka": produce_aiokafka}


# ---------------------------------------------------------------------------------------------- a row
def wait_idle(pids: list[int], timeout: float = 60.0, busy: float = 0.25) -> None:
    """Until the brokers together use less than ``busy`` of a core over half a second (bounded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        before = sum(cpu_seconds(p) for p in pids)
        time.sleep(0.5)
        if sum(cpu_seconds(p) for p in pids) - before < busy * 0.5:
            return
    log(f"the brokers were still busy after {timeout:.0f} s; measuring anyway")


def measure(c: Cluster, s: Setup, topic: str, seconds: float, warmup: float, grace: float) -> Result:
    if s.rf == 1:
        assert c.single is not None, "RF 1 rows need the standalone broker (cluster(single=True))"
        bootstrap = c.single.bootstrap
    else:
        bootstrap = c.bootstrap
    create_topic(bootstrap, topic, rf=s.rf, full_isr=s.rf > 1)
    wait_idle(c.pids())
    receiver = Receiver(bootstrap, topic)
    try:
        pacer = Pacer(s.rate, warmup, seconds)

        def finish(total: int) -> float:
            deadline = time.monotonic() + grace
            receiver.finish(total, deadline)
            return deadline
        PRODUCERS[s.client](bootstrap, topic, s, pacer, finish)
        sent_ns, received_ns = receiver.samples(grace + 60)
    finally:
        receiver.close()
    # In the order received: one partition, so in send order but for a retried request's records.
    latencies = [(r - ts) / 1e6 for ts, r in zip(sent_ns, received_ns) if ts >= pacer.cut_ns]
    return Result(s, pacer.sent + 1, len(set(sent_ns)), latencies, pacer.reached())


def run(setups: list[Setup], seconds: float, warmup: float, grace: float,
        on_row: Callable[[Result], None] | None = None) -> list[Result]:
    """Measures ``setups`` in order on one cluster (three brokers; a standalone one too if a row has RF 1)."""
    results = []
    with cluster(single=any(s.rf == 1 for s in setups), prefix="moldau-bench-lat-") as c:
        for n, s in enumerate(setups, start=1):
            try:
                results.append(measure(c, s, f"lat{n}", seconds, warmup, grace))
            except Exception as exc:  # noqa: BLE001 - one row's failure is reported in its row; the rest go on
                log(traceback.format_exc())
                results.append(Result(s, 0, 0, [], 0.0, error=repr(exc)[:200]))
            if on_row is not None:
                on_row(results[-1])
    return results


def matrix(rates: list[int], acks: list[int], lingers: list[int], inflights: list[str], clients: list[str],
           single: bool) -> list[Setup]:
    rows: list[Setup] = []
    if "confluent" in clients:
        for rf, rf_acks in ((3, acks), (1, [1] if single and 1 in acks else [])):
            rows += [Setup("confluent", rf, a, rate, linger, inflight)
                     for rate in rates for a in rf_acks for linger in lingers for inflight in inflights]
    rows += [Setup(client, 3, a, rate) for client in clients if client != "confluent"
             for rate in rates if rate <= PY_CLIENT_MAX_RATE for a in acks]
    return rows


def footer(seconds: float, warmup: float, grace: float) -> list[str]:
    return [f"100 B records into one partition; {warmup:g} s warm-up left out, then {seconds:g} s measured; "
            f"'missing': not received {grace:g} s after the last send; RF 3: three brokers, min.insync.replicas=2",
            "confluent-kafka: unbounded = enable.idempotence=false, max.in.flight 1,000,000; bounded = "
            "max.in.flight 5, enable.idempotence=true with acks=all (librdkafka refuses it with acks=1); "
            "kafka-python / aiokafka: default producers, acks set",
            "consumer: confluent-kafka in its own process, fetch.wait.max.ms=100"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rates", default="1000,10000,50000", help="records/s (kafka-python, aiokafka: <= 10,000)")
    parser.add_argument("--acks", default="1,all", help="1, all")
    parser.add_argument("--linger", default="0,5", help="confluent-kafka's linger.ms values")
    parser.add_argument("--inflight", default="unbounded,bounded", help="confluent-kafka: unbounded, bounded")
    parser.add_argument("--clients", default=",".join(CLIENTS), help=", ".join(CLIENTS))
    parser.add_argument("--single", action="store_true", help="also confluent-kafka acks=1 rows on one broker, RF 1")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured, after the warm-up")
    parser.add_argument("--warmup", type=float, default=10.0, help="left out")
    parser.add_argument("--grace", type=float, default=15.0, help="after the last send, for the rest to arrive")
    parser.add_argument("--markdown", action="store_true", help="print the table as markdown too")
    args = parser.parse_args(argv)

    def items(text: str, allowed: tuple[str, ...] | None = None) -> list[str]:
        out = [x.strip() for x in text.split(",") if x.strip()]
        bad = [x for x in out if allowed is not None and x not in allowed]
        if bad or not out:
            parser.error(f"{text!r}: expected a comma-separated list of {', '.join(allowed or ('numbers',))}")
        return out

    setups = matrix([int(r) for r in items(args.rates)],
                    [-1 if a == "all" else 1 for a in items(args.acks, ("1", "all"))],
                    [int(x) for x in items(args.linger)], items(args.inflight, INFLIGHT),
                    items(args.clients, CLIENTS), args.single)
    if not setups:
        parser.error("no rows: the flags pick nothing")
    command = " ".join([".venv/bin/python", "bench/latency_matrix.py", *(argv if argv is not None else sys.argv[1:])])
    load0 = os.getloadavg()
    log(f"{len(setups)} rows, about {len(setups) * (args.seconds + args.warmup + 5) / 60:.0f} min; {command}")
    log(HEADER)
    results = run(setups, args.seconds, args.warmup, args.grace, on_row=lambda r: log(r.row()))
    load1 = os.getloadavg()
    out = [command, HEADER, *(r.row() for r in results), *footer(args.seconds, args.warmup, args.grace),
           "load average (1, 5, 15 min) before: " + ", ".join(f"{x:.2f}" for x in load0)
           + "; after: " + ", ".join(f"{x:.2f}" for x in load1)]
    if args.markdown:
        out += ["", line(COLUMNS, True), "|" + "---|" * len(COLUMNS), *(r.row(True) for r in results)]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
