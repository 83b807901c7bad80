from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from moldau.storage import Log
from moldau.storage.errors import DuplicateSequence, InvalidProducerEpochError, OutOfOrderSequenceError
from tests.unit.storage.conftest import batch, small_config

MakeLog = Callable[..., Log]
PID = 4242


def produce(log: Log, seq: int, n: int = 2, epoch: int = 0, pid: int = PID) -> tuple[int, int]:
    info = log.append_as_leader(batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq), 0)
    return info.first_offset, info.last_offset


def test_duplicate_returns_original_offsets(make_log: MakeLog) -> None:
    log = make_log()
    log.append_as_leader(batch(3), 0)  # non-idempotent data first
    first = produce(log, 0)
    second = produce(log, 2)
    leo = log.log_end_offset
    with pytest.raises(DuplicateSequence) as exc:
        produce(log, 0)
    assert (exc.value.first_offset, exc.value.last_offset) == first
    assert exc.value.error_code.name == "NONE"
    with pytest.raises(DuplicateSequence) as exc:
        produce(log, 2)
    assert (exc.value.first_offset, exc.value.last_offset) == second
    assert log.log_end_offset == leo  # nothing appended


def test_only_last_five_batches_are_remembered(make_log: MakeLog) -> None:
    log = make_log()
    offsets = [produce(log, seq) for seq in range(0, 14, 2)]  # 7 batches
    for seq, expected in zip(range(4, 14, 2), offsets[2:]):
        with pytest.raises(DuplicateSequence) as exc:
            produce(log, seq)
        assert (exc.value.first_offset, exc.value.last_offset) == expected
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, 0)  # too old to be recognised: looks out of order


def test_sequence_gap_is_out_of_order(make_log: MakeLog) -> None:
    log = make_log()
    produce(log, 0)
    with pytest.raises(OutOfOrderSequenceError) as exc:
        produce(log, 3)  # expected 2
    assert exc.value.error_code.name == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, 1)  # overlaps the last batch without matching it
    assert produce(log, 2) == (2, 3)


def test_unknown_producer_may_start_anywhere(make_log: MakeLog) -> None:
    log = make_log()
    assert produce(log, 1000) == (0, 1)
    assert produce(log, 1002) == (2, 3)


def test_epochs(make_log: MakeLog) -> None:
    log = make_log()
    produce(log, 0, epoch=3)
    with pytest.raises(InvalidProducerEpochError) as exc:
        produce(log, 2, epoch=2)
    assert exc.value.error_code.name == "INVALID_PRODUCER_EPOCH"
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, 2, epoch=4)  # a new epoch must start at 0
    produce(log, 0, epoch=4)
    with pytest.raises(InvalidProducerEpochError):
        produce(log, 2, epoch=3)
    # The duplicate check is per epoch: seq 0 of epoch 4 is a duplicate, of epoch 5 it is a new start.
    with pytest.raises(DuplicateSequence):
        produce(log, 0, epoch=4)
    produce(log, 0, epoch=5)


def test_sequence_wraps_at_int32_max(make_log: MakeLog) -> None:
    log = make_log()
    produce(log, 2**31 - 3, n=3)  # last sequence 2**31 - 1
    assert produce(log, 0, n=2) == (3, 4)
    log2_seq_batch = produce(log, 2, n=1)
    assert log2_seq_batch == (5, 5)


def test_wrapping_batch_is_deduplicated(make_log: MakeLog) -> None:
    log = make_log()
    produce(log, 2**31 - 2, n=4)  # sequences 2**31-2 .. 1 (wrapping)
    with pytest.raises(DuplicateSequence):
        produce(log, 2**31 - 2, n=4)
    assert produce(log, 2, n=1) == (4, 4)


def test_multiple_batches_in_one_request(make_log: MakeLog) -> None:
    log = make_log()
    data = batch(2, producer_id=PID, producer_epoch=0, base_sequence=0) + batch(
        2, producer_id=PID, producer_epoch=0, base_sequence=2
    )
    log.append_as_leader(data, 0)
    assert produce(log, 4) == (4, 5)
    bad = batch(1, producer_id=PID, producer_epoch=0, base_sequence=6) + batch(
        1, producer_id=PID, producer_epoch=0, base_sequence=9
    )
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(bad, 0)
    assert produce(log, 6) == (6, 7)  # the failed request left no trace


