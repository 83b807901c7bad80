"""Transactional produce vs the idempotent producer, commit latency, and read_committed vs read_uncommitted consume,
on a three-broker ZooKeeper cluster, all in the same run.

    .venv/bin/python bench/transactions.py                          # 200,000 x 100 B per round, 3 rounds
    .venv/bin/python bench/transactions.py --records 100000 --rounds 2 --abort-every 10

Starts ZooKeeper (Debian's package) and three brokers, creates two topics of 4 partitions, replication factor 3,
min.insync.replicas=2, and measures with confluent-kafka (acks=all, linger.ms=5, 100-byte records spread round
robin over the 4 partitions), alternating, ``--rounds`` times each:
  * idempotent: ``enable.idempotence=true``, records/s until every record is acknowledged;
  * transactional: ``transactional.id``, transactions of ``--txn-records`` records (begin, produce, commit),
    records/s until the last commit returned; every ``--abort-every``-th transaction aborted instead (0: none);
    the commit latency is the time ``commit_transaction()`` takes (it flushes the transaction's tail, then EndTxn
    and waits for the coordinator's answer), p50 and p99 over every commit of every round.
Before its clock starts each producer writes one record to each partition and waits for them (the transactional
one in a committed transaction), so both kinds are timed from a producer with its id and its connections in place
(``warm_up``). Then reads the transactional topic whole at read_uncommitted and read_committed, alternating,
``--rounds`` times each (from offset 0, see ``consume``), and compares offsets consumed per second. Not part of
the test suite.

``--client moldau`` runs both producers with Moldau's own client (its blocking ``Producer``, the same settings;
one producer of each kind), to set the client's share of a transaction's time apart from the brokers'.

``--producers N`` runs N producers of each kind at once (each in its own process, ``--records`` / N records each,
the transactional ones with transactional ids of their own) and reports the cluster's records/s from the moment
all are ready to the last one's end. One producer measures a transactional producer's latency chain (each
transaction waits for its replication round trips one after the other); several measure what the cluster
delivers when, as with Kafka Streams' or Flink's parallel tasks, transactions overlap.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench import _cluster  # noqa: E402

PARTITIONS = 4
# Small internal topics: created quickly at the first transaction / group.
BROKER_OVERRIDES = {"transaction.state.log.num.partitions": "5", "offsets.topic.num.partitions": "5"}
VALUE = b"x" * 100


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def create_topic(bootstrap: str, name: str) -> None:
    _cluster.create_topic(bootstrap, name, partitions=PARTITIONS, rf=3, min_insync=2)


CLIENT = "confluent"  # --client: the producers' library (the consumers are confluent-kafka's either way)


class MoldauProducer:
    """Moldau's blocking producer behind the few confluent-kafka calls this bench makes (``--client moldau``)."""

    def __init__(self, config: dict[str, Any]) -> None:
        from moldau import Producer as Sync

        self.p = Sync(config)

    def list_topics(self, topic: str, timeout: float) -> None:
        pass  # the producer fetched the cluster's metadata when it started

    def produce(self, topic: str, value: bytes, partition: int, on_delivery: Any = None) -> None:
        self.p.produce(topic, value, partition=partition, on_delivery=on_delivery)

    def poll(self, timeout: float) -> int:
        return 0  # delivery callbacks run on the client's own loop

    def flush(self, timeout: float) -> int:
        self.p.flush(timeout)
        return 0

    def init_transactions(self, timeout: float) -> None:
        self.p.init_transactions()

    def begin_transaction(self) -> None:
        self.p.begin_transaction()

    def commit_transaction(self, timeout: float) -> None:
        self.p.commit_transaction(timeout)

    def abort_transaction(self, timeout: float) -> None:
        self.p.abort_transaction(timeout)


