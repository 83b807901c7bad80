"""``moldau-dump-log``: Kafka's DumpLogSegments for Moldau's log directories.

    moldau-dump-log --files 00000000000000000000.log [--deep-iteration] [--print-data-log] [--offsets-decoder]
    moldau-dump-log --files 00000000000000000000.index [--index-sanity-check | --verify-index-only]
    moldau-dump-log --files 00000000000000000000.txnindex

Batch and record lines use Kafka's wording (``baseOffset: 0 lastOffset: 2 count: 3 ...`` and ``| offset: 0
CreateTime: ... keySize: ...``, control records with ``endTxnMarker: COMMIT coordinatorEpoch: 3``, aborted
transaction index entries as ``AbortedTxn(version=0, producerId=...)``) so scripts written against kafka-dump-log
keep working. Files are only read.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from moldau.protocol.compression import Codec
from moldau.protocol.consumer_offsets import (
    ConsumerKey,
    GroupKey,
    read_consumer_value,
    read_group_value,
    read_key,
    read_offset_value,
)
from moldau.protocol.control_records import ABORT, COMMIT, control_type, decode_marker
from moldau.protocol.records import BatchHeader, RecordBatchError, iter_headers, iter_records, valid_crc
from moldau.tools.common import ToolError, ToolParser, UsageError, run_tool

PROG = "moldau-dump-log"
_OFFSET_ENTRY = struct.Struct(">ii")  # relative offset, position
_TIME_ENTRY = struct.Struct(">qi")  # timestamp, relative offset
_TXN_ENTRY = struct.Struct(">hqqqq")  # version, producer id, first offset, last offset, last stable offset


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = ToolParser(prog=PROG, description="Print the contents of log segment and index files.")
    p.add_argument("--files", help="REQUIRED: comma-separated .log, .index, .timeindex and .txnindex files")
    p.add_argument("--print-data-log", action="store_true", help="print record keys and values (implies "
                   "--deep-iteration)")
    p.add_argument("--deep-iteration", action="store_true", help="print every record, not only batches")
    p.add_argument("--index-sanity-check", action="store_true", help="only check that index files are sane")
    p.add_argument("--verify-index-only", action="store_true", help="only check index entries against the log")
    p.add_argument("--offsets-decoder", action="store_true", help="decode __consumer_offsets keys and values")
    p.add_argument("--max-bytes", default=str(2**31 - 1), help="bytes of each log file to read")
    args = p.parse_args(list(argv))
    if not args.files:
        raise UsageError("--files is required")
    try:
        args.max_bytes = int(args.max_bytes)
    except ValueError:
        raise UsageError(f"--max-bytes: {args.max_bytes!r} is not an integer") from None
    if args.offsets_decoder:
        args.print_data_log = True
    if args.print_data_log:
        args.deep_iteration = True
    args.files = [f for f in args.files.split(",") if f]
    for f in args.files:
        if not f.endswith((".log", ".index", ".timeindex", ".txnindex")):
            raise UsageError(f"--files {f}: not a .log, .index, .timeindex or .txnindex file")
    return args


def _base_offset(path: Path) -> int:
    try:
        return int(path.name.split(".")[0])
    except ValueError:
        raise UsageError(f"--files {path}: the file name must be the segment's 20-digit base offset") from None


def _ts_name(h: BatchHeader) -> str:
    return "LogAppendTime" if h.timestamp_type == 1 else "CreateTime"


def batch_line(h: BatchHeader, position: int, crc_ok: bool) -> str:
    horizon = f"OptionalLong[{h.base_timestamp}]" if h.has_delete_horizon else "OptionalLong.empty"
    return (f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
            f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} producerId: {h.producer_id} "
            f"producerEpoch: {h.producer_epoch} partitionLeaderEpoch: {h.partition_leader_epoch} "
            f"isTransactional: {str(h.is_transactional).lower()} isControl: {str(h.is_control).lower()} "
            f"deleteHorizonMs: {horizon} position: {position} {_ts_name(h)}: {h.max_timestamp} "
            f"size: {h.total_size} magic: {h.magic} compresscodec: {_codec_name(h.compression)} crc: {h.crc} "
            f"isvalid: {str(crc_ok).lower()}")


def _codec_name(codec: int) -> str:
    try:
        return Codec(codec).name.lower()
    except ValueError:
        return f"unknown({codec})"


def _text(b: bytes | None) -> str:
    return "null" if b is None else b.decode("utf-8", "replace")


def decode_offsets_record(key: bytes | None, value: bytes | None) -> tuple[str, str]:
    """(key, payload) of a __consumer_offsets record as JSON text, like Kafka's OffsetsMessageParser."""
    if key is None:
        return "null", _text(value)
    try:
        k = read_key(key)
    except Exception as exc:
        return f"unknown::{exc}", _text(value)
    version = struct.unpack_from(">h", key)[0]
    if isinstance(k, GroupKey):
        key_text = json.dumps({"type": str(version), "data": {"group": k.group}}, separators=(",", ":"))
        payload = "<DELETE>" if value is None else _json_value(value, read_group_value)
    elif isinstance(k, ConsumerKey):  # a KIP-848 consumer group record (types 3-8)
        data = {"groupId": k.group, **({"memberId": k.member} if k.member else {})}
        key_text = json.dumps({"type": str(version), "data": data}, separators=(",", ":"))
        payload = "<DELETE>" if value is None else _json_value(value, lambda v: read_consumer_value(k.type, v))
    else:
        key_text = json.dumps({"type": str(version), "data": {"group": k.group, "topic": k.topic,
                                                               "partition": k.partition}}, separators=(",", ":"))
        payload = "<DELETE>" if value is None else _json_value(value, read_offset_value)
    return key_text, payload


