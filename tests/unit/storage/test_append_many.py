"""Log.append_many_as_leader: several Produce requests' records for one partition in one append (issue #21). Each
request gets what append_as_leader one by one would have given it, the log holds the same bytes, and a request
that would have been refused makes the whole call fail with nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from moldau.storage import Log, ManualClock
from moldau.storage.errors import CorruptRecordError, DuplicateSequence, OutOfOrderSequenceError
from tests.unit.storage.conftest import batch, small_config


def _log(path: Path, clock: ManualClock, **config: int | str) -> Log:
    return Log(path / "t-0", small_config(**config), clock)


def _content(log: Log) -> bytes:
    return log.read(log.log_start_offset, 1 << 30).read()


def _requests() -> list[bytes]:
    """Requests of one to three batches, two producers interleaved with a plain one, various record counts."""
    return [batch(1, producer_id=7, producer_epoch=0, base_sequence=0),
            batch(3) + batch(2),
            batch(2, producer_id=7, producer_epoch=0, base_sequence=1),
            batch(1, producer_id=9, producer_epoch=2, base_sequence=0),
            batch(4, producer_id=7, producer_epoch=0, base_sequence=3) + batch(1, producer_id=9, producer_epoch=2,
                                                                              base_sequence=1),
            batch(1, ts_step=5)]


@pytest.mark.parametrize("log_append_time", [False, True])
def test_one_append_answers_each_request_as_appending_them_one_by_one(tmp_path: Path, log_append_time: bool
                                                                      ) -> None:
    clock = ManualClock()
    config = {"message_timestamp_type": "LogAppendTime"} if log_append_time else {}
    alone, together = _log(tmp_path / "a", clock, **config), _log(tmp_path / "b", clock, **config)
    alone.append_as_leader(batch(2), 3)  # both logs start past offset 0
    together.append_as_leader(batch(2), 3)
    expected = [alone.append_as_leader(bytearray(r), 3) for r in _requests()]
    frames = [bytearray(r) for r in _requests()]
    got = together.append_many_as_leader([memoryview(f) for f in frames], 3)
    assert got == expected
    assert [i.first_offset for i in got] == [2, 3, 8, 10, 11, 16]
    assert _content(together) == _content(alone)
    assert together.log_end_offset == alone.log_end_offset == 17
    for pid in (7, 9):
        assert together.producer_state.producers[pid].last_seq == alone.producer_state.producers[pid].last_seq
    assert frames == [bytearray(r) for r in _requests()]  # the requests' own frames are left as they came


@pytest.mark.parametrize("bad", ["crc", "gap", "duplicate"])
def test_a_request_that_would_be_refused_fails_the_call_and_nothing_is_written(tmp_path: Path, bad: str) -> None:
    log = _log(tmp_path, ManualClock())
    log.append_as_leader(batch(1, producer_id=7, producer_epoch=0, base_sequence=0), 0)
    before = _content(log)
    if bad == "crc":
        third = bytearray(batch(1))
        third[-1] ^= 0xFF
        error: type[Exception] = CorruptRecordError
    elif bad == "gap":
        third = bytearray(batch(1, producer_id=7, producer_epoch=0, base_sequence=5))
        error = OutOfOrderSequenceError
    else:
        third = bytearray(batch(1, producer_id=7, producer_epoch=0, base_sequence=0))
        error = DuplicateSequence
    requests = [batch(1), batch(1, producer_id=7, producer_epoch=0, base_sequence=1), third]
    with pytest.raises(error):
        log.append_many_as_leader(requests, 0)
    assert _content(log) == before and log.log_end_offset == 1
    assert log.producer_state.producers[7].last_seq == 0
    # Appended one by one afterwards, the first two go in as they would have.
    assert [log.append_as_leader(bytearray(r), 0).first_offset for r in requests[:2]] == [1, 2]
