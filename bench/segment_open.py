"""Start-up cost per sealed segment of a log (issue #21): lazy after a clean shutdown, opened and checked otherwise.

    .venv/bin/python bench/segment_open.py --segments 2000 --segment-kb 1024 --rounds 5

Writes one partition log of ``--segments`` rolled segments (``--segment-kb`` each, 10 KB records in batches of
about 4 KiB so each segment has Kafka's index density, ``index.interval.bytes`` 4096), shuts it down cleanly and
then loads it ``--rounds`` times each way, in this process (no broker):

- ``lazy``: a clean shutdown: the sealed segments are left to open on first use;
- ``trusted``: the segments opened, their indexes read and checked and the tail after the last index entry
  scanned, as every segment was after a clean shutdown before lazy loading (and as the segments below the
  recovery point still are after a crash): the log loaded with its recovery point at the log end and no marker.

Prints the median load time and the time per sealed segment; then the time of a first fetch from every sealed
segment of the lazily loaded log (what the deferred work costs when it is done). Data in the page cache.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from moldau.protocol.records import build_batch  # noqa: E402
from moldau.storage import Log, LogConfig  # noqa: E402


def build(dir: Path, segments: int, segment_bytes: int) -> int:
    cfg = LogConfig(segment_bytes=segment_bytes)
    log = Log(dir, cfg, new=True)
    value = os.urandom(10_000)
    data = build_batch([(None, value, None, 1_700_000_000_000)])
    while len(log.segments) <= segments:
        log.append_as_leader(bytearray(data), 0)
    leo = log.log_end_offset
    log.close(flush=True)
    return leo


def load_time(dir: Path, clean: bool, leo: int) -> tuple[float, Log]:
    start = time.perf_counter()
    if clean:
        log = Log(dir, LogConfig(), clean_shutdown=True)
    else:
        log = Log(dir, LogConfig(), recovery_point=leo, clean_shutdown=False)
    return time.perf_counter() - start, log


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--segments", type=int, default=2000)
    parser.add_argument("--segment-kb", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="moldau-segment-open-"))
    try:
        dir = root / "bench-0"
        leo = build(dir, args.segments, args.segment_kb << 10)
        sealed = args.segments
        rows = []
        for name, clean in (("trusted", False), ("lazy", True), ("trusted", False), ("lazy", True)):
            times = []
            for _ in range(args.rounds):
                t, log = load_time(dir, clean, leo)
                times.append(t)
                log.close(take_snapshot=True, flush=clean)
            median = statistics.median(times)
            rows.append(f"{name:8s} load {median * 1e3:8.1f} ms  ({median / sealed * 1e6:7.1f} us per sealed "
                        f"segment, {sealed} sealed, median of {args.rounds})")
            print(rows[-1], flush=True)
        _, log = load_time(dir, True, leo)
        start = time.perf_counter()
        for seg in log.segments[:-1]:
            log.read(seg.base_offset, 1)
        first_use = time.perf_counter() - start
        log.close(flush=True)
        print(f"first fetch from each lazily opened segment: {first_use / sealed * 1e6:.1f} us per segment")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
