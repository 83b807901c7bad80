"""The latency of one replication round trip on a three-broker cluster: one small acks=all Produce at a time.

    .venv/bin/python bench/replication_rtt.py                       # 2,000 requests of each kind
    .venv/bin/python bench/replication_rtt.py --requests 5000 --rounds 3

Starts ZooKeeper and three brokers as bench/transactions.py does, creates a topic as it does (4 partitions,
replication factor 3, min.insync.replicas=2; only partition 0 is written) and sends Produce requests (v9, one
100-byte record each, pre-built) to the partition's leader over one connection (Moldau's client connection), one
at a time: the next is sent when the previous is answered. ``acks=1`` measures a request's way through the leader alone; ``acks=all`` adds one
replication round trip (the leader's append wakes both followers' parked fetches, they append and fetch again,
the high watermark moves, the request is answered), which is what a transaction waits for four times in a row
(docs/benchmarks.md, "The floor"). Rounds of the two kinds alternate; printed: p50 / p90 / p99 in ms of each
kind over all its rounds, and the p50 of each round. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
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


async def measure(host: str, port: int, acks: int, requests: int) -> list[float]:
    """Latencies in ms of ``requests`` Produce requests sent one after the other to partition 0."""
    produce = REGISTRY[ApiKey.PRODUCE]
    batch = bytes(build_batch([(None, b"x" * 100, [], None)]))
    body = {"transactional_id": None, "acks": acks, "timeout_ms": 30000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]}
    out: list[float] = []
    async with BrokerConnection(host, port, client_id="rtt") as conn:
        for _ in range(requests):
            t0 = time.perf_counter()
            response = await conn.send(produce, body, PRODUCE_V)
            out.append((time.perf_counter() - t0) * 1000)
            error = response["responses"][0]["partition_responses"][0]["error_code"]
            if error:
                raise RuntimeError(f"acks={acks}: error {error}")
    return out


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def run(requests: int, rounds: int, warmup: int) -> str:
    with cluster(overrides=BROKER_OVERRIDES, prefix="moldau-bench-rtt-") as c:
        # bench/transactions.py's topic: 4 partitions, RF 3, min.insync.replicas=2; only partition 0 is written.
        leader = c.broker(create_topic(c.bootstrap, TOPIC, partitions=PARTITIONS, rf=3, min_insync=2,
                                       full_isr=True))
        times: dict[int, list[list[float]]] = {1: [], -1: []}
        asyncio.run(measure("127.0.0.1", leader.port, -1, warmup))
        for _ in range(rounds):
            for acks in (1, -1):
                times[acks].append(asyncio.run(measure("127.0.0.1", leader.port, acks, requests)))
    lines = [f"{'one Produce at a time (1 x 100 B)':<36} {'p50 ms':>7} {'p90 ms':>7} {'p99 ms':>7}  p50 per round"]
    for acks, name in ((1, "acks=1 (leader only)"), (-1, "acks=all (RF 3, one replication round)")):
        allv = [v for r in times[acks] for v in r]
        per_round = " / ".join(f"{statistics.median(r):.2f}" for r in times[acks])
        lines.append(f"{name:<36} {pct(allv, 0.5):>7.2f} {pct(allv, 0.9):>7.2f} {pct(allv, 0.99):>7.2f}  {per_round}")
    p50s = {acks: statistics.median([v for r in times[acks] for v in r]) for acks in times}
    lines.append(f"replication round (acks=all p50 - acks=1 p50): {p50s[-1] - p50s[1]:.2f} ms; "
                 f"{requests:,} requests per round, {rounds} rounds of each")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=200)
    args = parser.parse_args()
    print(run(args.requests, args.rounds, args.warmup))
    return 0


if __name__ == "__main__":
    sys.exit(main())
