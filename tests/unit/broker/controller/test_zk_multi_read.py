"""The multiRead codec (ZooKeeper's MultiOperationRecord of getData operations and its MultiResponse), byte by byte;
the round trip against a real server is tests/integration/test_zk_multi_read.py."""

from __future__ import annotations

import struct

import pytest

from moldau.broker.controller import zk_multi_read as MR

STAT = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)


def test_the_request_is_one_get_data_per_path_then_the_end_header() -> None:
    assert MR.encode_get_data(["/a", "/bc"]) == (
        b"\x00\x00\x00\x04" b"\x00" b"\xff\xff\xff\xff" b"\x00\x00\x00\x02/a" b"\x00"
        b"\x00\x00\x00\x04" b"\x00" b"\xff\xff\xff\xff" b"\x00\x00\x00\x03/bc" b"\x00"
        b"\xff\xff\xff\xff" b"\x01" b"\xff\xff\xff\xff")
    assert MR.MultiRead.type == 22


def test_the_answer_gives_data_and_stat_or_the_error_code_per_operation() -> None:
    stat = struct.pack("!qqqqiiiqiiq", *STAT)
    answer = (b"junk"  # the reply header before the offset
              + struct.pack("!i?i", 4, False, 0) + struct.pack("!i", 3) + b"abc" + stat
              + struct.pack("!i?i", -1, False, -101) + struct.pack("!i", -101)
              + struct.pack("!i?i", 4, False, 0) + struct.pack("!i", -1) + stat
              + struct.pack("!i?i", -1, True, -1))
    results = MR.MultiRead.deserialize(answer, 4)
    assert len(results) == 3
    first = results[0]
    assert isinstance(first, tuple) and first[0] == b"abc" and first[1].version == 5 and first[1].pzxid == 11
    assert results[1] == -101
    third = results[2]
    assert isinstance(third, tuple) and third[0] == b"" and tuple(third[1]) == STAT


def test_an_unknown_operation_type_in_the_answer_is_an_error() -> None:
    with pytest.raises(MR.MultiReadError):
        MR.decode_results(struct.pack("!i?i", 5, False, 0) + b"\x00" * 80, 0)