def producer(bootstrap: str, records: int, **extra: Any) -> Any:
    if CLIENT == "moldau":  # the same settings, in the names Moldau's client takes (Kafka's)
        named = {"delivery.timeout.ms" if k == "message.timeout.ms" else k: v for k, v in extra.items()}
        return MoldauProducer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                               "batch.size": 1048576, "buffer.memory": 1 << 30, **named})
    return Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 1048576,
                     "batch.num.messages": 1000000, "queue.buffering.max.messages": max(records + 1000, 100000),
                     "queue.buffering.max.kbytes": 2097151, "compression.type": "none",
                     "message.timeout.ms": 300000, **extra})


def produce_all(p: Any, topic: str, start: int, count: int, errors: list[Any]) -> None:
    for i in range(start, start + count):
        while True:
            try:
                p.produce(topic, VALUE, partition=i % PARTITIONS,
                          on_delivery=lambda err, _m: err and errors.append(err))
                break
            except BufferError:
                p.poll(0.001)
        if i & 0x3FFF == 0:
            p.poll(0)


def warm_up(p: Any, topic: str, transactional: bool) -> None:
    """One record to each partition, delivered, before the clock starts, so that both kinds start timing with a
    producer id and a connection to every leader. librdkafka asks for an idempotent producer's id on a timer that
    can hold a new producer's first records back for ~0.5 s (the transactional one gets its id in
    init_transactions(), before the clock): without this the idempotent rounds timed that wait, ~0.45 s of a
    100,000-record round, and the ratio read ~0.7 where it is ~0.4 (session 21). The transactional warm-up is a
    committed transaction of WARM_UP records (counted in what the topic holds)."""
    if transactional:
        p.begin_transaction()
    for partition in range(PARTITIONS):
        p.produce(topic, VALUE, partition=partition)
    if transactional:
        p.commit_transaction(60)
    elif p.flush(60):
        raise RuntimeError("warm-up records not delivered")


WARM_UP = PARTITIONS  # records each transactional producer commits before its clock starts


def idempotent(bootstrap: str, topic: str, records: int, on_start: Callable[[], None] | None = None) -> float:
    """Records/s of one round; ``on_start`` is called right before the clock starts (after the warm-up)."""
    errors: list[Any] = []
    p = producer(bootstrap, records, **{"enable.idempotence": True})
    p.list_topics(topic, timeout=10)
    warm_up(p, topic, transactional=False)
    if on_start is not None:
        on_start()
    start = time.perf_counter()
    produce_all(p, topic, 0, records, errors)
    remaining = p.flush(300)
    elapsed = time.perf_counter() - start
    if remaining or errors:
        raise RuntimeError(f"{remaining} undelivered, errors {errors[:3]}")
    return records / elapsed


def transactional(bootstrap: str, topic: str, records: int, txn_records: int, abort_every: int, tid: str,
                  ready: Any = None, go: Any = None,
                  on_start: Callable[[], None] | None = None) -> tuple[float, list[float], int]:
    """(records/s, commit latencies in ms, records committed with the warm-up's). ``ready``/``go``: a --producers
    run's start line; ``on_start`` is called right before the clock starts."""
    errors: list[Any] = []
    p = producer(bootstrap, txn_records, **{"transactional.id": tid, "transaction.timeout.ms": 60000,
                                              "message.timeout.ms": 60000})
    p.init_transactions(60)
    warm_up(p, topic, transactional=True)
    if ready is not None:
        ready.release()
        go.wait()
    if on_start is not None:
        on_start()
    commits: list[float] = []
    committed = 0
    start = time.perf_counter()
    for n, first in enumerate(range(0, records, txn_records), start=1):
        count = min(txn_records, records - first)
        p.begin_transaction()
        produce_all(p, topic, first, count, errors)
        if abort_every and n % abort_every == 0:
            # Flushed first, so the aborted records are in the logs (read_committed has them to skip), and the
            # AddPartitionsToTxn was answered: librdkafka sends EndTxn(abort) once it has sent one, and one sent
            # while the previous commit's markers were still on their way (CONCURRENT_TRANSACTIONS, ignored by
            # the aborting client) makes that EndTxn hit CompleteCommit: INVALID_TXN_STATE, as Kafka answers too.
            if p.flush(60):
                raise RuntimeError("records of an aborted transaction not flushed")
            p.abort_transaction(60)
            continue
        t0 = time.perf_counter()
        p.commit_transaction(60)
        commits.append((time.perf_counter() - t0) * 1000)
        committed += count
    elapsed = time.perf_counter() - start
    if errors:
        raise RuntimeError(f"errors {errors[:3]}")
    return records / elapsed, commits, committed + WARM_UP


