"""Moldau's own transactional producer and read_committed consumer against a real broker: commit, abort, commit
over two topics and five partitions (Moldau's read_committed consumer sees exactly the committed records in order,
read_uncommitted all of them, confluent-kafka's read_committed consumer agrees); consume-transform-produce with
send_offsets_to_transaction (input offsets and outputs committed atomically, an abort moves neither); a second
producer with the same transactional.id fences the first, whose commit fails fatally."""

from __future__ import annotations

import asyncio
import io
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from moldau import Producer as SyncProducer
from moldau.aio import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from moldau.errors import KafkaError, TransactionError

from .harness import BrokerProcess
from .test_transactions_coordinator import read_all

pytestmark = pytest.mark.integration

TIMEOUT_S = 30.0
BIN = Path(sys.executable).parent


def _run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 120))


async def _create(bootstrap: str, topics: dict[str, int]) -> None:
    async with AdminClient(bootstrap_servers=bootstrap) as admin:
        await admin.create_topics([NewTopic(t, n, 1) for t, n in topics.items()])


async def _read_to_end(bootstrap: str, partitions: list[TopicPartition], isolation: str,
                       group: str | None = None) -> dict[TopicPartition, list[bytes]]:
    """Every record from offset 0 up to the partitions' end offsets for this isolation level (the LSO for
    read_committed), per partition in offset order."""
    async with Consumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False,
                        auto_offset_reset="earliest") as consumer:
        consumer.assign(partitions)
        ends = await consumer.end_offsets(partitions)
        got: dict[TopicPartition, list[bytes]] = {tp: [] for tp in partitions}
        deadline = time.monotonic() + TIMEOUT_S
        while any([await consumer.position(tp) < ends[tp] for tp in partitions]):
            assert time.monotonic() < deadline, f"{isolation}: {got} short of {ends}"
            for tp, recs in (await consumer.getmany(timeout_ms=500)).items():
                got[tp].extend(r.value for r in recs)
        return got


def test_commit_abort_commit_seen_by_each_isolation_level(broker: BrokerProcess) -> None:
    t1, t2 = f"mtx-a-{uuid.uuid4().hex[:6]}", f"mtx-b-{uuid.uuid4().hex[:6]}"
    partitions = [TopicPartition(t1, p) for p in range(3)] + [TopicPartition(t2, p) for p in range(2)]

    def values(tag: str, tp: TopicPartition) -> list[bytes]:
        return [f"{tag}-{tp.topic[:5]}-{tp.partition}-{i}".encode() for i in range(3)]

    async def go() -> tuple[dict[TopicPartition, list[bytes]], dict[TopicPartition, list[bytes]]]:
        await _create(broker.bootstrap, {t1: 3, t2: 2})
        async with Producer(bootstrap_servers=broker.bootstrap, transactional_id=f"mtx-{uuid.uuid4().hex[:8]}",
                            linger_ms=5) as producer:
            await producer.init_transactions()
            for tag, commit in (("c1", True), ("ab", False), ("c2", True)):
                producer.begin_transaction()
                futures = [await producer.send(tp.topic, v, partition=tp.partition)
                           for tp in partitions for v in values(tag, tp)]
                if commit:
                    await producer.commit_transaction()
                    assert all(f.done() and f.result().offset >= 0 for f in futures)
                else:
                    await producer.flush()  # the records reach the logs before the abort
                    await producer.abort_transaction()
        committed = await _read_to_end(broker.bootstrap, partitions, "read_committed")
        uncommitted = await _read_to_end(broker.bootstrap, partitions, "read_uncommitted")
        return committed, uncommitted

    committed, uncommitted = _run(go())
    for tp in partitions:
        assert committed[tp] == values("c1", tp) + values("c2", tp), tp
        assert uncommitted[tp] == values("c1", tp) + values("ab", tp) + values("c2", tp), tp
    theirs = read_all(broker.bootstrap, list(partitions), "read_committed", 30)
    assert theirs == sorted((tp.topic, tp.partition, v) for tp in partitions for v in committed[tp])


