"""The consumer keeps a fetch answer's batches as they came and decodes them as the application takes records
(Kafka's CompletedFetch): an answer over thousands of partitions is not turned into objects all at once, the
position passes what the answer held after its last record, and a corrupt batch costs no other record.

The broker is a canned Fetch answer (encoded and decoded by the real codec), handed to the real Fetcher and
Consumer through a stand-in for the cluster's connection layer."""

from __future__ import annotations

from typing import Any

import pytest

from moldau.aio import Consumer, TopicPartition
from moldau.protocol.control_records import build_marker_batch
from moldau.protocol.messages.fetch import FETCH
from moldau.protocol.records import RecordBatchError, build_batch

VERSION = 12


class _Conn:
    def version_for(self, api: Any, max_version: int | None = None) -> int:
        return VERSION


class _Cluster:
    """Answers every Fetch with the record sets of ``answers`` ((topic, partition) -> bytes), leader 1 for all."""

    metadata_version = 0

    def __init__(self, answers: dict[tuple[str, int], bytes]) -> None:
        self.answers = answers

    def leader_for(self, topic: str, partition: int) -> int:
        return 1

    def request_update(self) -> None:
        pass

    async def connection(self, node: int) -> _Conn:
        return _Conn()

    async def send(self, node: int, api: Any, body: Any, version: int) -> Any:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for t in body["topics"]:
            for p in t["partitions"]:
                data = self.answers.get((t["topic"], p["partition"]), b"")
                by_topic.setdefault(t["topic"], []).append({
                    "partition_index": p["partition"], "error_code": 0, "high_watermark": 1000,
                    "last_stable_offset": 1000, "log_start_offset": 0, "aborted_transactions": None,
                    "preferred_read_replica": -1, "records": data})
        raw = FETCH.encode_response(VERSION, {"throttle_time_ms": 0, "error_code": 0, "session_id": 0,
                                              "responses": [{"topic": t, "partitions": ps}
                                                            for t, ps in by_topic.items()]})
        return FETCH.response_decoder(VERSION)(memoryview(raw), 0)[0]


def _records(start: int, n: int) -> list[tuple[bytes | None, bytes | None, list[Any], int]]:
    return [(None, b"v%d" % i, [], 1_000 + i) for i in range(start, start + n)]


async def _consumer(answers: dict[tuple[str, int], bytes], **config: Any) -> Consumer:
    consumer = Consumer(bootstrap_servers="127.0.0.1:9", group_id=None, **config)
    consumer._fetcher.cluster = _Cluster(answers)  # type: ignore[assignment]
    tps = sorted({TopicPartition(*tp) for tp in answers})
    consumer.assign(tps)
    for tp in tps:
        consumer.seek(tp, 0)
    fetched, out_of_range = await consumer._fetcher.fetch(dict(consumer._states))
    consumer._absorb(fetched, out_of_range)
    return consumer


async def test_a_fetch_answer_is_decoded_only_as_its_records_are_handed_out() -> None:
    decoded: list[bytes] = []

    def count(value: bytes) -> bytes:
        decoded.append(value)
        return value

    # 50 partitions, two batches of 10 records each: the answer a broker gives a consumer of many partitions.
    answers = {("t", p): build_batch(_records(0, 10), base_offset=0) + build_batch(_records(10, 10), base_offset=10)
               for p in range(50)}
    consumer = await _consumer(answers, value_deserializer=count)
    assert decoded == []  # nothing decoded when the answer arrives (it was all 1,000 records)
    first = consumer._drain(15)
    [(tp0, records)] = first.items()
    assert [r.offset for r in records] == list(range(15))
    assert len(decoded) == 20  # the two batches it needed
    rest = consumer._drain(10_000)
    assert len(decoded) == 1_000  # each record decoded once
    assert [r.offset for r in rest.pop(tp0)] == list(range(15, 20))
    assert len(rest) == 49 and all([r.offset for r in rs] == list(range(20)) for rs in rest.values())
    assert all(st.position == 20 and st.fetch_offset == 20 for st in consumer._states.values())
    assert consumer._buffer == {}


