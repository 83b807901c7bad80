"""The queries handlers ask a Partition (ListOffsets, OffsetForLeaderEpoch, DeleteRecords), and the boundary that
keeps handlers from reaching into ``partition.log`` themselves."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from moldau.broker.metadata import PartitionState
from moldau.broker.partition import Partition
from moldau.protocol.records import build_batch
from moldau.storage.config import LogConfig
from moldau.storage.log import Log, OffsetOutOfRangeError

APIS = Path(__file__).resolve().parents[3] / "broker" / "apis"


def leader(tmp_path: Path) -> Partition:
    """Broker 1 leads epoch 5 with follower 2 in the ISR; ten records with timestamps 1000, 1010, ... 1090."""
    p = Partition("t", 0, 1, Log(tmp_path / "t-0", LogConfig()))
    p.apply_state(PartitionState(0, 1, 5, [1, 2], [1, 2], zk_version=7), 0)
    p.append_as_leader(build_batch([(None, b"v", [], 1000 + 10 * i) for i in range(10)]))
    p.update_follower(2, 6, 100)  # HW = 6
    return p


def test_offset_for_timestamp_hides_uncommitted_offsets_from_consumers_only(tmp_path: Path) -> None:
    p = leader(tmp_path)
    assert p.high_watermark == 6 and p.log.log_end_offset == 10
    assert p.offset_for_timestamp(-1, committed_only=True) == (6, -1)  # latest: the HW for a consumer
    assert p.offset_for_timestamp(-1, committed_only=False) == (10, -1)  # the LEO for a replica
    assert p.offset_for_timestamp(-2, committed_only=True) == (0, -1)  # earliest carries no timestamp
    assert p.offset_for_timestamp(1030, committed_only=True) == (3, 1030)
    assert p.offset_for_timestamp(1075, committed_only=True) == (-1, -1)  # 1080 is at/above the HW: hidden
    assert p.offset_for_timestamp(1075, committed_only=False) == (8, 1080)
    assert p.offset_for_timestamp(5000, committed_only=False) is None


def test_end_offset_for_epoch_and_advance_log_start_offset(tmp_path: Path) -> None:
    p = leader(tmp_path)
    assert p.end_offset_for_epoch(5) == (5, 10)
    assert p.end_offset_for_epoch(4) == (4, 0)  # below the first epoch: it ends where epoch 5 starts
    assert p.end_offset_for_epoch(6) == (-1, -1)  # an epoch this leader has not seen
    assert p.advance_log_start_offset(4)
    assert p.log.log_start_offset == 4 and p.high_watermark == 6
    assert not p.advance_log_start_offset(3)  # never moves back
    with pytest.raises(OffsetOutOfRangeError):
        p.advance_log_start_offset(7)  # past the high watermark
    assert p.log.log_start_offset == 4


def log_accesses(source: str) -> list[int]:
    """Lines of every ``<expr>.log`` attribute access (``logger``/``logging`` are other names)."""
    return [node.lineno for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Attribute) and node.attr == "log"]


def test_the_detector_finds_a_reach_into_the_log() -> None:
    assert log_accesses("x = partition.log.log_end_offset\nlogger.info('x')\n") == [1]
    assert log_accesses("rm.get(t, p).log.truncate_to(0)\n") == [1]


def test_handlers_never_reach_into_partition_log() -> None:
    files = sorted(APIS.glob("*.py"))
    assert len(files) > 10  # the path is right
    found = {f.name: lines for f in files if (lines := log_accesses(f.read_text()))}
    assert found == {}, f"handlers must ask Partition/ReplicaManager, not the log: {found}"
