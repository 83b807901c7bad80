"""read_committed vs read_uncommitted consume throughput on one Moldau broker, in the same run.

    .venv/bin/python bench/read_committed.py                       # 500,000 x 100 B, transactions of 1,000
    .venv/bin/python bench/read_committed.py --records 200000 --abort-every 5 --rounds 3

Starts its own broker (like the test fixture). Writes the partition with Moldau's connection layer standing in
for transactional producers and their coordinator: batches of 100 records in transactions of ``--txn-records``
records, two producers interleaved, each transaction ended by WriteTxnMarkers (every ``--abort-every``-th one
aborted). Then reads the whole partition with confluent-kafka (librdkafka) at isolation.level read_uncommitted
and read_committed, alternating, ``--rounds`` times each, and prints records/s (read_committed delivers fewer
records: the aborted ones are dropped by the client, so the rates compare offsets consumed per second), from
offset 0 (see ``consume``). Not part of the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil
from confluent_kafka import Consumer, TopicPartition

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from moldau.connection import BrokerConnection, api_for  # noqa: E402
from moldau.protocol.api import ApiKey  # noqa: E402
from moldau.protocol.records import build_batch  # noqa: E402
from tests.integration.harness import BrokerProcess  # noqa: E402

TOPIC = "bench-read-committed"
BATCH = 100


async def fill(port: int, records: int, txn_records: int, size: int, abort_every: int) -> tuple[int, int]:
    """Writes the transactions; returns (records written, records in aborted transactions)."""
    value = b"x" * size
    async with BrokerConnection("127.0.0.1", port, client_id="bench-read-committed") as conn:
        created = await conn.send(api_for(ApiKey.CREATE_TOPICS), {"topics": [
            {"name": TOPIC, "num_partitions": 1, "replication_factor": 1}], "timeout_ms": 10000})
        assert created["topics"][0]["error_code"] == 0, created
        seqs = {1: 0, 2: 0}
        written = aborted = txn = 0
        while written < records:
            txn += 1
            abort = abort_every > 0 and txn % abort_every == 0
            for _ in range(0, txn_records, BATCH):
                for pid in (1, 2):  # two producers' transactions interleave batch by batch
                    batch = build_batch([(None, value, None, None)] * BATCH, producer_id=pid, producer_epoch=0,
                                        base_sequence=seqs[pid], is_transactional=True)
                    seqs[pid] += BATCH
                    answer = await conn.send(api_for(ApiKey.PRODUCE), {
                        "transactional_id": f"bench-{pid}", "acks": -1, "timeout_ms": 10000,
                        "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]})
                    assert answer["responses"][0]["partition_responses"][0]["error_code"] == 0, answer
                    written += BATCH
                    aborted += BATCH if abort and pid == 1 else 0
            markers = await conn.send(api_for(ApiKey.WRITE_TXN_MARKERS), {"markers": [
                {"producer_id": pid, "producer_epoch": 0, "transaction_result": not (abort and pid == 1),
                 "coordinator_epoch": 0, "topics": [{"name": TOPIC, "partition_indexes": [0]}]}
                for pid in (1, 2)]})
            assert all(p["error_code"] == 0 for m in markers["markers"] for t in m["topics"]
                       for p in t["partitions"]), markers
    return written, aborted


def consume(bootstrap: str, isolation: str, expected: int) -> float:
    """Seconds until the ``expected`` records were delivered, read by a new consumer from offset 0. An explicit
    offset, not OFFSET_BEGINNING: for that librdkafka waits ~0.55 s after assign() before its first ListOffsets,
    a quarter of a round, which pulled both isolation levels' rates toward each other (session 21)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                         "isolation.level": isolation, "fetch.max.bytes": 52428800,
                         "max.partition.fetch.bytes": 10485760, "queued.min.messages": expected + 1,
                         "queued.max.messages.kbytes": 2097151, "fetch.queue.backoff.ms": 10,
                         "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    got = 0
    start = time.perf_counter()
    deadline = time.monotonic() + 600
    try:
        while got < expected:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{isolation}: {got:,} of {expected:,} records in 600 s")
            # at most what is left: librdkafka waits out the timeout for a short batch
            for m in consumer.consume(num_messages=min(10000, expected - got), timeout=1.0):
                if m.error() is not None:
                    raise RuntimeError(f"{isolation}: {m.error()}")
                got += 1
        if got != expected:
            raise RuntimeError(f"{isolation}: {got} records, expected {expected}")
        return time.perf_counter() - start
    finally:
        consumer.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--txn-records", type=int, default=1000, help="records per transaction (per producer)")
    ap.add_argument("--abort-every", type=int, default=10, help="abort every Nth transaction of producer 1")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="moldau-bench-rc-"))
    broker = BrokerProcess(workdir)
    try:
        broker.start()
        t0 = time.perf_counter()
        written, aborted = asyncio.run(fill(broker.port, args.records, args.txn_records, args.size,
                                            args.abort_every))
        print(f"wrote {written:,} records ({aborted:,} aborted) in {time.perf_counter() - t0:.1f} s")
        rates: dict[str, list[float]] = {"read_uncommitted": [], "read_committed": []}
        counts: dict[str, int] = {}
        cpu: dict[str, float] = {}
        client: dict[str, float] = {}
        proc, me = psutil.Process(broker.pid), psutil.Process()
        for _ in range(args.rounds):
            for isolation, expected in (("read_uncommitted", written), ("read_committed", written - aborted)):
                cpu0, own0 = sum(proc.cpu_times()[:2]), sum(me.cpu_times()[:2])
                seconds = consume(broker.bootstrap, isolation, expected)
                cpu[isolation] = cpu.get(isolation, 0.0) + sum(proc.cpu_times()[:2]) - cpu0
                client[isolation] = client.get(isolation, 0.0) + sum(me.cpu_times()[:2]) - own0
                rates[isolation].append(written / seconds)
                counts[isolation] = expected
        print(f"{'isolation':<18} {'records':>10} {'offsets/s (median)':>20} {'all rounds':>30} "
              f"{'broker CPU s/round':>20} {'client CPU s/round':>20}")
        for isolation, values in rates.items():
            print(f"{isolation:<18} {counts[isolation]:>10,} {statistics.median(values):>20,.0f} "
                  f"{', '.join(f'{v:,.0f}' for v in values):>30} {cpu[isolation] / args.rounds:>20.2f} "
                  f"{client[isolation] / args.rounds:>20.2f}")
        ratio = statistics.median(rates["read_committed"]) / statistics.median(rates["read_uncommitted"])
        print(f"read_committed / read_uncommitted: {ratio:.2f}")
    finally:
        broker.stop()
        broker.kill()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