def test_consume_transform_produce_commits_offsets_with_the_output(broker: BrokerProcess) -> None:
    source, sink, group = (f"mctp-in-{uuid.uuid4().hex[:6]}", f"mctp-out-{uuid.uuid4().hex[:6]}",
                           f"mctp-{uuid.uuid4().hex[:6]}")
    src = TopicPartition(source, 0)

    async def go() -> None:
        await _create(broker.bootstrap, {source: 1, sink: 1})
        async with Producer(bootstrap_servers=broker.bootstrap) as plain:
            await (await plain.send_many(source, [f"in-{i}".encode() for i in range(6)], partition=0))
        async with Consumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False,
                            auto_offset_reset="earliest", isolation_level="read_committed") as consumer, \
                Producer(bootstrap_servers=broker.bootstrap, transactional_id=f"mctp-{uuid.uuid4().hex[:6]}",
                         linger_ms=5) as worker:
            await worker.init_transactions()
            consumer.subscribe([source])

            async def step(n: int, commit: bool) -> None:
                got: list[Any] = []
                deadline = time.monotonic() + TIMEOUT_S
                while len(got) < n:
                    assert time.monotonic() < deadline, f"got {len(got)} of {n} input records"
                    for recs in (await consumer.getmany(timeout_ms=500, max_records=n - len(got))).values():
                        got.extend(recs)
                worker.begin_transaction()
                for r in got:
                    await worker.send(sink, r.value.replace(b"in", b"out" if commit else b"aborted"), partition=0)
                await worker.send_offsets_to_transaction({src: await consumer.position(src)},
                                                         consumer.group_metadata())
                if commit:
                    await worker.commit_transaction()
                else:
                    await worker.abort_transaction()
                    consumer.seek(src, got[0].offset)  # re-process, as a worker would

            await step(3, commit=True)
            await step(3, commit=False)
            await step(3, commit=True)
            deadline = time.monotonic() + TIMEOUT_S  # the markers follow EndTxn's answer
            while await consumer.committed(src) != 6:
                assert time.monotonic() < deadline, await consumer.committed(src)
                await asyncio.sleep(0.1)
        out = await _read_to_end(broker.bootstrap, [TopicPartition(sink, 0)], "read_committed")
        assert out[TopicPartition(sink, 0)] == [f"out-{i}".encode() for i in range(6)]

    _run(go())


def test_read_committed_consumers_wait_for_stable_offsets(broker: BrokerProcess) -> None:
    """KIP-447: offsets of an open transaction are pending; a read_committed consumer's committed() waits for
    them (UNSTABLE_OFFSET_COMMIT once default.api.timeout.ms passes), a read_uncommitted one sees the old value."""
    source, group = f"mstable-{uuid.uuid4().hex[:6]}", f"mstable-{uuid.uuid4().hex[:6]}"
    src = TopicPartition(source, 0)

    async def committed(isolation: str, timeout_ms: int) -> int | None:
        async with Consumer(bootstrap_servers=broker.bootstrap, group_id=group, isolation_level=isolation,
                            default_api_timeout_ms=timeout_ms) as consumer:
            return await consumer.committed(src)

    async def go() -> None:
        await _create(broker.bootstrap, {source: 1})
        async with Producer(bootstrap_servers=broker.bootstrap,
                            transactional_id=f"mstable-{uuid.uuid4().hex[:6]}") as producer:
            await producer.init_transactions()
            producer.begin_transaction()
            await producer.send_offsets_to_transaction({src: 5}, group)
            with pytest.raises(KafkaError) as caught:
                await committed("read_committed", 500)
            assert caught.value.code.name == "UNSTABLE_OFFSET_COMMIT"
            assert await committed("read_uncommitted", 500) is None
            await producer.commit_transaction()
            assert await committed("read_committed", 30000) == 5  # waits for the markers if need be

    _run(go())


def test_a_second_producer_fences_the_first(broker: BrokerProcess) -> None:
    """The blocking facade: the zombie's commit fails fatally, its records stay invisible to read_committed."""
    topic, tid = f"mfence-{uuid.uuid4().hex[:6]}", f"mfence-{uuid.uuid4().hex[:6]}"
    _run(_create(broker.bootstrap, {topic: 1}))
    config = {"bootstrap.servers": broker.bootstrap, "transactional.id": tid, "linger.ms": 0}
    with SyncProducer(config) as zombie, SyncProducer(config) as successor:
        with pytest.raises(TransactionError, match="init_transactions"):
            zombie.send(topic, b"too early", partition=0)
        zombie.init_transactions()
        zombie.begin_transaction()
        zombie.send(topic, b"zombie", partition=0).result(TIMEOUT_S)
        successor.init_transactions()  # bumps the epoch: the zombie's open transaction is aborted
        with pytest.raises(TransactionError) as caught:
            zombie.commit_transaction()
        assert caught.value.fatal and not caught.value.txn_requires_abort, caught.value
        with pytest.raises(TransactionError):
            zombie.begin_transaction()
        successor.begin_transaction()
        successor.send(topic, b"successor", partition=0)
        successor.commit_transaction()
    got = _run(_read_to_end(broker.bootstrap, [TopicPartition(topic, 0)], "read_committed"))
    assert got[TopicPartition(topic, 0)] == [b"successor"]