def _child(kind: str, bootstrap: str, topic: str, records: int, txn_records: int, abort_every: int, tid: str,
           ready: Any, go: Any, out: Any) -> None:
    """One producer of a --producers run, in its own process: ready once connected, then waits for ``go``."""
    try:
        if kind == "idempotent":
            p = producer(bootstrap, records, **{"enable.idempotence": True})
            p.list_topics(topic, timeout=10)
            warm_up(p, topic, transactional=False)
            ready.release()
            go.wait()
            errors: list[Any] = []
            produce_all(p, topic, 0, records, errors)
            if p.flush(300) or errors:
                raise RuntimeError(f"undelivered, errors {errors[:3]}")
            out.put(("ok", time.time(), [], records))
        else:
            _, commits, committed = transactional(bootstrap, topic, records, txn_records, abort_every, tid,
                                                  ready=ready, go=go)
            out.put(("ok", time.time(), commits, committed))
    except Exception as exc:
        ready.release()
        out.put(("error", time.time(), [repr(exc)], 0))


def parallel(kind: str, bootstrap: str, topic: str, records: int, producers: int, txn_records: int,
             abort_every: int, tid: str) -> tuple[float, list[float], int]:
    """(records/s of all the producers together, commit latencies in ms, records committed)."""
    ctx = multiprocessing.get_context("spawn")  # no fork of a process with librdkafka's threads in it
    ready, go, out = ctx.Semaphore(0), ctx.Event(), ctx.Queue()
    share = records // producers
    procs = [ctx.Process(target=_child, args=(kind, bootstrap, topic, share, txn_records, abort_every,
                                              f"{tid}-{i}", ready, go, out)) for i in range(producers)]
    for proc in procs:
        proc.start()
    for _ in procs:
        if not ready.acquire(timeout=120):
            raise TimeoutError("a producer did not get ready")
    start = time.time()
    go.set()
    results = [out.get(timeout=900) for _ in procs]
    for proc in procs:
        proc.join(30)
    failed = [r for r in results if r[0] != "ok"]
    if failed:
        raise RuntimeError(f"{len(failed)} producers failed: {failed[0][2]}")
    end = max(r[1] for r in results)
    return share * producers / (end - start), [c for r in results for c in r[2]], sum(r[3] for r in results)


