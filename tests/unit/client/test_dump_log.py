"""moldau-dump-log over segments and indexes written by moldau.storage."""

from __future__ import annotations

from pathlib import Path

import pytest

from moldau.protocol.consumer_offsets import group_key, offset_key, offset_value
from moldau.protocol.records import build_batch
from moldau.storage import Log, LogConfig, ManualClock
from moldau.tools.dump_log import main


def write_log(directory: Path, batches: list[bytes]) -> Path:
    log = Log(directory, LogConfig(segment_bytes=1 << 20, index_interval_bytes=1, file_delete_delay_ms=0),
              ManualClock())
    for b in batches:
        log.append_as_leader(b, leader_epoch=3)
    log.close(take_snapshot=False, flush=True)
    return directory / "00000000000000000000.log"


def dump(capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    assert main(list(args)) == 0
    return capsys.readouterr().out.splitlines()


@pytest.fixture
def segment(tmp_path: Path) -> Path:
    return write_log(tmp_path / "t-0", [
        build_batch([(b"k1", b"hello", [("h", b"1")], 1000), (None, b"world", None, 1001)]),
        build_batch([(b"k2", None, None, 2000)], compression=4, producer_id=7, producer_epoch=0, base_sequence=0),
        build_batch([(b"k3", b"x", None, 3000)]),
    ])


def test_batch_lines(segment: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = dump(capsys, "--files", str(segment))
    assert out[0] == f"Dumping {segment}"
    assert out[1] == "Log starting offset: 0"
    assert out[2].startswith("baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 "
                             "producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 3 isTransactional: false "
                             "isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1001 ")
    assert out[2].endswith("magic: 2 compresscodec: none crc: " + out[2].split("crc: ")[1].split()[0]
                           + " isvalid: true")
    assert "baseOffset: 2 lastOffset: 2 count: 1 baseSequence: 0 lastSequence: 0 producerId: 7" in out[3]
    assert "compresscodec: zstd" in out[3]
    assert len(out) == 5


def test_deep_iteration_and_data(segment: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = dump(capsys, "--files", str(segment), "--deep-iteration")
    assert out[3] == "| offset: 0 CreateTime: 1000 keySize: 2 valueSize: 5 sequence: -1 headerKeys: [h]"
    out = dump(capsys, "--files", str(segment), "--print-data-log")
    assert out[3].endswith("headerKeys: [h] key: k1 payload: hello")
    assert out[4] == "| offset: 1 CreateTime: 1001 keySize: -1 valueSize: 5 sequence: -1 headerKeys: [] payload: world"
    assert out[6] == "| offset: 2 CreateTime: 2000 keySize: 2 valueSize: -1 sequence: 0 headerKeys: [] key: k2"


def test_index_dump_sanity_and_verify(segment: Path, capsys: pytest.CaptureFixture[str]) -> None:
    index = segment.with_suffix(".index")
    out = dump(capsys, "--files", str(index))
    # Kafka's rule: an entry once index.interval.bytes have been written since the last one (batches 2 and 3).
    first_size = int(dump(capsys, "--files", str(segment))[2].split("size: ")[1].split()[0])
    assert out[1] == f"offset: 2 position: {first_size}"
    assert out[2].startswith("offset: 3 position: ") and len(out) == 3
    assert dump(capsys, "--files", str(index), "--index-sanity-check")[1] == f"{index} passed sanity check."
    assert dump(capsys, "--files", str(index), "--verify-index-only") == [f"Dumping {index}"]
    timeindex = segment.with_suffix(".timeindex")
    assert dump(capsys, "--files", str(timeindex))[1:] == ["timestamp: 2000 offset: 2", "timestamp: 3000 offset: 3"]
    # A corrupted index: second entry's offset goes backwards.
    data = bytearray(index.read_bytes())
    data[8:12] = (1).to_bytes(4, "big")
    index.write_bytes(bytes(data))
    assert "failed sanity check" in dump(capsys, "--files", str(index), "--index-sanity-check")[1]
    out = dump(capsys, "--files", str(index), "--verify-index-only")
    assert out[1] == f"Mismatches in :{index}"


def test_offsets_decoder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seg = write_log(tmp_path / "__consumer_offsets-0", [build_batch([
        (offset_key("g", "t", 0), offset_value(5, -1, "meta", 1234), None, 10),
        (group_key("g"), None, None, 11)])])
    out = dump(capsys, "--files", str(seg), "--offsets-decoder")
    assert out[3].endswith('key: {"type":"1","data":{"group":"g","topic":"t","partition":0}} payload: '
                           '{"version":"3","data":{"offset":5,"leader_epoch":-1,"metadata":"meta",'
                           '"commit_timestamp":1234}}')
    assert out[4].endswith('key: {"type":"2","data":{"group":"g"}} payload: <DELETE>')


def test_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "--files" in capsys.readouterr().err
    assert main(["--files", "x.txt"]) == 2
    assert "--files" in capsys.readouterr().err
    assert main(["--files", str(tmp_path / "00000000000000000000.log")]) == 1


def test_control_records_and_txnindex(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    directory = tmp_path / "tx-0"
    clock = ManualClock()
    now = clock.time_ms()  # markers carry the log's clock: same time, so no time-based roll
    log = Log(directory, LogConfig(segment_bytes=1 << 20, file_delete_delay_ms=0), clock)
    log.append_as_leader(build_batch([(b"k", b"v", None, now)], producer_id=9, producer_epoch=1, base_sequence=0,
                                     is_transactional=True), leader_epoch=0)
    log.append_marker(9, 1, False, coordinator_epoch=4, leader_epoch=0)
    log.append_as_leader(build_batch([(b"k", b"w", None, now)], producer_id=9, producer_epoch=1, base_sequence=1,
                                     is_transactional=True), leader_epoch=0)
    log.append_marker(9, 1, True, coordinator_epoch=4, leader_epoch=0)
    log.close(flush=True)
    out = dump(capsys, "--files", str(directory / "00000000000000000000.log"), "--print-data-log")
    assert "isTransactional: true isControl: true" in out[4]
    assert out[5].endswith("sequence: -1 headerKeys: [] endTxnMarker: ABORT coordinatorEpoch: 4")
    assert out[9].endswith("endTxnMarker: COMMIT coordinatorEpoch: 4")
    out = dump(capsys, "--files", str(directory / "00000000000000000000.txnindex"))
    assert out[1:] == ["AbortedTxn(version=0, producerId=9, firstOffset=0, lastOffset=1, lastStableOffset=2)"]