async def test_position_passes_a_commit_marker_that_ends_the_answer() -> None:
    """A read_committed consumer's answer ending with the transaction's COMMIT marker: the next fetch starts
    after the marker and, once the records are handed out, so does the position (as Kafka's consumer); it had
    stopped at the last record, so the next fetch read the marker again and a commit of the position pointed at
    it."""
    data = build_batch(_records(0, 5), base_offset=0, producer_id=7, producer_epoch=0, base_sequence=0,
                       is_transactional=True) + build_marker_batch(7, 0, True, 0, 1_000, base_offset=5)
    consumer = await _consumer({("t", 0): data}, isolation_level="read_committed")
    st = consumer._states[TopicPartition("t", 0)]
    assert st.fetch_offset == 6
    assert [r.offset for r in consumer._drain(3)[TopicPartition("t", 0)]] == [0, 1, 2]
    assert st.position == 3
    assert [r.offset for r in consumer._drain(100)[TopicPartition("t", 0)]] == [3, 4]
    assert st.position == 6


async def test_a_corrupt_batch_costs_no_other_record() -> None:
    """A batch failing its CRC in one partition of the answer: the other partitions' records and the records
    before it are handed out, then every poll that reaches it raises. Raising while the answer was decoded lost
    the records of the whole answer, whose fetch offsets had already moved on."""
    bad = bytearray(build_batch(_records(5, 5), base_offset=5))
    bad[-2] ^= 0x01  # a value byte: covered by the CRC
    answers = {("a", 0): build_batch(_records(0, 10), base_offset=0),
               ("b", 0): build_batch(_records(0, 5), base_offset=0) + bytes(bad)}
    consumer = await _consumer(answers)
    got = consumer._drain(100)
    assert [r.offset for r in got[TopicPartition("a", 0)]] == list(range(10))
    assert [r.offset for r in got[TopicPartition("b", 0)]] == list(range(5))
    for _ in range(2):
        with pytest.raises(RecordBatchError, match="CRC"):
            consumer._drain(100)
    assert consumer._states[TopicPartition("b", 0)].position == 5


async def test_records_put_back_by_getmany_of_other_partitions_still_pass_the_marker() -> None:
    """``getmany(tp)`` puts the other partitions' records back: handed out later, their position still ends
    after the COMMIT marker that followed them."""
    data = build_batch(_records(0, 5), base_offset=0, producer_id=7, producer_epoch=0, base_sequence=0,
                       is_transactional=True) + build_marker_batch(7, 0, True, 0, 1_000, base_offset=5)
    consumer = await _consumer({("a", 0): data, ("b", 0): build_batch(_records(0, 3), base_offset=0)},
                               isolation_level="read_committed")
    consumer._started = True
    a, b = TopicPartition("a", 0), TopicPartition("b", 0)
    try:
        got = await consumer.getmany(b, timeout_ms=0)
        assert list(got) == [b] and consumer._states[a].position == 0
        got = await consumer.getmany(a, timeout_ms=0)
        assert [r.offset for r in got[a]] == [0, 1, 2, 3, 4]
        assert consumer._states[a].position == 6
    finally:
        await consumer.close(autocommit=False)


async def test_the_next_fetch_is_sent_before_the_records_handed_out_are_decoded() -> None:
    """getmany sends the next Fetch (for partitions with less than a poll's worth buffered) before it decodes the
    records it returns, so the brokers read the next answer while the consumer decodes this one; it was sent
    after the decoding, which then never overlapped a fetch."""
    events: list[str] = []

    def value(v: bytes) -> bytes:
        events.append("decode")
        return v

    consumer = await _consumer({("t", 0): build_batch(_records(0, 10), base_offset=0)}, value_deserializer=value)
    cluster = consumer._fetcher.cluster
    send = cluster.send

    async def logged_send(*args: Any) -> Any:
        events.append("send")
        return await send(*args)

    cluster.send = logged_send  # type: ignore[method-assign]
    consumer._started = True
    try:
        got = await consumer.getmany(timeout_ms=0)
        assert [r.offset for r in got[TopicPartition("t", 0)]] == list(range(10))
        assert events[0] == "send" and events.count("decode") == 10
    finally:
        await consumer.close(autocommit=False)
