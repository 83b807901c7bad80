"""The log cleaner alone: MB/s compacted on a log of 100-byte records where 10% of the keys are live.

    .venv/bin/python bench/cleaner.py                       # 1 GiB: 10,737,418 records, 1,073,741 keys
    .venv/bin/python bench/cleaner.py --mib 150 --compression 4 --key-len 36

Writes the records (batches of 100, keys drawn uniformly from records/10 keys so each is written ~10 times: after
cleaning ~10% of the records remain) into a Log in a temporary directory with 64 MiB segments, rolls, then runs
one LogCleaner.clean (offset map + recopy + swap) and reports MB/s of log cleaned (bytes read / wall time),
records/s and the size before/after. Keys are ``key-<n>`` padded to ``--key-len`` bytes (keys of 16 bytes or more
are MD5-hashed in the offset map, shorter ones are not). Runs in one process on one core; not part of the tests.
``write_input`` is shared with bench/cleaner_produce.py.
"""

from __future__ import annotations

import argparse
import random
import shutil
import struct
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from moldau.protocol.compression import compress  # noqa: E402
from moldau.protocol.records import encode_varint, update_crc  # noqa: E402
from moldau.storage.cleaner import LogCleaner  # noqa: E402
from moldau.storage.config import LogConfig  # noqa: E402
from moldau.storage.log import Log  # noqa: E402

MiB = 1 << 20
RECORD_BYTES = 100  # on disk, batch header share included
BATCH_RECORDS = 100
_HEADER = struct.Struct(">qiibIhiqqqhii")


class InputBuilder:
    """Encodes batches of same-shaped records straight from precomputed pieces (a few µs per batch instead of
    build_batch's per-record encoding), so a GiB of input takes seconds, not minutes."""

    def __init__(self, key_len: int, compression: int = 0) -> None:
        self.key_len = key_len
        self.compression = compression
        # record: attributes, ts delta 0, offset delta, key length, key, value length, value, 0 headers
        # ~9 bytes besides key and value: batch header share 0.6, attributes, timestamp delta, offset delta
        # (1.4 on average), value length 2, header count, record length 2
        self.value_len = RECORD_BYTES - 9 - len(encode_varint(key_len)) - key_len
        self.tail = encode_varint(self.value_len) + b"v" * self.value_len + b"\x00"
        self.prefixes = []
        for i in range(BATCH_RECORDS):
            body_len = 2 + len(encode_varint(i)) + len(encode_varint(key_len)) + key_len + len(self.tail)
            self.prefixes.append(encode_varint(body_len) + b"\x00\x00" + encode_varint(i) + encode_varint(key_len))

    def key(self, n: int) -> bytes:
        return (b"key-%d-" % n).ljust(self.key_len, b"k")[: self.key_len]

    def batch(self, keys: list[bytes], timestamp: int) -> bytes:
        n = len(keys)
        parts: list[bytes] = [b""] * (3 * n)
        parts[0::3] = self.prefixes[:n]
        parts[1::3] = keys
        parts[2::3] = [self.tail] * n
        body = b"".join(parts)
        if self.compression:
            body = compress(self.compression, body)
        out = bytearray(_HEADER.pack(0, 49 + len(body), -1, 2, 0, self.compression, n - 1, timestamp, timestamp,
                                     -1, -1, -1, n))
        out += body
        update_crc(out)
        return bytes(out)


def write_input(log: Log, mib: int, key_len: int = 11, compression: int = 0, seed: int = 7) -> int:
    """Appends ~``mib`` MiB of 100-byte records (10 versions per key on average) and rolls; returns the number
    of records."""
    records = mib * MiB // RECORD_BYTES
    builder = InputBuilder(key_len, compression)
    keyspace = [builder.key(n) for n in range(max(records // 10, 1))]
    rng = random.Random(seed)
    now = int(time.time() * 1000)
    for start in range(0, records, BATCH_RECORDS):
        n = min(BATCH_RECORDS, records - start)
        log.append_as_leader(builder.batch(rng.choices(keyspace, k=n), now), 0)
    log.roll()
    return records


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=1024, help="log size to write, MiB of 100-byte records")
    ap.add_argument("--compression", type=int, default=0, help="codec id 0-4")
    ap.add_argument("--key-len", type=int, default=11, help="key length in bytes (>= 16: hashed in the map)")
    ap.add_argument("--dedupe-buffer", type=int, default=256 * MiB,
                    help="log.cleaner.dedupe.buffer.size (the default fits the keys of 1 GiB)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="moldau-cleaner-bench-"))
    try:
        cfg = LogConfig(segment_bytes=64 * MiB, file_delete_delay_ms=0)
        log = Log(tmp / "bench-0", cfg)
        t0 = time.monotonic()
        records = write_input(log, args.mib, args.key_len, args.compression)
        before = log.size
        print(f"wrote {records:,} records, {before / 1e6:.1f} MB in {time.monotonic() - t0:.1f}s "
              f"({len(log.segments) - 1} segments)")
        log.config.cleanup_policy = "compact"  # after writing: a compacted log checks every record for a key
        cleaner = LogCleaner(args.dedupe_buffer)
        t0 = time.monotonic()
        prepared = cleaner.clean(log, int(time.time() * 1000))
        elapsed = time.monotonic() - t0
        assert prepared is not None
        st = prepared.stats
        print(f"cleaned {st.bytes_read / 1e6:.1f} MB in {elapsed:.2f}s: {st.bytes_read / 1e6 / elapsed:.1f} MB/s, "
              f"{st.records_read / elapsed:,.0f} records/s; {st.records_removed:,} records removed; "
              f"log {before / 1e6:.1f} -> {log.size / 1e6:.1f} MB")
        if prepared.end_offset < log.log_end_offset - 1:
            print(f"note: the offset map filled up; cleaned up to offset {prepared.end_offset:,} only")
        log.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
