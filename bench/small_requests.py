"""Small-request capacity and steady-state end-to-end latency (issue #21).

    .venv/bin/python bench/small_requests.py capacity                 # requests/s, broker CPU per request
    .venv/bin/python bench/small_requests.py latency --rates 1000,10000 --seconds 20
    .venv/bin/python bench/small_requests.py all

Starts one standalone broker and ZooKeeper plus three brokers (RF 3, min.insync.replicas=2), all on this machine.

capacity: one connection writes Produce requests (v7) of one 100 B record each, pre-encoded, keeping ``--window``
requests in flight, and reads the answers; acks=1 and acks=all, one broker and three. Reported: requests/s (wall
clock: noisy on a shared machine) and the brokers' CPU time per request, from /proc/<pid>/stat (user+system, all
brokers summed; the leader's share beside it), which hardly depends on the machine's other load. Every answer is
checked: error code 0 and offsets strictly increasing in the order of the requests.

latency: a confluent-kafka producer with linger.ms=0, idempotence off and max.in.flight.requests.per.connection
1,000,000 (librdkafka's non-idempotent default: unbounded) at a fixed rate; latency = produce() call to a consumer
(in the same process, fetch.wait.max.ms=100) receiving the record. The first ``--warmup`` seconds are left out;
p50/p99/p99.9 over the rest, and the p50 of the first and second half of it to show growth. Records still
missing ``--grace`` seconds after the last produce() are reported as such (a collapsed run).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import struct
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.replicated import clusters  # noqa: E402  (one broker + a 3-broker ZooKeeper cluster)
from moldau.protocol.api import REGISTRY, ApiKey  # noqa: E402
from moldau.protocol.header import RequestHeader, encode_request_header, request_header_version  # noqa: E402
from moldau.protocol.records import build_batch  # noqa: E402
from moldau.protocol.types import INT32  # noqa: E402
from tests.integration.harness import wait_until  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def create_topic(bootstrap: str, name: str, rf: int) -> int:
    """Creates a one-partition topic; returns its leader's broker id."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(name, num_partitions=1, replication_factor=rf, config={"min.insync.replicas": str(min(rf, 2))})
    admin.create_topics([topic])[name].result(timeout=30)
    probe = Producer({"bootstrap.servers": bootstrap})
    wait_until(lambda: probe.list_topics(name, timeout=5).topics[name].partitions[0].leader >= 0, 30, "a leader")
    if rf > 1:  # every replica in sync, so acks=all waits for real followers
        wait_until(lambda: len(probe.list_topics(name, timeout=5).topics[name].partitions[0].isrs) == rf, 30,
                   "a full ISR")
    return int(probe.list_topics(name, timeout=5).topics[name].partitions[0].leader)


# ---------------------------------------------------------------------------------------------- capacity
PRODUCE_VERSION = 7


