"""The controller's multi of checks and conditional writes (zk_multi_write.py): the bytes kazoo's own transaction
sends, and its answer read as kazoo reads it (a stat per write, True per check, kazoo's exception per error)."""

from __future__ import annotations

import struct

import pytest
from kazoo.exceptions import BadVersionError, NoNodeError, RolledBackError
from kazoo.protocol.serialization import CheckVersion, SetData, Transaction
from kazoo.protocol.states import ZnodeStat

from moldau.broker.controller import zk_multi_write as MW

OPS = [("check", "/controller_epoch", 7),
       ("set", "/brokers/topics/t/partitions/0/state", b'{"leader":1}', 3),
       ("set", "/brokers/topics/t/partitions/1/state", b"", 0),
       ("set", "/brokers/topics/t/partitions/2/state", None, -1)]


@pytest.mark.parametrize("chroot", ["", "/bench"])
def test_the_request_is_byte_for_byte_kazoos_transaction(chroot: str) -> None:
    kazoo_ops = [CheckVersion(chroot + op[1], op[2]) if op[0] == "check" else SetData(chroot + op[1], op[2], op[3])
                 for op in OPS]
    assert MW.encode(OPS, chroot) == bytes(Transaction(kazoo_ops).serialize())
    request = MW.MultiWrite(OPS, chroot)
    assert request.type == Transaction.type and request.serialize() == MW.encode(OPS, chroot)


def test_only_checks_and_writes_are_carried() -> None:
    assert MW.supports(OPS)
    assert not MW.supports([*OPS, ("create", "/x", b"", False)])
    assert not MW.supports([("delete", "/x", -1)])
    with pytest.raises(ValueError, match="not a check or a data write"):
        MW.encode([("delete", "/x", -1)])


def _stat(version: int) -> bytes:
    return struct.pack("!qqqqiiiqiiq", 10, 20 + version, 1000, 2000, version, 0, 0, 0, 12, 0, 30)


def _answer(*parts: tuple[int, bytes]) -> bytes:
    out = b"pad"  # decoding starts at an offset, as kazoo hands it the reply after the header
    for op, payload in parts:
        out += struct.pack("!i?i", op, False, 0 if op != -1 else struct.unpack("!i", payload)[0]) + payload
    return out + struct.pack("!i?i", -1, True, -1)


def test_a_successful_answer_gives_true_per_check_and_a_stat_per_write() -> None:
    answer = _answer((13, b""), (5, _stat(4)), (5, _stat(1)))
    results = MW.decode(answer, 3)
    assert results[0] is True
    assert results[1:] == [ZnodeStat._make(struct.unpack("!qqqqiiiqiiq", _stat(v))) for v in (4, 1)]
    assert results[1].version == 4 and results[2].version == 1
    assert MW.MultiWrite.deserialize(answer, 3) == results
    # kazoo's own reader agrees on the same bytes
    assert Transaction.deserialize(answer, 3) == results


def test_a_failed_multi_gives_kazoos_exceptions() -> None:
    # ZooKeeper rolls the whole multi back: the failed op carries its error, the others RolledBack (0) or
    # RuntimeInconsistency (-2).
    answer = _answer((-1, struct.pack("!i", 0)), (-1, struct.pack("!i", BadVersionError.code)),
                     (-1, struct.pack("!i", -2)), (-1, struct.pack("!i", NoNodeError.code)))
    results = MW.decode(answer, 3)
    assert [type(r) for r in results] == [type(r) for r in Transaction.deserialize(answer, 3)]
    assert isinstance(results[0], RolledBackError) and isinstance(results[1], BadVersionError)
    assert isinstance(results[3], NoNodeError)


def test_an_unknown_operation_in_the_answer_is_an_error() -> None:
    with pytest.raises(MW.MultiWriteError, match="unexpected operation type 4"):
        MW.decode(_answer((4, b"")), 3)