def consume(bootstrap: str, topic: str, isolation: str, expected: int) -> float:
    """Seconds until ``expected`` records were delivered from the whole topic, read by a new consumer from offset
    0. An explicit offset, not OFFSET_BEGINNING: for that librdkafka waits ~0.55 s after assign() before its first
    ListOffsets (docs/benchmarks.md, "Single broker"), as long as the rest of a 300,000-record read, which pulled
    both isolation levels' rates, and their ratio, toward each other (session 21). The topic starts at 0."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                         "isolation.level": isolation, "fetch.max.bytes": 52428800,
                         "max.partition.fetch.bytes": 10485760, "queued.min.messages": expected + 1,
                         "queued.max.messages.kbytes": 2097151, "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got = 0
    start = time.perf_counter()
    deadline = time.monotonic() + 600
    try:
        while got < expected:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{isolation}: {got:,} of {expected:,} records in 600 s")
            # Never ask for more than is left: librdkafka's batch call waits out its timeout for a short batch,
            # which added a whole second to the side whose count is not a multiple of the batch.
            for m in consumer.consume(num_messages=min(10000, expected - got), timeout=1.0):
                if m.error() is not None:
                    raise RuntimeError(f"{isolation}: {m.error()}")
                got += 1
        if got != expected:
            raise RuntimeError(f"{isolation}: {got} records, expected {expected}")
        return time.perf_counter() - start
    finally:
        consumer.close()


def run(records: int, txn_records: int, abort_every: int, rounds: int, producers: int = 1) -> str:
    with _cluster.cluster(overrides=BROKER_OVERRIDES, prefix="moldau-bench-txn-") as c:
        bootstrap = c.bootstrap
        rates: dict[str, list[float]] = {"idempotent": [], "transactional": []}
        commits: list[float] = []
        total = committed = 0
        for r in range(rounds):
            create_topic(bootstrap, f"idem-{r}")
            log(f"round {r + 1}: idempotent, {records:,} x 100 B ...")
            rates["idempotent"].append(
                idempotent(bootstrap, f"idem-{r}", records) if producers == 1 else
                parallel("idempotent", bootstrap, f"idem-{r}", records, producers, txn_records, abort_every, "")[0])
            log(f"round {r + 1}: transactional, transactions of {txn_records:,} ...")
            if r == 0:
                create_topic(bootstrap, "txn")
            rate, latencies, n = (
                transactional(bootstrap, "txn", records, txn_records, abort_every, f"bench-{r}") if producers == 1
                else parallel("transactional", bootstrap, "txn", records, producers, txn_records, abort_every,
                              f"bench-{r}"))
            rates["transactional"].append(rate)
            commits += latencies
            total += records // producers * producers + WARM_UP * producers
            committed += n
        reads: dict[str, list[float]] = {"read_uncommitted": [], "read_committed": []}
        for r in range(rounds):
            for isolation, expected in (("read_uncommitted", total), ("read_committed", committed)):
                log(f"round {r + 1}: {isolation} ...")
                reads[isolation].append(total / consume(bootstrap, "txn", isolation, expected))
    idem, txn = statistics.median(rates["idempotent"]), statistics.median(rates["transactional"])
    q = statistics.quantiles(commits, n=100)
    ru, rc = statistics.median(reads["read_uncommitted"]), statistics.median(reads["read_committed"])

    def rounds_of(values: list[float]) -> str:
        return " / ".join(f"{v:,.0f}" for v in values)

    return "\n".join([
        f"{'produce (4 partitions, RF 3, acks=all)':<40} {'records/s (median)':>18}  rounds",
        f"{'idempotent':<40} {idem:>18,.0f}  {rounds_of(rates['idempotent'])}",
        f"{f'transactional ({txn_records:,} per transaction)':<40} {txn:>18,.0f}  {rounds_of(rates['transactional'])}",
        f"transactional / idempotent: {txn / idem:.2f}",
        f"commit_transaction() latency over {len(commits)} commits: p50 {q[49]:.1f} ms, p99 {q[98]:.1f} ms",
        f"{'consume the transactional topic':<40} {'offsets/s (median)':>18}  rounds",
        f"{'read_uncommitted':<40} {ru:>18,.0f}  {rounds_of(reads['read_uncommitted'])}",
        f"{'read_committed':<40} {rc:>18,.0f}  {rounds_of(reads['read_committed'])}",
        f"read_committed / read_uncommitted: {rc / ru:.2f}",
        f"{records:,} records of 100 B per round from {producers} producer(s) of each kind, {rounds} rounds, every {abort_every or 'no'}th transaction aborted; "
        f"the topic holds {total:,} records, {committed:,} committed"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--txn-records", type=int, default=1000)
    parser.add_argument("--abort-every", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--producers", type=int, default=1, help="producers of each kind at once (processes)")
    parser.add_argument("--client", choices=("confluent", "moldau"), default="confluent",
                        help="the producers' library (moldau: one producer of each kind only)")
    args = parser.parse_args(argv)
    if args.client == "moldau" and args.producers != 1:
        parser.error("--client moldau runs one producer of each kind")
    global CLIENT
    CLIENT = args.client
    print(run(args.records, args.txn_records, args.abort_every, args.rounds, args.producers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