def _json_value(value: bytes, reader: Any) -> str:
    try:
        body = reader(value)
    except Exception as exc:
        return f"unknown::{exc}"
    version = struct.unpack_from(">h", value)[0]
    if reader is read_offset_value and version >= 2:
        body.pop("expire_timestamp", None)  # only v1 carries it
    return json.dumps({"version": str(version), "data": body}, separators=(",", ":"), default=_jsonable)


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return bytes(obj).hex()
    return str(obj)


def record_lines(batch: memoryview, h: BatchHeader, print_data: bool, offsets_decoder: bool) -> Iterator[str]:
    seq = h.base_sequence
    for r in iter_records(batch, h, check_crc=False):
        sequence = -1 if seq < 0 else seq + (r.offset - h.base_offset)
        line = (f"| offset: {r.offset} {_ts_name(h)}: {r.timestamp} keySize: {-1 if r.key is None else len(r.key)} "
                f"valueSize: {-1 if r.value is None else len(r.value)} sequence: {sequence} "
                f"headerKeys: [{','.join(k for k, _ in r.headers)}]")
        if h.is_control:
            line += _control_text(r.key, r.value)
        elif print_data:
            if offsets_decoder:
                k, v = decode_offsets_record(r.key, r.value)
                line += f" key: {k} payload: {v}"
            else:
                if r.key is not None:
                    line += f" key: {_text(r.key)}"
                if r.value is not None:
                    line += f" payload: {_text(r.value)}"
        yield line


def _control_text(key: bytes | None, value: bytes | None) -> str:
    """Kafka's DumpLogSegments wording for a control record."""
    try:
        type_ = control_type(key)
        if type_ not in (ABORT, COMMIT):
            return f" controlType: UNKNOWN({type_})"
        marker = decode_marker(key, value)
    except RecordBatchError as exc:
        return f" controlType: invalid ({exc})"
    return f" endTxnMarker: {'COMMIT' if marker.committed else 'ABORT'} coordinatorEpoch: {marker.coordinator_epoch}"


def dump_txn_index(path: Path, out: IO[str]) -> None:
    raw = path.read_bytes()
    whole = len(raw) - len(raw) % _TXN_ENTRY.size
    for version, pid, first, last, lso in _TXN_ENTRY.iter_unpack(raw[:whole]):
        out.write(f"AbortedTxn(version={version}, producerId={pid}, firstOffset={first}, lastOffset={last}, "
                  f"lastStableOffset={lso})\n")
    if whole < len(raw):
        out.write(f"Found {len(raw) - whole} invalid bytes at the end of {path.name}\n")