def produce_frames(topic: str, acks: int, count: int) -> list[bytes]:
    api = REGISTRY[ApiKey.PRODUCE]
    encode = api.request_encoder(PRODUCE_VERSION)
    batch = build_batch([(None, b"v" * 100, [], None)])
    frames = []
    hv = request_header_version(api.key, api.is_flexible(PRODUCE_VERSION), PRODUCE_VERSION)
    for cid in range(count):
        out = bytearray(4)
        encode_request_header(out, RequestHeader(api.key, PRODUCE_VERSION, cid, "bench"), hv)
        encode(out, [], {"transactional_id": None, "acks": acks, "timeout_ms": 30000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
        INT32.pack_into(out, 0, len(out) - 4)
        frames.append(bytes(out))
    return frames


def _answers(sock: socket.socket, buf: bytearray) -> Iterator[memoryview]:
    """Complete response frames from ``buf`` (consumed), reading the socket once."""
    data = sock.recv(1 << 20)
    if not data:
        raise ConnectionError("broker closed the connection")
    buf += data
    pos = 0
    frames = []
    while len(buf) - pos >= 4:
        size = struct.unpack_from(">i", buf, pos)[0]
        if len(buf) - pos - 4 < size:
            break
        frames.append(bytes(buf[pos + 4:pos + 4 + size]))
        pos += 4 + size
    del buf[:pos]
    yield from (memoryview(f) for f in frames)


def _check(frame: memoryview, expect_cid: int, last_offset: int, topic_len: int) -> int:
    """Correlation id, error code and base offset of a Produce v7 answer with one topic and one partition."""
    cid = struct.unpack_from(">i", frame, 0)[0]
    if cid != expect_cid:
        raise AssertionError(f"answer {cid} where {expect_cid} was due: out of order")
    pos = 4 + 4 + 2 + topic_len + 4  # header, topic count, topic name, partition count
    index, error, base_offset = struct.unpack_from(">ihq", frame, pos)
    if error != 0 or base_offset <= last_offset:
        raise AssertionError(f"request {cid}: error {error}, base offset {base_offset} after {last_offset}")
    return int(base_offset)


def capacity_run(host_port: str, topic: str, acks: int, requests: int, window: int,
                 pids: list[int]) -> tuple[float, list[float]]:
    """(requests/s, CPU seconds per request of each broker in ``pids``)."""
    frames = produce_frames(topic, acks, requests)
    host, port = host_port.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = bytearray()
    cpu0 = [cpu_seconds(p) for p in pids]
    start = time.perf_counter()
    sent = answered = 0
    last = -1
    try:
        while answered < requests:
            if sent < requests and sent - answered < window:
                upto = min(requests, answered + window)
                sock.sendall(b"".join(frames[sent:upto]))
                sent = upto
            for frame in _answers(sock, buf):
                last = _check(frame, answered, last, len(topic))
                answered += 1
        elapsed = time.perf_counter() - start
    finally:
        sock.close()
    cpu = [(cpu_seconds(p) - c) / requests for p, c in zip(pids, cpu0)]
    return requests / elapsed, cpu


def capacity(requests: int, window: int, repeats: int) -> list[str]:
    rows = [f"{'setup':<32} {'acks':>4} {'requests/s':>11} {'broker CPU us/req (leader)':>27}"]
    with clusters() as c:
        create_topic(c.single.bootstrap, "cap", 1)
        leader_id = create_topic(c.bootstrap, "cap3", 3)
        leader = next(b for b in c.brokers if b.broker_id == leader_id)
        cases = [("1 broker, RF 1", c.single.bootstrap, "cap", [c.single.pid]),
                 ("3 brokers, RF 3, min.insync=2", leader.bootstrap, "cap3",
                  [leader.pid] + [b.pid for b in c.brokers if b is not leader])]
        capacity_run(c.single.bootstrap, "cap", 1, 2000, window, [c.single.pid])  # warm up
        capacity_run(leader.bootstrap, "cap3", -1, 2000, window, [leader.pid])
        pids = [c.single.pid] + [b.pid for b in c.brokers]
        idle0 = [cpu_seconds(p) for p in pids]
        time.sleep(5.0)
        idle = [(cpu_seconds(p) - c0) / 5.0 * 100 for p, c0 in zip(pids, idle0)]
        rows.append("idle CPU (no requests), % of a core: single " + ", ".join(f"{v:.1f}" for v in idle[:1])
                    + "; cluster " + ", ".join(f"{v:.1f}" for v in idle[1:]))
        for name, addr, topic, pids in cases:
            for acks in (1, -1):
                results = [capacity_run(addr, topic, acks, requests, window, pids) for _ in range(repeats)]
                rate = statistics.median(r[0] for r in results)
                total = statistics.median(sum(r[1]) for r in results) * 1e6
                lead = statistics.median(r[1][0] for r in results) * 1e6
                rows.append(f"{name:<32} {acks:>4} {rate:>11,.0f} {total:>17.0f} ({lead:>5.0f})")
                log(rows[-1] + "   runs: " + ", ".join(f"{r[0]:,.0f}/s" for r in results))
    rows.append(f"{requests:,} Produce v7 requests of one 100 B record, {window} in flight on one connection; "
                f"median of {repeats} runs")
    return rows


# ---------------------------------------------------------------------------------------------- latency
def latency_run(bootstrap: str, topic: str, acks: int, rate: int, seconds: float, warmup: float,
                grace: float) -> str:
    total = int(rate * (seconds + warmup))
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"lat-{time.time_ns()}",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100, "fetch.min.bytes": 1})
    consumer.assign([TopicPartition(topic, 0, OFFSET_END)])
    consumer.consume(1, 2.0)  # connected and positioned before the clock starts
    samples: list[tuple[int, float]] = []  # (send time ns, latency ms)
    stop = threading.Event()

    def consume() -> None:
        # poll() wakes at the first record; consume(n, 0) then takes what has arrived with it. consume(n, t)
        # alone waits out its whole timeout unless n records come first: that wait would be in every sample.
        while len(samples) < total and not stop.is_set():
            first = consumer.poll(0.05)
            if first is None:
                continue
            batch = [first, *consumer.consume(10000, 0)]
            now = time.time_ns()
            for msg in batch:
                if msg.error() is None:
                    sent_ns = int(msg.value()[:20])
                    samples.append((sent_ns, (now - sent_ns) / 1e6))

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0, "enable.idempotence": False,
                  "max.in.flight.requests.per.connection": 1000000, "compression.type": "none",
                  "queue.buffering.max.messages": max(total + 1000, 100000), "message.timeout.ms": 300000,
                  "delivery.report.only.error": True})
    p.list_topics(topic, timeout=10)
    start_ns = time.time_ns()
    start = time.perf_counter()
    sent = 0
    while sent < total:
        due = min(total, int((time.perf_counter() - start) * rate) + 1)
        while sent < due:
            p.produce(topic, str(time.time_ns()).rjust(20, "0").encode() + b"y" * 80, partition=0)
            sent += 1
        p.poll(0)
        time.sleep(0.0005)
    deadline = time.monotonic() + grace
    while len(samples) < total and time.monotonic() < deadline:
        p.poll(0.05)
    stop.set()
    thread.join(5)
    p.flush(1)
    consumer.close()
    cut = start_ns + int(warmup * 1e9)
    steady = [lat for ts, lat in sorted(samples) if ts >= cut]
    missing = total - len(samples)
    if len(steady) < 100:
        return f"{len(steady)} steady-state samples, {missing:,} records missing after {grace:.0f} s"
    q = statistics.quantiles(steady, n=1000)
    half = len(steady) // 2
    first, second = statistics.median(steady[:half]), statistics.median(steady[half:])
    return (f"{q[499]:>9.1f} {q[989]:>9.1f} {q[998]:>9.1f} | {first:>9.1f} {second:>9.1f} | "
            f"{missing:,} missing")


