"""Decoding fetched record sets into ConsumerRecords (the consumer's hot path), against build_batch's encoder."""

from __future__ import annotations

from typing import Any

import pytest

from moldau.fetcher import ConsumerRecord, PartitionRecords, decode_partition
from moldau.protocol.control_records import build_marker_batch
from moldau.protocol.records import RecordBatchError, build_batch


def records(start: int, n: int, value_size: int = 10) -> list[tuple[bytes | None, bytes | None, list, int]]:
    out: list[tuple[bytes | None, bytes | None, list, int]] = []
    for i in range(start, start + n):
        headers = [("h", b"%d" % i), ("null", None)] if i % 2 else []
        out.append((b"k%d" % i if i % 5 else None, b"v" * (i % 3 * value_size) if i % 7 else None, headers,
                    1_000 + i * 300))
    return out


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_round_trip_every_codec(codec: int) -> None:
    recs = records(0, 50, value_size=90)  # two-byte varints for lengths and timestamp deltas
    data = build_batch(recs, base_offset=100, compression=codec)
    got = decode_partition("t", 3, data, 100, check_crcs=True)
    assert got == [ConsumerRecord("t", 3, 100 + i, ts, 0, k, v, h) for i, (k, v, h, ts) in enumerate(recs)]


def test_starts_at_fetch_offset_inside_a_batch_and_skips_older_batches() -> None:
    data = build_batch(records(0, 5), base_offset=0) + build_batch(records(5, 5), base_offset=5)
    assert [r.offset for r in decode_partition("t", 0, data, 7, check_crcs=True)] == [7, 8, 9]


