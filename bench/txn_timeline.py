"""Where a transaction's time goes: a per-phase timeline of back-to-back librdkafka transactions on a three-broker
cluster, from librdkafka's own ``debug=eos,protocol`` timestamps.

    .venv/bin/python bench/txn_timeline.py                 # 60 transactions of 1,000 x 100 B over 4 partitions
    .venv/bin/python bench/txn_timeline.py --txns 100 --txn-records 1000

Starts ZooKeeper and three brokers as bench/transactions.py does (a topic of 4 partitions, RF 3,
min.insync.replicas=2), runs a confluent-kafka transactional producer (acks=all, linger.ms=5) in a child process
with ``debug=eos,protocol`` whose log lines go to a file, then prints the median (and p90) of each phase of a
transaction, measured in the producer:

  begin -> AddPartitionsToTxn sent      the client's own delay before it registers the partitions
  AddPartitionsToTxn                    sent -> answered (the coordinator: the previous transaction's markers and
                                        CompleteCommit, then this one's Ongoing, each written with acks=all)
  answer -> first Produce sent          librdkafka releasing the partitions' queued batches
  Produce                               first request sent -> last answer (acks=all)
  last Produce answer -> EndTxn sent
  EndTxn                                sent -> answered (PrepareCommit written with acks=all)
  EndTxn answer -> next begin           commit_transaction() returning, the application's loop
  transaction                           begin -> next begin

librdkafka's log timestamps have millisecond resolution; the medians over many transactions are finer than that.
The first ``--warmup`` transactions are left out. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import transactions as bench  # noqa: E402

LINE = re.compile(r"^%(\d)\|(\d+)\.(\d{3})\|(\w+)\|[^|]*\| (.*)$")
APP = re.compile(r"^%APP\|(\d+\.\d+)\|(\w+)\|(\d+)$")


def child(bootstrap: str, topic: str, txns: int, txn_records: int) -> int:
    errors: list[object] = []
    p = bench.producer(bootstrap, txn_records, **{"transactional.id": "timeline", "debug": "eos,protocol",
                                                    "transaction.timeout.ms": 60000, "message.timeout.ms": 60000})
    p.init_transactions(60)

    def mark(what: str, n: int) -> None:
        sys.stderr.write(f"%APP|{time.time():.6f}|{what}|{n}\n")
        sys.stderr.flush()

    for n in range(txns):
        mark("begin", n)
        p.begin_transaction()
        bench.produce_all(p, topic, n * txn_records, txn_records, errors)
        mark("commit", n)
        p.commit_transaction(60)
        mark("committed", n)
    mark("begin", txns)
    if errors:
        print(f"errors: {errors[:3]}", file=sys.stderr)
        return 1
    return 0


def parse(path: Path, warmup: int) -> dict[str, list[float]]:
    """Phase -> durations in ms, one per transaction after the warm-up."""
    app: dict[tuple[str, int], float] = {}
    events: list[tuple[float, str]] = []
    for raw in path.read_text(errors="replace").splitlines():
        m = APP.match(raw)
        if m:
            app[(m.group(2), int(m.group(3)))] = float(m.group(1))
            continue
        m = LINE.match(raw)
        if not m:
            continue
        ts = int(m.group(2)) + int(m.group(3)) / 1000
        msg = m.group(5)
        for kind in ("AddPartitionsToTxn", "Produce", "EndTxn"):
            if f"Sent {kind}Request" in msg:
                events.append((ts, f"sent-{kind}"))
            elif f"Received {kind}Response" in msg:
                events.append((ts, f"recv-{kind}"))
    events.sort()
    phases: dict[str, list[float]] = {}
    n = warmup
    while ("begin", n + 1) in app:
        start, end = app[("begin", n)], app[("begin", n + 1)]
        # librdkafka's timestamps are truncated to the millisecond: widen the window by one on the left.
        mine = [(ts, e) for ts, e in events if start - 0.001 <= ts < end]

        def first(e: str, after: float = 0.0, evs: list[tuple[float, str]] = mine) -> float | None:
            return next((ts for ts, ev in evs if ev == e and ts >= after), None)

        apt_sent = first("sent-AddPartitionsToTxn")
        apt_recv = None if apt_sent is None else first("recv-AddPartitionsToTxn", apt_sent)
        prod_sent = None if apt_recv is None else first("sent-Produce", apt_recv)
        end_sent = None if prod_sent is None else first("sent-EndTxn", prod_sent)
        prod_recv = None if end_sent is None else max(
            (ts for ts, ev in mine if ev == "recv-Produce" and ts <= end_sent), default=None)
        end_recv = None if end_sent is None else first("recv-EndTxn", end_sent)
        stamps = [apt_sent, apt_recv, prod_sent, prod_recv, end_sent, end_recv]
        if any(s is None for s in stamps):
            n += 1
            continue
        a_s, a_r, p_s, p_r, e_s, e_r = (float(s) for s in stamps)  # type: ignore[arg-type]
        for name, value in (
                ("begin -> AddPartitionsToTxn sent", a_s - start),
                ("AddPartitionsToTxn (sent -> answer)", a_r - a_s),
                ("answer -> first Produce sent", p_s - a_r),
                ("Produce (first sent -> last answer)", p_r - p_s),
                ("last Produce answer -> EndTxn sent", e_s - p_r),
                ("EndTxn (sent -> answer)", e_r - e_s),
                ("EndTxn answer -> next begin", end - e_r),
                ("transaction (begin -> next begin)", end - start),
                ("produce() calls (begin -> commit called)", app[("commit", n)] - start)):
            phases.setdefault(name, []).append(value * 1000)
        n += 1
    return phases


def run(txns: int, txn_records: int, warmup: int, keep: Path | None) -> str:
    with bench._cluster.cluster(overrides=bench.BROKER_OVERRIDES, prefix="moldau-bench-txnline-") as c:
        bootstrap = c.bootstrap
        bench.create_topic(bootstrap, "txn")
        trace = (keep or c.root) / "librdkafka.log"
        trace.parent.mkdir(parents=True, exist_ok=True)
        with open(trace, "wb") as err:
            rc = subprocess.run([sys.executable, __file__, "--child", bootstrap, "--txns", str(txns),
                                 "--txn-records", str(txn_records)], stderr=err, timeout=600).returncode
        if rc != 0:
            raise RuntimeError(f"the producer exited with {rc}; see {trace}" + ("" if keep else " (removed)"))
        phases = parse(trace, warmup)
    lines = [f"{txns - warmup} transactions of {txn_records:,} x 100 B (after {warmup} warm-up), ms:",
             f"{'phase':<44} {'median':>8} {'p90':>8}"]
    for name, values in phases.items():
        p90 = statistics.quantiles(values, n=10)[8] if len(values) > 1 else values[0]
        lines.append(f"{name:<44} {statistics.median(values):>8.2f} {p90:>8.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--txns", type=int, default=60)
    parser.add_argument("--txn-records", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--keep", type=Path, default=None, help="write librdkafka's log here and keep it")
    parser.add_argument("--child", metavar="BOOTSTRAP", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.child, "txn", args.txns, args.txn_records)
    print(run(args.txns, args.txn_records, args.warmup, args.keep))
    return 0


if __name__ == "__main__":
    sys.exit(main())