@pytest.mark.parametrize("clean", [True, False])
def test_state_rebuilt_after_reopen(make_log: MakeLog, log_dir: Path, clean: bool) -> None:
    cfg = small_config(segment_bytes=400)
    log = make_log(cfg)
    offsets = [produce(log, seq) for seq in range(0, 20, 2)]
    produce(log, 0, pid=7)
    assert len(log.segments) > 2
    log.close(take_snapshot=clean)
    if not clean:
        for snap in log_dir.glob("*.snapshot"):
            snap.unlink()  # force a full header scan
    log = make_log(cfg, clean_shutdown=clean)
    with pytest.raises(DuplicateSequence) as exc:
        produce(log, 18)
    assert (exc.value.first_offset, exc.value.last_offset) == offsets[-1]
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, 22)
    assert produce(log, 20)[0] == log.log_end_offset - 2
    assert produce(log, 2, pid=7)[0] == log.log_end_offset - 2


def test_snapshot_is_kafka_layout_and_corrupt_snapshot_falls_back(make_log: MakeLog, log_dir: Path) -> None:
    log = make_log()
    produce(log, 0)
    produce(log, 2)
    log.close()
    snap = log_dir / "00000000000000000004.snapshot"
    raw = snap.read_bytes()
    assert raw[:2] == b"\x00\x01"  # version 1
    assert len(raw) == 2 + 4 + 4 + 46  # one producer entry
    snap.write_bytes(raw[:-1] + bytes([raw[-1] ^ 1]))  # CRC now wrong
    log = make_log(clean_shutdown=True)
    assert not snap.exists()
    with pytest.raises(DuplicateSequence):
        produce(log, 2)  # rebuilt by scanning the log instead
    assert produce(log, 4) == (4, 5)


def test_truncation_rebuilds_producer_state(make_log: MakeLog) -> None:
    log = make_log()
    produce(log, 0)
    produce(log, 2)
    produce(log, 4)
    log.truncate_to(4)
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, 6)
    assert produce(log, 4) == (4, 5)


def test_follower_append_updates_state(make_log: MakeLog, tmp_path: Path) -> None:
    leader = Log(tmp_path / "l-0", small_config())
    produce(leader, 0)
    produce(leader, 2)
    follower = make_log()
    follower.append_as_follower(leader.read(0, 1 << 20).read())
    with pytest.raises(DuplicateSequence):
        produce(follower, 2)
    assert produce(follower, 4) == (4, 5)
    leader.close()


def test_one_batch_is_checked_as_the_staged_path_checks_it(tmp_path: Path) -> None:
    """A partition's usual append holds one batch: it is checked against the producer's entry as it is, without
    the working copy several batches need. Same answer (the updates, or the same error) as the staged path, for
    every case, and the producer state is left as it was."""
    from moldau.protocol.records import build_batch, read_header
    from moldau.storage.errors import InvalidTxnStateError
    from moldau.storage.producer_state import BatchMetadata, ProducerStateManager

    def header(pid: int, epoch: int, seq: int, n: int = 2, transactional: bool = False, offset: int = 100) -> object:
        return read_header(build_batch([(None, b"v", [], None)] * n, base_offset=offset, producer_id=pid,
                                       producer_epoch=epoch, base_sequence=seq, is_transactional=transactional))

    state = ProducerStateManager(tmp_path)
    state.apply([(1, 3, BatchMetadata(0, 1, 0, 1, 10), False), (1, 3, BatchMetadata(2, 3, 2, 3, 11), False),
                 (2, 0, BatchMetadata(0, 0, 4, 4, 12), True)], 5)
    cases = {
        "in sequence": (header(1, 3, 4), None),
        "new producer": (header(7, 0, 5), None),
        "no producer id": (header(-1, -1, -1), None),
        "duplicate": (header(1, 3, 2), DuplicateSequence),
        "gap": (header(1, 3, 9), OutOfOrderSequenceError),
        "old epoch": (header(1, 2, 4), InvalidProducerEpochError),
        "new epoch at 0": (header(1, 4, 0), None),
        "new epoch not at 0": (header(1, 4, 6), OutOfOrderSequenceError),
        "open transaction, plain batch": (header(2, 0, 1), InvalidTxnStateError),
        "open transaction, its next batch": (header(2, 0, 1, transactional=True), None),
        "transaction begins": (header(1, 3, 4, transactional=True), None),
    }
    before = {pid: (e.producer_epoch, list(e.batches), e.current_txn_first_offset)
              for pid, e in state.producers.items()}
    for name, (h, error) in cases.items():
        outcomes = []
        for check in (state._validate_one, lambda h: state._validate_staged([h])):
            try:
                outcomes.append(check(h))  # type: ignore[arg-type]
            except Exception as exc:
                outcomes.append(type(exc))
        assert outcomes[0] == outcomes[1], name
        assert (outcomes[0] is error) if error is not None else isinstance(outcomes[0], list), name
        assert {pid: (e.producer_epoch, list(e.batches), e.current_txn_first_offset)
                for pid, e in state.producers.items()} == before, name
    assert state.validate_leader_batches([cases["in sequence"][0]]) == state._validate_one(  # type: ignore[list-item]
        cases["in sequence"][0])  # type: ignore[arg-type]