def dump_log(path: Path, args: argparse.Namespace, out: IO[str]) -> None:
    data = memoryview(path.read_bytes()[:args.max_bytes])
    out.write(f"Log starting offset: {_base_offset(path)}\n")
    end = 0
    try:
        for pos, h in iter_headers(data):
            batch = data[pos:pos + h.total_size]
            out.write(batch_line(h, pos, valid_crc(batch, 0, h)) + "\n")
            if args.deep_iteration:
                for line in record_lines(batch, h, args.print_data_log, args.offsets_decoder):
                    out.write(line + "\n")
            end = pos + h.total_size
    except RecordBatchError as exc:
        out.write(f"Found a corrupt batch at position {end}: {exc}\n")
        return
    if end < len(data):
        out.write(f"Found {len(data) - end} invalid bytes at the end of {path.name}\n")


def _entries(path: Path, entry: struct.Struct) -> tuple[list[tuple[int, int]], int]:
    raw = path.read_bytes()
    whole = len(raw) - len(raw) % entry.size
    return [tuple(e) for e in entry.iter_unpack(raw[:whole])], len(raw) - whole


def check_index(path: Path) -> str | None:
    """Why the index is not sane (Kafka's sanityCheck), or None when it is.

    Offset index: relative offsets strictly increase, positions never decrease. Time index: timestamps and
    offsets never decrease.
    """
    base = _base_offset(path)
    is_time = path.suffix == ".timeindex"
    entries, torn = _entries(path, _TIME_ENTRY if is_time else _OFFSET_ENTRY)
    if torn:
        return f"index file size is not a multiple of the entry size ({torn} stray bytes)"
    for i in range(1, len(entries)):
        (a0, b0), (a1, b1) = entries[i - 1], entries[i]
        if is_time and (a1 < a0 or b1 < b0):
            return f"entry {i} (timestamp {a1}, offset {base + b1}) goes backwards"
        if not is_time and (a1 <= a0 or b1 < b0):
            return f"entry {i} (offset {base + a1}, position {b1}) is not above the previous one"
    return None


def dump_index(path: Path, args: argparse.Namespace, out: IO[str]) -> None:
    base = _base_offset(path)
    if args.index_sanity_check:
        problem = check_index(path)
        out.write(f"{path} passed sanity check.\n" if problem is None
                  else f"{path} failed sanity check: {problem}\n")
        return
    is_time = path.suffix == ".timeindex"
    entries, _ = _entries(path, _TIME_ENTRY if is_time else _OFFSET_ENTRY)
    log_path = path.with_suffix(".log")
    batches: dict[int, BatchHeader] = {}
    if args.verify_index_only or not is_time:
        if log_path.exists():
            batches = {pos: h for pos, h in iter_headers(memoryview(log_path.read_bytes()))}
    mismatches: list[str] = []
    by_last = {h.last_offset: h for h in batches.values()}
    for a, b in entries:
        if is_time:
            if not args.verify_index_only:
                out.write(f"timestamp: {a} offset: {base + b}\n")
            h2 = by_last.get(base + b)
            if args.verify_index_only and (h2 is None or h2.max_timestamp > a):
                mismatches.append(f"Index timestamp: {a}, log offset: {base + b}")
        else:
            h = batches.get(b)
            if not args.verify_index_only:
                out.write(f"offset: {base + a} position: {b}\n")
            if h is None or h.last_offset != base + a:
                mismatches.append(f"Index offset: {base + a}, log offset: {'none' if h is None else h.last_offset}")
    if mismatches and (args.verify_index_only or not is_time) and log_path.exists():
        out.write(f"Mismatches in :{path}\n")
        out.writelines(f"  {m}\n" for m in mismatches)


def run(args: argparse.Namespace, out: IO[str]) -> int:
    for name in args.files:
        path = Path(name)
        out.write(f"Dumping {path}\n")
        if not path.is_file():
            raise ToolError(f"--files: {path}: no such file")
        if path.suffix == ".log":
            dump_log(path, args, out)
        elif path.suffix == ".txnindex":
            dump_txn_index(path, out)
        else:
            dump_index(path, args, out)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_tool(lambda: run(parse_args(sys.argv[1:] if argv is None else argv), sys.stdout), PROG, argv)


if __name__ == "__main__":
    sys.exit(main())
