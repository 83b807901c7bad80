"""Moldau's own producer against a real broker; records read back by confluent-kafka."""

from __future__ import annotations

import asyncio

import pytest

from moldau.aio import Producer
from moldau.errors import ConfigError

from .clients import CODECS, ck_consume, make_records, norm_headers
from .harness import BrokerProcess

pytestmark = pytest.mark.integration


def _run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 60))


@pytest.mark.parametrize("codec", CODECS)
def test_produce_every_codec_read_back_by_confluent(broker: BrokerProcess, topic: str, codec: str) -> None:
    records = make_records(40, codec)
    timestamps = [1_700_000_000_000 + i for i in range(len(records))]

    async def produce() -> list:  # type: ignore[type-arg]
        async with Producer(bootstrap_servers=broker.bootstrap, compression_type=codec, linger_ms=20) as p:
            futs = [await p.send(topic, r.value, r.key, partition=0, headers=r.headers, timestamp_ms=ts)
                    for r, ts in zip(records, timestamps)]
            return [await f for f in futs]

    metas = _run(produce())
    assert [m.offset for m in metas] == list(range(len(records)))
    assert all(m.topic == topic and m.partition == 0 for m in metas)
    assert [m.timestamp for m in metas] == timestamps
    got = ck_consume(broker.bootstrap, topic, len(records))
    assert [(m.key(), m.value(), norm_headers(m.headers()), m.timestamp()[1]) for m in got] == \
        [(r.key, r.value, r.headers, ts) for r, ts in zip(records, timestamps)]


def test_idempotent_producer_gets_producer_id_and_sequences(broker: BrokerProcess, topic: str) -> None:
    async def produce() -> tuple[bool, int, int]:
        async with Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "batch.size": 200}) as p:
            futs = [await p.send(topic, f"v{i}".encode(), partition=0) for i in range(300)]
            done = await p.send_many(topic, [f"w{i}".encode() for i in range(700)], partition=0)
            offsets = [(await f).offset for f in futs]
            assert offsets == list(range(300))
            return p.idempotent, await done, p._producer_id  # noqa: SLF001

    idempotent, count, pid = _run(produce())
    assert idempotent and count == 700 and pid >= 0
    got = ck_consume(broker.bootstrap, topic, 1000)
    values = [m.value() for m in got]
    assert values == [f"v{i}".encode() for i in range(300)] + [f"w{i}".encode() for i in range(700)]


def test_send_many_partitions_queues_every_partition_in_one_call(broker: BrokerProcess, topic: str) -> None:
    """One call for many partitions (asyncio and blocking producer): every partition gets its records in order,
    the future counts them all; an unknown partition is refused before anything is queued."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from moldau import Producer as SyncProducer
    from moldau.errors import KafkaError

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 6, 1)])[topic].result(30)
    first = {p: [f"a{p}-{i}".encode() for i in range(p + 1)] for p in (0, 2, 5)}
    second = {p: [f"b{p}-{i}".encode() for i in range(3)] for p in range(6)}

    async def produce() -> int:
        async with Producer(bootstrap_servers=broker.bootstrap, linger_ms=0) as p:
            with pytest.raises(KafkaError, match="has no partition 6, 9"):
                await p.send_many_partitions(topic, {0: [b"x"], 6: [b"y"], 9: [b"z"]})
            return await (await p.send_many_partitions(topic, first))

    assert _run(produce()) == 1 + 3 + 6
    with SyncProducer(bootstrap_servers=broker.bootstrap) as sp:
        assert sp.send_many_partitions(topic, second).result(60) == 18
    for p in range(6):
        want = first.get(p, []) + second[p]
        assert [m.value() for m in ck_consume(broker.bootstrap, topic, len(want), partition=p)] == want, p


def test_the_sender_passes_over_only_the_partitions_with_records(broker: BrokerProcess, topic: str) -> None:
    """After a write to every one of 40 partitions, the sender drops the queues it emptied: later writes into
    a few partitions are drained without a pass over the other partitions (O(partitions written to so far) per
    drain before), and a partition written to again gets a queue again, its records in order."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 40, 1)])[topic].result(30)

    async def produce() -> tuple[int, list[int]]:
        async with Producer(bootstrap_servers=broker.bootstrap, linger_ms=0) as p:
            count = await (await p.send_many_partitions(topic, {i: [b"first"] for i in range(40)}))
            for _ in range(500):  # the drain after the last answer drops the emptied queues
                if not p._queues:  # noqa: SLF001
                    break
                await asyncio.sleep(0.01)
            assert not p._queues, sorted(p._queues)  # noqa: SLF001
            futs = [await p.send(topic, f"again-{i}".encode(), partition=i % 2) for i in range(6)]
            offsets = [(await f).offset for f in futs]
            assert set(p._queues) <= {(topic, 0), (topic, 1)}  # noqa: SLF001
            return count, offsets

    count, offsets = _run(produce())
    assert count == 40 and offsets == [1, 1, 2, 2, 3, 3]
    assert [m.value() for m in ck_consume(broker.bootstrap, topic, 4, partition=0)] == \
        [b"first", b"again-0", b"again-2", b"again-4"]


