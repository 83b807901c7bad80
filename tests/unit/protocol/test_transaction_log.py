"""``__transaction_state`` keys and values in Kafka's byte layout."""

from __future__ import annotations

import struct

import pytest

from moldau.protocol.transaction_log import (
    FormatError,
    TransactionLogValue,
    read_key,
    read_value,
    transaction_key,
    transaction_value,
)


def test_key_is_version_0_and_the_transactional_id() -> None:
    assert transaction_key("tx-1") == b"\x00\x00" + b"\x00\x04tx-1"
    assert read_key(transaction_key("tx-1")) == "tx-1"


def test_value_v0_byte_layout() -> None:
    v = TransactionLogValue(producer_id=7, producer_epoch=3, transaction_timeout_ms=60000, state_id=1,
                            partitions=frozenset({("b", 0), ("a", 2), ("a", 1)}),
                            last_update_timestamp_ms=1000, start_timestamp_ms=900)
    buf = transaction_value(v)
    expected = (struct.pack(">hqhib", 0, 7, 3, 60000, 1)
                + struct.pack(">i", 2)  # two topics, sorted
                + struct.pack(">h", 1) + b"a" + struct.pack(">iii", 2, 1, 2)
                + struct.pack(">h", 1) + b"b" + struct.pack(">ii", 1, 0)
                + struct.pack(">qq", 1000, 900))
    assert buf == expected
    assert read_value(buf) == v


def test_empty_partitions_are_written_as_null() -> None:
    v = TransactionLogValue(1, 0, 1000, 0, frozenset(), 5, -1)
    buf = transaction_value(v)
    assert buf[2 + 8 + 2 + 4 + 1:][:4] == struct.pack(">i", -1)
    assert read_value(buf) == v


def test_flexible_v1_is_read() -> None:
    body = (struct.pack(">hqhib", 1, 9, 2, 500, 4)
            + bytes([2]) + bytes([2]) + b"t" + bytes([2]) + struct.pack(">i", 3) + bytes([0])  # compact array
            + struct.pack(">qq", 10, 8) + bytes([0]))
    assert read_value(body) == TransactionLogValue(9, 2, 500, 4, frozenset({("t", 3)}), 10, 8)


@pytest.mark.parametrize("buf", [b"", b"\x00", b"\x00\x05abc", b"\x00\x00\x00"])
def test_unreadable_values_raise_format_error(buf: bytes) -> None:
    with pytest.raises(FormatError):
        read_value(buf)