def test_an_abortable_error_is_aborted_and_the_next_transaction_commits(broker: BrokerProcess) -> None:
    """A record the partition refuses (MESSAGE_TOO_LARGE) makes the transaction abortable; after the abort (which
    bumps the epoch, KIP-360, since the refused batch had taken sequence numbers) the next one commits."""
    topic = f"mabort-{uuid.uuid4().hex[:6]}"
    tp = TopicPartition(topic, 0)

    async def go() -> None:
        async with AdminClient(bootstrap_servers=broker.bootstrap) as admin:
            await admin.create_topics([NewTopic(topic, 1, 1, config={"max.message.bytes": "2000"})])
        async with Producer(bootstrap_servers=broker.bootstrap, transactional_id=f"mabort-{uuid.uuid4().hex[:6]}",
                            linger_ms=0) as producer:
            await producer.init_transactions()
            producer.begin_transaction()
            await (await producer.send(topic, b"ok-before", partition=0))
            too_big = await producer.send(topic, b"x" * 5000, partition=0)
            with pytest.raises(TransactionError) as caught:
                await producer.commit_transaction()
            assert caught.value.txn_requires_abort and caught.value.code.name == "MESSAGE_TOO_LARGE"
            assert too_big.exception() is not None
            with pytest.raises(TransactionError):
                await producer.send(topic, b"refused", partition=0)  # only abort_transaction() now
            await producer.abort_transaction()
            producer.begin_transaction()
            await producer.send(topic, b"committed", partition=0)
            await producer.commit_transaction()
        got = await _read_to_end(broker.bootstrap, [tp], "read_committed")
        assert got[tp] == [b"committed"]

    _run(go())


def test_tools_show_an_open_transaction(broker: BrokerProcess) -> None:
    """moldau-transactions list / describe / describe-producers and moldau-console-consumer --isolation-level,
    as processes, while a transaction is open after a committed one (the processes run in parallel)."""
    topic, tid = f"mtool-{uuid.uuid4().hex[:6]}", f"mtool-{uuid.uuid4().hex[:6]}"
    _run(_create(broker.bootstrap, {topic: 1}))
    bs = ["--bootstrap-server", broker.bootstrap]
    consume = [*bs, "--topic", topic, "--from-beginning", "--isolation-level"]
    with SyncProducer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid,
                       "transaction.timeout.ms": 45000}) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"committed", partition=0)
        producer.commit_transaction()  # offsets 0 (record) and 1 (marker)
        producer.begin_transaction()
        producer.send(topic, b"open", partition=0).result(TIMEOUT_S)  # offset 2, its transaction open
        runs = {name: subprocess.Popen([str(BIN / tool), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       text=True) for name, tool, args in [
            ("list", "moldau-transactions", [*bs, "list"]),
            ("describe", "moldau-transactions", [*bs, "describe", "--transactional-id", tid]),
            ("producers", "moldau-transactions", [*bs, "describe-producers", "--topic", topic, "--partition", "0"]),
            ("committed", "moldau-console-consumer", [*consume, "read_committed", "--timeout-ms", "4000"]),
            ("uncommitted", "moldau-console-consumer", [*consume, "read_uncommitted", "--max-messages", "2"])]}
        out: dict[str, list[list[str]]] = {}
        for name, proc in runs.items():
            stdout, stderr = proc.communicate(timeout=60)
            assert proc.returncode == 0, (name, stderr)
            out[name] = [line.split() for line in stdout.splitlines()]
        producer.abort_transaction()
    assert [tid, "Ongoing"] in [[row[0], row[3]] for row in out["list"][1:]], out["list"]
    header, row = out["describe"]
    assert header[:5] == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState"]
    assert (row[1], row[4], row[5], row[-1]) == (tid, "Ongoing", "45000", f"{topic}-0"), row
    header, row = out["producers"]
    assert header[0] == "ProducerId" and row[-1] == "2", out["producers"]
    assert out["committed"] == [["committed"]]
    assert out["uncommitted"] == [["committed"], ["open"]]


def test_producer_perf_test_in_transactions(broker: BrokerProcess) -> None:
    """moldau-producer-perf-test --transaction-duration-ms (Kafka's flag), in-process: every record committed, in
    several transactions (each COMMIT marker takes an offset)."""
    from moldau.tools import producer_perf_test as perf

    topic = f"mperf-{uuid.uuid4().hex[:6]}"
    tp = TopicPartition(topic, 0)
    args, conf, payload = perf.parse_args([
        "--topic", topic, "--num-records", "3000", "--record-size", "50", "--throughput", "-1",
        "--transaction-duration-ms", "5", "--transactional-id", f"mperf-{uuid.uuid4().hex[:6]}",
        "--producer-props", f"bootstrap.servers={broker.bootstrap}"])

    async def go() -> tuple[int, int, int]:
        await _create(broker.bootstrap, {topic: 1})
        stats = await perf.run(args, conf, payload, io.StringIO(), perf.Stats())
        got = await _read_to_end(broker.bootstrap, [tp], "read_committed")
        async with Consumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed") as consumer:
            end = (await consumer.end_offsets([tp]))[tp]
        return stats.count, len(got[tp]), end

    acked, committed, end = _run(go())
    assert acked == committed == 3000
    assert end >= 3002, end  # at least two transactions: records plus their markers