def test_partial_trailing_batch_and_control_batches_are_skipped() -> None:
    control = build_batch([(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00", None, 1)], base_offset=2,
                          is_control=True, is_transactional=True, producer_id=1, producer_epoch=0)
    full = build_batch(records(0, 2), base_offset=0) + control + build_batch(records(3, 2), base_offset=3)
    partial = build_batch(records(5, 2), base_offset=5)[:30]
    assert [r.offset for r in decode_partition("t", 0, full + partial, 0, check_crcs=True)] == [0, 1, 3, 4]


def test_log_append_time_and_deserializers() -> None:
    data = build_batch([(b"1", b"a", None, 5)], base_offset=0, timestamp_type=1)
    [r] = decode_partition("t", 0, data, 0, check_crcs=True, key_deserializer=lambda b: int(b),
                           value_deserializer=lambda b: b.decode().upper())
    assert (r.key, r.value, r.timestamp_type) == (1, "A", 1)


def test_check_crcs() -> None:
    data = bytearray(build_batch([(b"k", b"value", [], 1)], base_offset=0))
    data[-2] ^= 0x01  # last value byte (the final byte is the header count): covered by the CRC
    with pytest.raises(RecordBatchError, match="CRC"):
        decode_partition("t", 0, bytes(data), 0, check_crcs=True)
    # check.crcs=false trusts the bytes: the damaged value comes through.
    assert decode_partition("t", 0, bytes(data), 0, check_crcs=False)[0].value == b"valud"


def test_corrupt_record_is_a_clear_error() -> None:
    data = bytearray(build_batch(records(0, 3), base_offset=0))
    data[61] = 0x7E  # first record's length varint now claims more bytes than the batch holds
    with pytest.raises(RecordBatchError):
        decode_partition("t", 0, bytes(data), 0, check_crcs=False)


def _txn(values: list[bytes], base_offset: int, producer_id: int) -> bytes:
    return build_batch([(None, v, None, 1) for v in values], base_offset=base_offset, producer_id=producer_id,
                       producer_epoch=0, base_sequence=0, is_transactional=True)


def test_read_committed_skips_aborted_batches_per_producer_until_their_abort_marker() -> None:
    # offsets: 0-1 p7 (aborted), 2-3 p8 (committed), 4 p7 ABORT, 5 p8 COMMIT, 6-7 p7 again (a new transaction,
    # committed later: not in the aborted list), 8 p9 plain non-transactional.
    data = (_txn([b"a0", b"a1"], 0, 7) + _txn([b"c2", b"c3"], 2, 8)
            + build_marker_batch(7, 0, committed=False, coordinator_epoch=0, timestamp_ms=1, base_offset=4)
            + build_marker_batch(8, 0, committed=True, coordinator_epoch=0, timestamp_ms=1, base_offset=5)
            + _txn([b"n6", b"n7"], 6, 7) + build_batch([(None, b"p8", None, 1)], base_offset=8))
    aborted = [{"producer_id": 7, "first_offset": 0}]
    committed = decode_partition("t", 0, data, 0, check_crcs=True, aborted_transactions=aborted)
    assert [(r.offset, r.value) for r in committed] == [(2, b"c2"), (3, b"c3"), (6, b"n6"), (7, b"n7"),
                                                        (8, b"p8")]
    # read_uncommitted (no list): every data record, never the markers
    assert [r.offset for r in decode_partition("t", 0, data, 0, check_crcs=True)] == [0, 1, 2, 3, 6, 7, 8]
    # starting inside the aborted transaction's span still skips it
    assert [r.offset for r in decode_partition("t", 0, data, 1, check_crcs=True,
                                               aborted_transactions=aborted)] == [2, 3, 6, 7, 8]


def test_an_aborted_transaction_starting_after_the_fetch_offset_is_skipped_from_its_first_offset() -> None:
    data = _txn([b"c0"], 0, 5) + _txn([b"x1", b"x2"], 1, 6) + _txn([b"c3"], 3, 5)
    got = decode_partition("t", 0, data, 0, check_crcs=True, aborted_transactions=[
        {"producer_id": 6, "first_offset": 1}])
    assert [r.value for r in got] == [b"c0", b"c3"]


def test_a_fetch_of_control_batches_only_does_not_skip_records_still_buffered() -> None:
    """A consumer polling fewer records than it had buffered, whose next fetch held only a commit marker, moved its
    position past the marker and so past the buffered records, which it then dropped (a read_committed
    consume-transform-produce worker of moldau-verify --workload txn never processed them)."""
    from moldau.aio import Consumer, TopicPartition
    from moldau.fetcher import Fetcher

    consumer = Consumer(bootstrap_servers="127.0.0.1:9", group_id=None)
    tp = TopicPartition("in", 0)
    consumer.assign([tp])
    st = consumer._states[tp]
    fetched = decode_partition("in", 0, build_batch(records(0, 10), base_offset=0), 0, check_crcs=True)
    st.seek(0)
    consumer._buffer[tp] = PartitionRecords("in", 0, records=fetched)
    st.fetch_offset = 10
    assert [r.offset for r in consumer._drain(4)[tp]] == [0, 1, 2, 3]  # 4..9 still buffered
    marker = build_marker_batch(7, 0, True, 0, 1_000, base_offset=10)
    Fetcher._skip_empty(st, marker, 10)  # the next fetch: only the COMMIT marker at offset 10
    assert st.fetch_offset == 11 and st.position == 4
    assert [r.offset for r in consumer._drain(100)[tp]] == [4, 5, 6, 7, 8, 9]
    assert st.position == 11  # past the marker once the buffer is empty
    Fetcher._skip_empty(st, build_marker_batch(7, 0, True, 0, 1_000, base_offset=11), 11)
    assert (st.fetch_offset, st.position) == (12, 12)  # nothing buffered: straight past it
    # A fetch that advanced the fetch offset (records on their way to the buffer, not yet there) moves nothing:
    # only the skipped ranges do.
    st.fetch_offset = 20
    consumer._buffer[tp] = PartitionRecords("in", 0, records=decode_partition(
        "in", 0, build_batch(records(12, 2), base_offset=12), 12, check_crcs=True))
    assert [r.offset for r in consumer._drain(100)[tp]] == [12, 13] and st.position == 14


def _metadata(leaders: dict[int, int]) -> dict[str, Any]:
    """A Metadata answer: brokers 1-3, topic ``t`` with the partitions and leaders of ``leaders``."""
    return {"brokers": [{"node_id": n, "host": "127.0.0.1", "port": 9000 + n, "rack": None} for n in (1, 2, 3)],
            "cluster_id": "c", "controller_id": 1,
            "topics": [{"name": "t", "error_code": 0, "is_internal": False,
                        "partitions": [{"partition_index": p, "leader_id": leader, "leader_epoch": 0,
                                        "replica_nodes": [1, 2, 3], "isr_nodes": [1, 2, 3],
                                        "offline_replicas": [], "error_code": 0}
                                       for p, leader in leaders.items()]}]}


def test_fetch_rounds_group_partitions_by_the_leader_of_the_current_metadata() -> None:
    """The fetcher remembers each partition's leader between rounds (a round over 10,000 partitions asked the
    metadata for every one), and forgets it when new metadata arrives: a moved leader is fetched from at once."""
    from moldau.cluster import Cluster
    from moldau.config import consumer_config
    from moldau.fetcher import Fetcher, PartitionState, TopicPartition

    config = consumer_config(bootstrap_servers="127.0.0.1:9")
    cluster = Cluster(config)
    cluster._apply_metadata(_metadata({0: 1, 1: 2, 2: 3, 3: -1}), full=True)  # type: ignore[arg-type]
    fetcher = Fetcher(cluster, config)
    tps = [TopicPartition("t", p) for p in range(5)]
    states = {tp: PartitionState(position=10 * i, fetch_offset=10 * i, epoch=i) for i, tp in enumerate(tps)}
    states[tps[4]].paused = True
    groups = fetcher._by_leader(states)
    # partition 3 has no leader (a metadata update is asked for), 4 is paused
    assert groups == {1: {tps[0]: (0, 0)}, 2: {tps[1]: (10, 1)}, 3: {tps[2]: (20, 2)}}
    assert cluster._need_update
    states[tps[0]].fetch_offset = 5
    assert fetcher._by_leader(states)[1] == {tps[0]: (5, 0)}  # offsets are read afresh every round
    cluster._apply_metadata(_metadata({0: 2, 1: 2, 2: 3, 3: 1}), full=True)  # type: ignore[arg-type]
    assert fetcher._by_leader(states) == {2: {tps[0]: (5, 0), tps[1]: (10, 1)}, 3: {tps[2]: (20, 2)},
                                          1: {tps[3]: (30, 3)}}
