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

latency: bench/latency_matrix.py's rows for a confluent-kafka producer with linger.ms=0, idempotence off and
max.in.flight.requests.per.connection 1,000,000 (librdkafka's non-idempotent default: unbounded) at a fixed rate,
one broker acks=1 and RF 3 acks=1 and acks=all; latency = produce() call to a consumer receiving the record. The
first ``--warmup`` seconds are left out; p50/p99/p99.9 over the rest, and the p50 of the first and second half of
it to show growth. Records still missing ``--grace`` seconds after the last produce() are reported as such (a
collapsed run). The consumer runs in a process of its own (until 2026-11-27 it was a thread of the producer's
process, sharing its GIL: the figures in docs/benchmarks.md before then were taken that way).
"""

from __future__ import annotations

import argparse
import socket
import statistics
import struct
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench import latency_matrix  # noqa: E402
from bench._cluster import cluster, cpu_seconds, create_topic  # noqa: E402
from bench.latency_matrix import Setup  # noqa: E402
from moldau.protocol.api import REGISTRY, ApiKey  # noqa: E402
from moldau.protocol.header import RequestHeader, encode_request_header, request_header_version  # noqa: E402
from moldau.protocol.records import build_batch  # noqa: E402
from moldau.protocol.types import INT32  # noqa: E402


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


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
    with cluster(single=True) as c:
        assert c.single is not None
        create_topic(c.single.bootstrap, "cap", rf=1)
        leader_id = create_topic(c.bootstrap, "cap3", rf=3, full_isr=True)
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
def latency(rates: list[int], seconds: float, warmup: float, grace: float) -> list[str]:
    """bench/latency_matrix.py's rows for confluent-kafka with linger.ms=0 and unbounded in-flight requests."""
    setups = [Setup("confluent", rf, acks, rate, 0, "unbounded")
              for rate in rates for rf, acks in ((1, 1), (3, 1), (3, -1))]
    log(latency_matrix.HEADER)
    results = latency_matrix.run(setups, seconds, warmup, grace, on_row=lambda r: log(r.row()))
    return [latency_matrix.HEADER, *(r.row() for r in results), *latency_matrix.footer(seconds, warmup, grace)]


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
