"""The log cleaner alone: MB/s compacted on a log of 100-byte records where 10% of the keys are live.

    .venv/bin/python bench/cleaner.py                       # 150 MB: 1,500,000 records, 150,000 keys
    .venv/bin/python bench/cleaner.py --mb 50 --compression 4

Writes the records (batches of 100, keys drawn so each key is written ~10 times: after cleaning ~10% of the
records remain) into a Log in a temporary directory with 64 MiB segments, rolls, then runs one
LogCleaner.clean (offset map + recopy + swap) and reports MB/s of log cleaned (bytes read / wall time), records/s,
and the size before/after. Runs in one process on one core; not part of the tests.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from moldau.protocol.records import build_batch  # noqa: E402
from moldau.storage.cleaner import LogCleaner  # noqa: E402
from moldau.storage.config import LogConfig  # noqa: E402
from moldau.storage.log import Log  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=150, help="log size to write, MB of 100-byte records")
    ap.add_argument("--compression", type=int, default=0, help="codec id 0-4")
    ap.add_argument("--dedupe-buffer", type=int, default=128 << 20)
    args = ap.parse_args()
    records = args.mb * 1_000_000 // 100
    keys = max(records // 10, 1)
    tmp = Path(tempfile.mkdtemp(prefix="moldau-cleaner-bench-"))
    try:
        cfg = LogConfig(segment_bytes=64 << 20, cleanup_policy="compact", file_delete_delay_ms=0)
        log = Log(tmp / "bench-0", cfg)
        rng = random.Random(7)
        value = b"x" * 70  # key ~12 B + value 70 B + record overhead ~10 B + batch share ~ 100 B on disk
        t0 = time.monotonic()
        now = int(time.time() * 1000)
        for _ in range(0, records, 100):
            recs = [(b"key-%07d" % rng.randrange(keys), value, None, now) for _i in range(100)]
            log.append_as_leader(build_batch(recs, compression=args.compression), 0)
        log.roll()
        before = log.size
        print(f"wrote {records:,} records, {before / 1e6:.1f} MB in {time.monotonic() - t0:.1f}s "
              f"({len(log.segments) - 1} segments)")
        cleaner = LogCleaner(args.dedupe_buffer)
        t0 = time.monotonic()
        prepared = cleaner.clean(log, int(time.time() * 1000))
        elapsed = time.monotonic() - t0
        assert prepared is not None
        st = prepared.stats
        print(f"cleaned {st.bytes_read / 1e6:.1f} MB in {elapsed:.2f}s: {st.bytes_read / 1e6 / elapsed:.1f} MB/s, "
              f"{st.records_read / elapsed:,.0f} records/s; {st.records_removed:,} records removed; "
              f"log {before / 1e6:.1f} -> {log.size / 1e6:.1f} MB")
        log.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
