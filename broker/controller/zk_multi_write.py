"""A ZooKeeper multi (opcode 14) of version checks and conditional data writes, serialized without kazoo's
per-operation objects.

The controller's state writes are multis of a ``/controller_epoch`` check and up to 200 conditional setData
operations; a broker death at 10,000 partitions writes 10,010 of them. kazoo builds a validated request object
per operation (``TransactionRequest.set_data``: path checks, the chroot prefix, a namedtuple) and serializes each
through its own bytearray; on a loaded 2-core machine that was ~0.5 s of the new controller's event loop per
failover. This request carries the same bytes (kazoo's ``Transaction`` serialization,
``tests/unit/broker/controller/test_zk_multi_write.py`` compares them) and answers as kazoo's transaction does:
per operation ``True`` (a check), a ``ZnodeStat`` (a write) or the kazoo exception of its error code
(``RolledBackError`` for the operations of a failed multi that did not fail themselves).

Wire format (ZooKeeper's MultiOperationRecord / MultiResponse): per operation a MultiHeader ``(type int32, done
bool, err int32)`` followed by CheckVersionRequest ``(path string, version int32)`` or SetDataRequest ``(path
string, data buffer, version int32)``; the list ends with ``(-1, true, -1)``. The answer has per operation a
header ``(13, false, 0)``, ``(5, false, 0)`` + Stat, or ``(-1, false, err)`` + ErrorResponse ``(err int32)``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from kazoo.exceptions import EXCEPTIONS
from kazoo.protocol.states import ZnodeStat

# The multi's framing (operation header, int, stat, end marker) is the one multiRead uses.
from moldau.broker.controller.zk_multi_read import _END, _HEADER, _INT, _STAT, OP_ERROR

OP_SET_DATA = 5
OP_CHECK = 13

# (kind, path, version) for "check"; (kind, path, data, version) for "set" (ZkClient.multi's op tuples)
WriteOp = tuple[Any, ...]


class MultiWriteError(Exception):
    """The answer could not be parsed (kazoo drops the connection; the caller's retry decides)."""


def supports(ops: list[WriteOp]) -> bool:
    """True if every op is a version check or a conditional data write (what this request carries)."""
    return all(op[0] == "check" or op[0] == "set" for op in ops)


def encode(ops: list[WriteOp], chroot: str = "") -> bytes:
    """The request body (after the opcode); paths get the client's chroot prefixed, as kazoo does."""
    out = bytearray()
    header, pack_int = _HEADER.pack, _INT.pack
    for op in ops:
        path = (chroot + op[1]).encode()
        if op[0] == "set":
            data = op[2]
            out += header(OP_SET_DATA, False, -1)
            out += pack_int(len(path))
            out += path
            if data is None:
                out += pack_int(-1)
            else:
                out += pack_int(len(data))
                out += data
            out += pack_int(op[3])
        elif op[0] == "check":
            out += header(OP_CHECK, False, -1)
            out += pack_int(len(path))
            out += path
            out += pack_int(op[2])
        else:
            raise ValueError(f"not a check or a data write: {op[0]!r}")
    out += _END
    return bytes(out)


def decode(buffer: bytes | bytearray | memoryview, offset: int) -> list[Any]:
    """Per operation, in order: ``True`` (check), ``ZnodeStat`` (write) or a kazoo exception instance."""
    results: list[Any] = []
    unpack_header, unpack_int, unpack_stat = _HEADER.unpack_from, _INT.unpack_from, _STAT.unpack_from
    while True:
        op, done, _err = unpack_header(buffer, offset)
        offset += _HEADER.size
        if done:
            return results
        if op == OP_SET_DATA:
            results.append(ZnodeStat._make(unpack_stat(buffer, offset)))
            offset += _STAT.size
        elif op == OP_CHECK:
            results.append(True)
        elif op == OP_ERROR:
            (code,) = unpack_int(buffer, offset)
            offset += _INT.size
            results.append(EXCEPTIONS[code]())
        else:
            raise MultiWriteError(f"unexpected operation type {op} in a multi answer")


class MultiWrite:
    """A kazoo request object (its connection thread serializes it and hands it the answer). Its ``type`` is the
    transaction's, so kazoo treats the answer as one (it only un-chroots string results: there are none)."""

    type: ClassVar[int] = 14

    def __init__(self, ops: list[WriteOp], chroot: str = "") -> None:
        self.ops = ops
        self.chroot = chroot

    def serialize(self) -> bytes:
        return encode(self.ops, self.chroot)

    @classmethod
    def deserialize(cls, buffer: Any, offset: int) -> list[Any]:
        return decode(buffer, offset)

    def __repr__(self) -> str:
        return f"MultiWrite({len(self.ops)} ops)"
