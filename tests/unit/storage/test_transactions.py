"""Transactions in a real partition log: transactional batches, markers, the last stable offset, the aborted
transaction index (Kafka's .txnindex layout), producer snapshots with open transactions, recovery, followers,
truncation and retention."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from moldau.protocol.control_records import ABORT, COMMIT, build_marker_batch, decode_marker, read_marker
from moldau.protocol.records import build_batch, iter_headers, iter_records, read_header
from moldau.storage import Log, ManualClock
from moldau.storage.cleaner import LogCleaner
from moldau.storage.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from moldau.storage.txn_index import ENTRY_SIZE, AbortedTxn, read_entries
from tests.unit.storage.conftest import batch, small_config

MakeLog = Callable[..., Log]
P1, P2 = 1001, 1002


def txn_batch(n: int, pid: int, seq: int, epoch: int = 0, *, transactional: bool = True) -> bytes:
    return build_batch([(b"k%d" % i, b"v" * 20, None, 1_000) for i in range(n)], producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq, is_transactional=transactional)


def write(log: Log, n: int, pid: int, seq: int, epoch: int = 0) -> tuple[int, int]:
    info = log.append_as_leader(txn_batch(n, pid, seq, epoch), 0)
    return info.first_offset, info.last_offset


def txnindex_files(log_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(log_dir.glob("*.txnindex"))}


def test_control_record_format_is_kafkas() -> None:
    data = build_marker_batch(7, 3, False, 11, 5_000, base_offset=40)
    h = read_header(data)
    assert h.is_control and h.is_transactional and h.records_count == 1 and h.base_sequence == -1
    assert (h.producer_id, h.producer_epoch, h.base_offset) == (7, 3, 40)
    (record,) = list(iter_records(data, h))
    assert record.key == struct.pack(">hh", 0, ABORT) and record.value == struct.pack(">hi", 0, 11)
    marker = read_marker(data, h)
    assert marker is not None and not marker.committed and marker.coordinator_epoch == 11
    assert decode_marker(struct.pack(">hh", 0, COMMIT), struct.pack(">hi", 0, 2)).committed


def test_lso_stops_at_the_open_transaction_and_moves_on_commit(make_log: MakeLog) -> None:
    log = make_log()
    log.append_as_leader(batch(2), 0)  # plain data: offsets 0-1
    first, _ = write(log, 3, P1, 0)  # offsets 2-4, open
    log.append_as_leader(batch(1), 0)  # 5
    log.high_watermark = log.log_end_offset
    assert first == 2 and log.last_stable_offset == 2 and log.last_stable_offset_lag() == 4
    assert log.producer_state.ongoing == {P1: 2}
    info = log.append_marker(P1, 0, True, coordinator_epoch=0, leader_epoch=0)
    assert info.first_offset == 6
    assert log.last_stable_offset == 2  # the marker is not yet below the high watermark
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 7 and log.producer_state.ongoing == {} and log.last_stable_offset_lag() == 0
    assert txnindex_files(log.dir) == {}  # a commit writes no index entry
    assert log.collect_aborted_txns(0, 7) == []


def test_abort_writes_the_txnindex_in_kafkas_layout(make_log: MakeLog) -> None:
    log = make_log()
    write(log, 2, P1, 0)  # 0-1 (P1)
    write(log, 2, P2, 0)  # 2-3 (P2)
    log.append_marker(P1, 0, False, coordinator_epoch=5, leader_epoch=0)  # abort P1 at 4: LSO then = P2's 2
    write(log, 1, P2, 2)  # 5
    log.append_marker(P2, 0, False, coordinator_epoch=5, leader_epoch=0)  # abort P2 at 6
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 7
    raw = b"".join(txnindex_files(log.dir).values())
    assert len(raw) == 2 * ENTRY_SIZE == 68
    assert raw[:ENTRY_SIZE] == struct.pack(">hqqqq", 0, P1, 0, 4, 2)
    assert raw[ENTRY_SIZE:] == struct.pack(">hqqqq", 0, P2, 2, 6, 7)
    assert log.collect_aborted_txns(0, 7) == [AbortedTxn(P1, 0, 4, 2), AbortedTxn(P2, 2, 6, 7)]
    assert log.collect_aborted_txns(5, 7) == [AbortedTxn(P2, 2, 6, 7)]  # P1's ended before offset 5
    assert log.collect_aborted_txns(0, 1) == [AbortedTxn(P1, 0, 4, 2)]  # P2's starts at the bound


def test_producer_state_checks_on_the_append_path(make_log: MakeLog) -> None:
    log = make_log()
    write(log, 2, P1, 0, epoch=1)
    with pytest.raises(InvalidTxnStateError) as exc:
        log.append_as_leader(txn_batch(1, P1, 2, 1, transactional=False), 0)
    assert exc.value.error_code.name == "INVALID_TXN_STATE"
    with pytest.raises(InvalidProducerEpochError):
        log.append_marker(P1, 0, True, coordinator_epoch=0, leader_epoch=0)  # an older producer epoch
    log.append_marker(P1, 1, True, coordinator_epoch=3, leader_epoch=0)
    with pytest.raises(TransactionCoordinatorFencedError) as fenced:
        log.append_marker(P1, 1, True, coordinator_epoch=2, leader_epoch=0)
    assert fenced.value.error_code.name == "TRANSACTION_COORDINATOR_FENCED"
    # After the commit the producer may write non-transactionally again, or start a new transaction.
    log.append_as_leader(txn_batch(1, P1, 2, 1, transactional=False), 0)
    assert write(log, 1, P1, 3, epoch=1)[0] == log.log_end_offset - 1
    with pytest.raises(InvalidRecordError):  # transactional without a producer id
        log.append_as_leader(build_batch([(b"k", b"v", None, 1)], is_transactional=True), 0)
    with pytest.raises(InvalidRecordError):  # clients never write control batches
        log.append_as_leader(build_marker_batch(P1, 1, True, 3, 1), 0)


def test_marker_for_an_unknown_producer_is_written_without_an_entry(make_log: MakeLog) -> None:
    log = make_log()
    log.append_marker(P2, 0, False, coordinator_epoch=0, leader_epoch=0)
    log.high_watermark = log.log_end_offset
    assert log.log_end_offset == 1 and log.last_stable_offset == 1 and txnindex_files(log.dir) == {}


@pytest.mark.parametrize("clean", [True, False])
def test_open_transaction_and_txnindex_survive_a_restart(make_log: MakeLog, log_dir: Path, clean: bool) -> None:
    log = make_log(small_config(segment_bytes=300))
    write(log, 2, P1, 0)
    log.append_marker(P1, 0, False, coordinator_epoch=1, leader_epoch=0)
    write(log, 2, P2, 0)  # open across the restart
    for _ in range(4):  # roll a few segments: snapshots hold P2's open transaction
        log.append_as_leader(batch(3, value_size=40), 0)
    assert len(log.segments) > 2
    before = txnindex_files(log_dir)
    p2_first = log.producer_state.ongoing[P2]
    log.close(take_snapshot=clean, flush=clean)
    if not clean:  # a crash: the index of the last segment with an abort is lost, and the snapshots too
        for p in log_dir.glob("*.txnindex"):
            p.unlink()
        for p in log_dir.glob("*.snapshot"):
            p.unlink()
    reopened = make_log(small_config(segment_bytes=300), recovery_point=0 if not clean else log.log_end_offset,
                        clean_shutdown=clean)
    assert reopened.producer_state.ongoing == {P2: p2_first}
    reopened.high_watermark = reopened.log_end_offset
    assert reopened.last_stable_offset == p2_first
    assert txnindex_files(log_dir) == before
    assert reopened.collect_aborted_txns(0, 100) == [AbortedTxn(P1, 0, 2, 3)]
    reopened.append_marker(P2, 0, True, coordinator_epoch=1, leader_epoch=0)
    reopened.high_watermark = reopened.log_end_offset
    assert reopened.last_stable_offset == reopened.log_end_offset


def test_snapshot_carries_the_current_transaction_first_offset(make_log: MakeLog, log_dir: Path) -> None:
    log = make_log()
    write(log, 2, P1, 0)
    log.append_as_leader(batch(1), 0)
    write(log, 1, P1, 2)
    log.close()
    (snap,) = log_dir.glob("*.snapshot")
    data = snap.read_bytes()
    entry = struct.unpack_from(">qhiqiqiq", data, 10)
    assert entry[0] == P1 and entry[-1] == 0  # producer id ... current txn first offset


def test_follower_gets_the_same_state_from_replicated_batches(make_log: MakeLog, tmp_path: Path) -> None:
    leader = make_log()
    write(leader, 2, P1, 0)
    write(leader, 1, P2, 0)
    leader.append_marker(P1, 0, False, coordinator_epoch=4, leader_epoch=0)
    write(leader, 1, P2, 1)
    data = leader.read(0, 1 << 20).read()
    follower = Log(tmp_path / "f-0", small_config())
    try:
        follower.append_as_follower(data)
        assert follower.producer_state.ongoing == {P2: 2}
        assert follower.producer_state.producers[P1].coordinator_epoch == 4
        assert follower.collect_aborted_txns(0, 10) == leader.collect_aborted_txns(0, 10) == [
            AbortedTxn(P1, 0, 3, 2)]
        assert read_entries(follower.dir / "00000000000000000000.txnindex") == [AbortedTxn(P1, 0, 3, 2)]
    finally:
        follower.close()


def test_truncation_and_retention_keep_the_txnindex_right(make_log: MakeLog, log_dir: Path) -> None:
    log = make_log(small_config(segment_bytes=250))
    write(log, 2, P1, 0)  # 0-1
    log.append_marker(P1, 0, False, coordinator_epoch=0, leader_epoch=0)  # 2: abort in segment 0
    for _ in range(3):
        log.append_as_leader(batch(2, value_size=40), 0)
    write(log, 1, P2, 0)
    aborted_at = log.append_marker(P2, 0, False, coordinator_epoch=0, leader_epoch=0).first_offset
    seg_of_p2 = [s for s in log.segments if s.base_offset <= aborted_at][-1].base_offset
    assert f"{seg_of_p2:020d}.txnindex" in txnindex_files(log_dir)
    assert len(log.collect_aborted_txns(0, aborted_at + 1)) == 2
    # Follower truncation below the second abort removes its entry (and P2's transaction is open again).
    log.truncate_to(aborted_at)
    assert log.collect_aborted_txns(0, aborted_at + 1) == [AbortedTxn(P1, 0, 2, 3)]
    assert P2 in log.producer_state.ongoing
    # Retention of the first segment deletes its .txnindex with it.
    log.high_watermark = log.log_end_offset
    log.maybe_increment_log_start_offset(log.segments[1].base_offset)
    log.delete_expired_segments(0)
    assert "00000000000000000000.txnindex" not in txnindex_files(log_dir)


def test_read_uncommitted_sees_control_batches_as_batches(make_log: MakeLog) -> None:
    log = make_log()
    write(log, 1, P1, 0)
    log.append_marker(P1, 0, True, coordinator_epoch=0, leader_epoch=0)
    headers = [h for _, h in iter_headers(log.read(0, 1 << 20).read())]
    assert [h.is_control for h in headers] == [False, True]


@pytest.mark.parametrize("crash", [False, True])
def test_cleaner_keeps_markers_and_the_txnindex(make_log: MakeLog, log_dir: Path, crash: bool) -> None:
    config = small_config(cleanup_policy="compact")
    log = make_log(config)
    now = log.clock.time_ms()
    for i in range(3):
        log.append_as_leader(build_batch([(b"a", b"%d" % i, None, now)]), 0)
    log.append_as_leader(build_batch([(b"b", b"x", None, now)], producer_id=P1, producer_epoch=0,
                                     base_sequence=0, is_transactional=True), 0)
    log.append_marker(P1, 0, False, coordinator_epoch=0, leader_epoch=0)  # offset 4
    log.append_as_leader(build_batch([(b"a", b"last", None, now)]), 0)
    log.roll()
    log.high_watermark = log.log_end_offset
    cleaner = LogCleaner(1 << 20)
    prepared = cleaner.prepare(log, now)
    assert prepared is not None
    if crash:  # kill -9 right after the swap commit point: the load completes the swap
        for _, new in prepared.swaps:
            new.close()
        log.close(take_snapshot=False)
        log = make_log(config)
    else:
        cleaner.finish(prepared)
    data = log.read(0, 1 << 20).read()
    assert [h.is_control for _, h in iter_headers(data)].count(True) == 1
    assert log.collect_aborted_txns(0, log.log_end_offset) == [AbortedTxn(P1, 3, 4, 5)]
    assert not list(log_dir.glob("*.swap")) and not list(log_dir.glob("*.cleaned"))


def test_lso_never_falls_below_the_log_start_offset(make_log: MakeLog) -> None:
    log = make_log()
    write(log, 2, P1, 0)  # open at 0
    log.append_as_leader(batch(3), 0)
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 0
    log.maybe_increment_log_start_offset(3)  # DeleteRecords past the open transaction's first offset
    assert log.last_stable_offset == 3 and log.last_stable_offset_lag() == 2


def test_cleaner_stops_at_an_open_transaction(make_log: MakeLog) -> None:
    """A newer version of a key inside an open transaction may still be aborted: the older one must stay."""
    log = make_log(small_config(cleanup_policy="compact", segment_bytes=200))
    now = log.clock.time_ms()
    log.append_as_leader(build_batch([(b"a", b"committed", None, now)]), 0)
    log.append_as_leader(build_batch([(b"a", b"open", None, now)], producer_id=P1, producer_epoch=0,
                                     base_sequence=0, is_transactional=True), 0)
    for i in range(6):
        log.append_as_leader(build_batch([(b"b", b"%d" % i * 30, None, now)]), 0)
    log.roll()
    log.high_watermark = log.log_end_offset
    LogCleaner(1 << 20).clean(log, now)
    data = log.read(0, 1 << 20).read()
    values = [r.value for pos, h in iter_headers(data) for r in iter_records(data[pos:], h)]
    assert b"committed" in values and b"open" in values


def test_cleaner_removes_aborted_data_and_keeps_the_committed_version(make_log: MakeLog) -> None:
    log = make_log(small_config(cleanup_policy="compact"))
    now = log.clock.time_ms()
    log.append_as_leader(build_batch([(b"a", b"committed", None, now)]), 0)
    log.append_as_leader(build_batch([(b"a", b"aborted", None, now)], producer_id=P1, producer_epoch=0,
                                     base_sequence=0, is_transactional=True), 0)
    log.append_as_leader(build_batch([(b"c", b"other", None, now)]), 0)
    log.append_marker(P1, 0, False, coordinator_epoch=0, leader_epoch=0)
    log.append_as_leader(build_batch([(b"a", b"aborted2", None, now), (b"b", b"gone", None, now)],
                                     producer_id=P2, producer_epoch=0, base_sequence=0, is_transactional=True), 0)
    log.append_as_leader(build_batch([(b"d", b"x", None, now)]), 0)
    log.append_marker(P2, 0, False, coordinator_epoch=0, leader_epoch=0)
    log.roll()
    log.high_watermark = log.log_end_offset
    LogCleaner(1 << 20).clean(log, now)
    data = log.read(0, 1 << 20).read()
    headers = [h for _, h in iter_headers(data)]
    values = [r.value for pos, h in iter_headers(data) for r in iter_records(data[pos:], h)]
    assert b"committed" in values and b"other" in values and b"x" in values
    assert b"aborted" not in values and b"aborted2" not in values and b"gone" not in values
    assert sum(h.is_control for h in headers) == 2  # markers stay
    # P2's aborted batch was its last data batch: kept empty, so its sequence state survives a reload.
    assert [(h.producer_id, h.records_count) for h in headers if h.producer_id == P2 and not h.is_control] == [
        (P2, 0)]


def test_a_marker_with_a_bumped_epoch_fences_the_old_epoch(make_log: MakeLog) -> None:
    """A coordinator aborting a fenced producer's transaction writes the marker with a bumped epoch: the old
    epoch is refused afterwards and the new one starts at sequence 0 (Kafka's checkSequence)."""
    log = make_log()
    write(log, 2, P1, 0, epoch=4)
    log.append_marker(P1, 5, False, coordinator_epoch=0, leader_epoch=0)
    with pytest.raises(InvalidProducerEpochError):
        write(log, 1, P1, 2, epoch=4)
    with pytest.raises(OutOfOrderSequenceError):
        write(log, 1, P1, 3, epoch=5)
    assert write(log, 1, P1, 0, epoch=5)[0] == log.log_end_offset - 1


def test_cleaner_removes_markers_once_their_data_is_gone(make_log: MakeLog, clock: ManualClock) -> None:
    """Kafka's rule: a marker stays while a cleaning still reads a batch of its transaction, then goes once its
    segment is clean and older than delete.retention.ms; an ABORT marker takes its .txnindex entry along."""
    log = make_log(small_config(cleanup_policy="compact", delete_retention_ms=1000))

    def txn(pid: int, seq: int, key: bytes, committed: bool) -> None:
        log.append_as_leader(build_batch([(key, b"t", None, clock.now)], producer_id=pid, producer_epoch=0,
                                         base_sequence=seq, is_transactional=True), 0)
        log.append_marker(pid, 0, committed, coordinator_epoch=0, leader_epoch=0)

    def markers() -> list[int]:
        return [h.base_offset for _, h in iter_headers(log.read(0, 1 << 20).read()) if h.is_control]

    def clean_with_new_data(key: bytes) -> None:
        log.append_as_leader(build_batch([(key, b"v", None, clock.now)]), 0)
        log.roll()
        log.high_watermark = log.log_end_offset
        LogCleaner(1 << 20).clean(log, clock.now)

    txn(P1, 0, b"aborted", False)  # 0, marker 1
    txn(P1, 1, b"a", True)  # 2, marker 3: its record is superseded below
    txn(P1, 2, b"k", True)  # 4, marker 5: stays (and P1's last batch would be kept even if emptied)
    log.append_as_leader(build_batch([(b"a", b"new", None, clock.now)]), 0)  # 6
    clean_with_new_data(b"x")
    assert markers() == [1, 3, 5]  # the aborted batch and batch 2 went now; their markers stay this time
    assert log.collect_aborted_txns(0, 100) == [AbortedTxn(P1, 0, 1, 2)]
    clock.advance(2000)
    clean_with_new_data(b"y")
    assert markers() == [5]  # the next cleaning of the now old segment finds no data of the first two
    assert log.collect_aborted_txns(0, 100) == []
    log.close()
    reopened = make_log(small_config(cleanup_policy="compact"))
    assert reopened.producer_state.ongoing == {}


def test_a_fetch_lists_only_the_aborted_transactions_of_its_batches(make_log: MakeLog) -> None:
    log = make_log(small_config(segment_bytes=600))
    for seq in range(8):  # P1: eight aborted transactions of one batch each, over a few segments
        write(log, 1, P1, seq)
        log.append_marker(P1, 0, False, coordinator_epoch=0, leader_epoch=0)
    log.high_watermark = log.log_end_offset
    lso = log.last_stable_offset
    assert lso == 16 and len(log.segments) > 2
    everything = log.read(0, 1 << 20)
    assert [t.first_offset for t in log.aborted_txns_for(0, everything, lso)] == list(range(0, 16, 2))
    one = log.read(4, 1)  # min_one: just the batch at 4
    assert [t.first_offset for t in log.aborted_txns_for(4, one, lso)] == [4]
    end_of_segment = log.read(log.segments[1].base_offset, 1 << 20, max_offset=log.segments[2].base_offset)
    first = log.segments[1].base_offset
    assert [t.first_offset for t in log.aborted_txns_for(first, end_of_segment, lso)] == [
        o for o in range(0, 16, 2) if first <= o < log.segments[2].base_offset or o + 1 == first]
