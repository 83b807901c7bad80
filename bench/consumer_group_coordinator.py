"""The consumer group coordinator (KIP-848) in process: heartbeat cost and rebalance cost (issue #22).

    .venv/bin/python bench/consumer_group_coordinator.py [--members 100] [--topics 1000] [--partitions 12]

No sockets: a GroupCoordinator over an in-memory __consumer_offsets (the unit tests' fake replica manager, so the
records are really encoded and appended) and a manual timer. ``--topics`` topics exist in the metadata, each with
``--partitions`` partitions; every member subscribes to 10 of them. Reported: steady heartbeats/s (members at
their epoch, nothing changing: the common case every heartbeat interval), and the time to join ``--members``
members one by one and to reconcile the group after one member leaves (every member heartbeats until Stable).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from moldau.broker.coordinator.consumer_membership import HeartbeatRequest  # noqa: E402
from tests.unit.broker.test_group_coordinator import Harness  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=100)
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=12)
    args = parser.parse_args()
    h = Harness(consumer_session_timeout_ms=45_000, consumer_heartbeat_interval_ms=5_000)
    asyncio.run(h.lead(0))
    counts = {f"topic-{i:04d}": args.partitions for i in range(args.topics)}
    ids = {t: i.to_bytes(16, "big") for i, t in enumerate(counts)}
    h.c.partition_counts = lambda: counts
    h.c.topic_ids = lambda: ids
    subscribed = sorted(counts)[:10]
    c = h.c
    epochs: dict[str, int] = {}
    owned: dict[str, dict[str, set[int]]] = {}

    def beat(m: str, join: bool = False) -> None:
        r = c.consumer_group_heartbeat(HeartbeatRequest(
            "g", m, 0 if join else epochs[m], rebalance_timeout_ms=300_000 if join else -1,
            subscribed_topic_names=subscribed if join else None, owned={} if join else owned.get(m), client_id=m))
        assert r.error_code == 0, r
        epochs[m] = r.member_epoch
        if r.assignment is not None:
            owned[m] = r.assignment

    start = time.perf_counter()
    for i in range(args.members):
        beat(f"m{i}", join=True)
    joined = time.perf_counter() - start
    cg = c.store.get_group("g").consumer

    def settle() -> int:
        rounds = 0
        while cg.state() != "Stable":
            rounds += 1
            for m in list(cg.members):
                beat(m)
        return rounds

    start = time.perf_counter()
    rounds = settle()
    first_settle = time.perf_counter() - start
    n = 20_000
    members = list(cg.members)
    start = time.perf_counter()
    for i in range(n):
        beat(members[i % len(members)])
    steady = n / (time.perf_counter() - start)
    c.consumer_group_heartbeat(HeartbeatRequest("g", members[0], -1))
    epochs.pop(members[0])
    start = time.perf_counter()
    leave_rounds = settle()
    after_leave = time.perf_counter() - start
    records = len(h.rm.partitions[("__consumer_offsets", 0)].log.records())
    print(f"members={args.members} topics={args.topics} x {args.partitions} partitions (10 subscribed)")
    print(f"joins: {joined * 1000:.0f} ms for {args.members} members; reconcile to Stable: {first_settle * 1000:.0f} ms "
          f"({rounds} heartbeat rounds)")
    print(f"steady heartbeats: {steady:,.0f}/s")
    print(f"one member leaves: Stable again after {leave_rounds} rounds, {after_leave * 1000:.0f} ms")
    print(f"records appended to __consumer_offsets: {records}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
