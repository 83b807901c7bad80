"""Finishing a log cleaner swap that a crash interrupted (runs on the files, before a log opens its segments).

The cleaner replaces segments in three steps (Kafka's): it writes ``<base>.log.cleaned`` (+ indexes), renames the
three files to ``.swap`` (the commit point), renames the replaced segments to ``.deleted`` and finally renames the
``.swap`` files to their live names. At load:

- ``.cleaned`` files are removed (the cleaning had not committed: the old segments are intact);
- a ``<base>.log.swap`` wins: every live segment whose base offset lies in ``[base, next offset of the swap)``
  is removed and the swap file takes the live name. Its offset and time indexes are dropped and rebuilt (cheap,
  and it avoids trusting half-renamed index files); its ``.txnindex`` (aborted transactions, which cannot be
  rebuilt from the segment alone) was complete before the ``.log`` became a swap, so it is kept and renamed too;
- ``.deleted`` files are removed by the log's usual stray-file sweep.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from moldau.protocol.records import BATCH_HEADER_SIZE, MIN_BATCH_LENGTH, read_header
from moldau.storage.checkpoint import fsync_dir
from moldau.storage.segment import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    filename_prefix,
)
from moldau.storage.txn_index import TXN_INDEX_SUFFIX

logger = logging.getLogger(__name__)

_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


def _next_offset(path: Path, base: int) -> int:
    """One past the last offset of the complete batches in ``path`` (header reads only)."""
    next_offset = base
    size = path.stat().st_size
    with open(path, "rb") as f:
        fd = f.fileno()
        pos = 0
        while pos + BATCH_HEADER_SIZE <= size:
            h = read_header(os.pread(fd, BATCH_HEADER_SIZE, pos))
            if h.batch_length < MIN_BATCH_LENGTH or pos + h.total_size > size:
                break
            next_offset = h.last_offset + 1
            pos += h.total_size
    return next_offset


def recover_swaps(dir: Path) -> int:
    """Rolls back ``.cleaned`` and completes ``.swap`` replacements in a partition directory; returns how many
    swaps were completed."""
    swaps: list[int] = []
    live: list[int] = []
    for p in dir.iterdir():
        name = p.name
        if name.endswith(CLEANED_SUFFIX):
            p.unlink(missing_ok=True)
            continue
        stem = name.partition(".")[0]
        if len(stem) != 20 or not stem.isdigit():
            continue
        if name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
            swaps.append(int(stem))
        elif name.endswith(TXN_INDEX_SUFFIX + SWAP_SUFFIX):
            continue  # taken with its .log.swap below, removed without one
        elif name.endswith(SWAP_SUFFIX):
            p.unlink(missing_ok=True)  # an index of a swap: rebuilt after the rename
        elif name.endswith(LOG_SUFFIX):
            live.append(int(stem))
    for base in sorted(swaps):
        swap = dir / (filename_prefix(base) + LOG_SUFFIX + SWAP_SUFFIX)
        end = _next_offset(swap, base)
        for old in live:
            if base <= old < max(end, base + 1):
                for suffix in _SUFFIXES:
                    (dir / (filename_prefix(old) + suffix)).unlink(missing_ok=True)
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            (dir / (filename_prefix(base) + suffix)).unlink(missing_ok=True)
        txn_swap = dir / (filename_prefix(base) + TXN_INDEX_SUFFIX + SWAP_SUFFIX)
        if txn_swap.exists():
            os.replace(txn_swap, dir / (filename_prefix(base) + TXN_INDEX_SUFFIX))
        os.replace(swap, dir / (filename_prefix(base) + LOG_SUFFIX))
        logger.info("%s: completed the interrupted swap of cleaned segment %d (up to %d)", dir, base, end)
    for p in dir.glob("*" + TXN_INDEX_SUFFIX + SWAP_SUFFIX):
        p.unlink(missing_ok=True)  # no .log.swap: the cleaning had not committed
    if swaps:
        fsync_dir(dir)
    return len(swaps)
