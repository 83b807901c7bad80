"""Where one replication round trip's time goes, hop by hop: one small acks=all Produce at a time on a three-broker
cluster, with timestamps taken in the leader, both followers and the bench.

    .venv/bin/python bench/hop_map.py                      # 500 requests after 200 of warm-up
    .venv/bin/python bench/hop_map.py --requests 1000 --acks 1

Starts ZooKeeper and three brokers as bench/replication_rtt.py does (bench/transactions.py's topic: 4 partitions,
RF 3, min.insync.replicas=2; partition 0 is written), with bench/_hop_trace/ first on their PYTHONPATH and
MOLDAU_HOP_TRACE set: its ``sitecustomize`` wraps a few methods of the brokers at start-up to record
CLOCK_MONOTONIC timestamps (system-wide, so the processes' clocks agree); the brokers' code itself carries no
instrumentation. Each request is one pre-built Produce (v9, one 100-byte record) over one connection, the next
sent when the previous is answered.

Printed: for each event of a request's way (client send, leader: produce read, handled, appended, the followers'
parked fetches checked and answered; each follower: answer received, decoded, appended, next fetch sent; leader:
those fetches read and handled, high watermark moved, produce completed and answered; client: answer), its
median and p90 time after the client's send in us, over the requests where it happened; the follower whose answer
came first is F1. The wrappers cost ~1 us each (~20 per round trip), so the round trip here is a little longer
than bench/replication_rtt.py's. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench._cluster import cluster, create_topic  # noqa: E402
from bench.transactions import BROKER_OVERRIDES, PARTITIONS  # noqa: E402
from moldau.connection import BrokerConnection  # noqa: E402
from moldau.protocol.api import REGISTRY, ApiKey  # noqa: E402
from moldau.protocol.records import build_batch  # noqa: E402

TOPIC = "rtt"
PRODUCE_V = 9


async def probe(port: int, acks: int, requests: int) -> list[tuple[int, int]]:
    """(send, answer) CLOCK_MONOTONIC ns of ``requests`` Produce requests sent one after the other."""
    produce = REGISTRY[ApiKey.PRODUCE]
    batch = bytes(build_batch([(None, b"x" * 100, [], None)]))
    body = {"transactional_id": None, "acks": acks, "timeout_ms": 30000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]}
    out: list[tuple[int, int]] = []
    async with BrokerConnection("127.0.0.1", port, client_id="hop-map") as conn:
        for _ in range(requests):
            t0 = time.monotonic_ns()
            response = await conn.send(produce, body, PRODUCE_V)
            out.append((t0, time.monotonic_ns()))
            if response["responses"][0]["partition_responses"][0]["error_code"]:
                raise RuntimeError(f"acks={acks}: error {response}")
    return out


def read_trace(path: Path) -> list[tuple[int, str, int]]:
    events = []
    for line in path.read_text().splitlines():
        t, label, v = line.split()
        events.append((int(t), label, int(v)))
    events.sort()
    return events


def timeline(requests: list[tuple[int, int]], traces: dict[str, list[tuple[int, str, int]]], leader: int,
             leader_port: int, followers: list[int]) -> dict[str, list[float]]:
    """(event name with its occurrence) -> offsets in us from the client's send, one per request that had it."""
    offsets: dict[str, list[float]] = defaultdict(list)
    cursor = {name: 0 for name in traces}
    for send, answer in requests:
        window: list[tuple[int, str, str, int]] = []
        for name, events in traces.items():
            i = cursor[name]
            while i < len(events) and events[i][0] < send:
                i += 1
            cursor[name] = i
            while i < len(events) and events[i][0] <= answer:
                t, label, v = events[i]
                i += 1
                # A follower's events on its way with another leader (the topic's other partitions) are not ours.
                if label.startswith("F.") and v != (leader if label.startswith("F.append") else leader_port):
                    continue
                window.append((t, name, label, v))
        window.sort()
        # F1: the follower whose fetch answer arrived first in this request.
        first = [name for _, name, label, _ in window if label == "F.data"]
        order = list(dict.fromkeys(first + [f"b{f}" for f in followers]))
        role = {order[0]: "F1", order[1]: "F2"} if len(order) >= 2 else {}
        replica_role = {int(name[1:]): r for name, r in role.items()}
        seen: dict[str, int] = defaultdict(int)
        offsets["C.send"].append(0.0)
        for t, name, label, v in window:
            who = "L" if name == f"b{leader}" else role.get(name, name)
            if label.startswith("L.") and label in FOLLOWER_VALUED:
                label = f"{label}[{replica_role.get(v, v)}]"
            elif label == "L.handle_start" or label == "L.handle_done":
                label = f"{label}[{'produce' if v == 0 else 'fetch'}]"
            key = f"{who}:{label.split('.', 1)[1]}"
            seen[key] += 1
            offsets[f"{key}#{seen[key]}"].append((t - send) / 1000)
        offsets["C.answer"].append((answer - send) / 1000)
    return offsets


FOLLOWER_VALUED = {"L.recv_fetch", "L.fetch_answer_start", "L.fetch_answer_sent", "L.hw_moved", "L.fetch_check"}


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def report(offsets: dict[str, list[float]], n: int) -> str:
    rows = sorted(((statistics.median(v), k, v) for k, v in offsets.items() if len(v) >= n * 0.2),
                  key=lambda r: r[0])
    lines = [f"{'event (process:what#occurrence)':<44} {'median us':>9} {'p90 us':>8} {'share':>6}"]
    for median, key, values in rows:
        lines.append(f"{key:<44} {median:>9.1f} {pct(values, 0.9):>8.1f} {len(values) / n:>6.0%}")
    return "\n".join(lines)


def run(requests: int, warmup: int, acks: int) -> str:
    trace_dir = Path(tempfile.mkdtemp(prefix="moldau-hop-trace-"))
    os.environ["MOLDAU_HOP_TRACE"] = str(trace_dir / "trace")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "bench" / "_hop_trace")] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    try:
        with cluster(overrides=BROKER_OVERRIDES, prefix="moldau-bench-hop-") as c:
            leader = create_topic(c.bootstrap, TOPIC, partitions=PARTITIONS, rf=3, min_insync=2, full_isr=True)
            port = c.broker(leader).port
            asyncio.run(probe(port, acks, warmup))
            measured = asyncio.run(probe(port, acks, requests))
            time.sleep(1.0)  # the tracers flush every 0.3 s
            pids = {b.pid: b.broker_id for b in c.brokers}
            traces = {f"b{pids[int(p.suffix[1:])]}": read_trace(p) for p in trace_dir.glob("trace.*")
                      if int(p.suffix[1:]) in pids}
            followers = [b.broker_id for b in c.brokers if b.broker_id != leader]
    finally:
        os.environ.pop("MOLDAU_HOP_TRACE", None)
    offsets = timeline(measured, traces, leader, port, followers)
    rtts = [(a - s) / 1000 for s, a in measured]
    return (report(offsets, len(measured)) +
            f"\nacks={acks}: {len(measured)} requests, round trip median {statistics.median(rtts):.0f} us, "
            f"p99 {pct(rtts, 0.99):.0f} us (traced); leader broker {leader}; traces in {trace_dir}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--acks", type=int, default=-1, choices=(1, -1))
    args = parser.parse_args()
    print(run(args.requests, args.warmup, args.acks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