def test_keyed_records_follow_murmur2_and_acks_zero(broker: BrokerProcess, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)

    async def produce() -> list:  # type: ignore[type-arg]
        async with Producer(bootstrap_servers=broker.bootstrap, acks=1) as p:
            futs = [await p.send(topic, b"x", key) for key in (b"key1", b"key2", b"key1", b"key2")]
            return [await f for f in futs]

    metas = _run(produce())
    assert [m.partition for m in metas] == [0, 1, 0, 1]  # the seeds' ch 2.4 placement


def test_explicit_idempotence_conflict_names_key(broker: BrokerProcess) -> None:
    with pytest.raises(ConfigError, match="acks"):
        Producer(bootstrap_servers=broker.bootstrap, enable_idempotence=True, acks=1)


def test_key_placement_matches_confluent_murmur2_random(broker: BrokerProcess, topic: str) -> None:
    """10,000 keys: librdkafka's murmur2_random partitioner places each where moldau's partitioner does."""
    from confluent_kafka import Producer as CkProducer
    from confluent_kafka.admin import AdminClient, NewTopic

    from moldau.partitioner import partition_for_key

    partitions = 7
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # kept alive until the topic exists
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    placed: dict[bytes, int] = {}

    def delivered(err: object, msg: object) -> None:
        assert err is None, err
        placed[msg.key()] = msg.partition()  # type: ignore[attr-defined]

    ck = CkProducer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random", "linger.ms": 20})
    keys = [f"user-{i}-{i * 7919 % 1000}".encode() for i in range(10_000)]
    for key in keys:
        ck.produce(topic, b"", key, on_delivery=delivered)
        ck.poll(0)
    assert ck.flush(60) == 0
    assert len(placed) == len(keys)
    wrong = [k for k in keys if placed[k] != partition_for_key(k, partitions)]
    assert wrong == []
    assert len(set(placed.values())) == partitions


@pytest.mark.parametrize("codec", CODECS)
def test_kcat_reads_what_moldau_produced(broker: BrokerProcess, topic: str, codec: str) -> None:
    from .test_kcat import kcat

    async def produce() -> None:
        async with Producer(bootstrap_servers=broker.bootstrap, compression_type=codec) as p:
            for i in range(50):
                await p.send(topic, b"value %d" % i, b"key-%d" % i, partition=0, headers=[("codec", codec)],
                             timestamp_ms=1_700_000_000_000 + i)
            await p.flush()

    _run(produce())
    out = kcat("-b", broker.bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q",
               "-f", "%k|%s|%o|%T|%h\n").stdout.decode().splitlines()
    assert out == [f"key-{i}|value {i}|{i}|{1_700_000_000_000 + i}|codec={codec}" for i in range(50)]