def latency(rates: list[int], seconds: float, warmup: float, grace: float) -> list[str]:
    rows = [f"{'setup':<30} {'acks':>4} {'rate/s':>7} | {'p50 ms':>9} {'p99 ms':>9} {'p99.9 ms':>9} | "
            f"{'p50 1st':>9} {'p50 2nd':>9} |"]
    with clusters() as c:
        create_topic(c.single.bootstrap, "warm", 1)
        create_topic(c.bootstrap, "warm3", 3)
        n = 0
        for rate in rates:
            for name, bootstrap, rf, acks in (("1 broker, RF 1", c.single.bootstrap, 1, 1),
                                              ("3 brokers, RF 3, min.insync=2", c.bootstrap, 3, 1),
                                              ("3 brokers, RF 3, min.insync=2", c.bootstrap, 3, -1)):
                n += 1
                topic = f"lat{n}"
                create_topic(bootstrap, topic, rf)
                result = latency_run(bootstrap, topic, acks, rate, seconds, warmup, grace)
                rows.append(f"{name:<30} {acks:>4} {rate:>7,} | {result}")
                log(rows[-1])
    rows.append(f"confluent-kafka, linger.ms=0, idempotence off, max.in.flight 1,000,000; {warmup:.0f} s warm-up "
                f"left out, then {seconds:.0f} s measured; 100 B records, one partition")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("capacity", "latency", "all"))
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rates", default="1000,10000")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--grace", type=float, default=30.0)
    args = parser.parse_args(argv)
    out: list[str] = []
    if args.what in ("capacity", "all"):
        out += capacity(args.requests, args.window, args.repeats)
    if args.what in ("latency", "all"):
        out += latency([int(r) for r in args.rates.split(",")], args.seconds, args.warmup, args.grace)
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
