"""Keeps the memory of the broker's large request and answer buffers mapped between requests (issue #21).

A Produce request or a follower's fetch answer of a busy broker is a buffer of several megabytes (bench/
many_partitions.py's 10,000-partition phase: 8-10 MB each), allocated as it arrives and freed once answered. glibc's
malloc serves such a size with a fresh ``mmap`` (above its mmap threshold, 128 KiB at first, raised on the fly up
to the largest size freed) or from the top of its heap, which it gives back to the kernel once more than its trim
threshold (twice the mmap threshold) is free there. Either way the next buffer's pages are new to the process: a
page fault per 4 KiB on first touch, ~2,000 per 8 MB, which on this VM cost more than copying the bytes (in one
process, receiving an 8 MB frame in 256 KiB reads: ~10 ms of CPU, ~3 ms once the memory is reused).

``keep_freed_buffers`` fixes the mmap threshold at ``MMAP_THRESHOLD`` (so buffers up to that size come from the
heap) and the trim threshold at ``TRIM_THRESHOLD`` (so up to that much free memory stays mapped at the heap's top
for the next buffer). Memory freed below the top is kept by malloc whatever these are; the cost is that a broker's
resident size stays near its peak of in-flight buffers, bounded by ``TRIM_THRESHOLD`` above what it holds.
An operator's own ``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_`` (glibc's environment variables) win:
with either set, nothing is changed. Not glibc (musl, macOS): nothing is changed.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys

log = logging.getLogger("moldau.server")

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's upper bound for it on 64-bit (HEAP_MAX_SIZE / 2)
TRIM_THRESHOLD = 128 * 1024 * 1024
ENVIRONMENT = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


def keep_freed_buffers(mmap_threshold: int = MMAP_THRESHOLD, trim_threshold: int = TRIM_THRESHOLD) -> bool:
    """Sets glibc malloc's mmap and trim thresholds for this process (see the module's docstring); True if it
    did. For a process the broker owns: it changes how the whole process allocates."""
    if not sys.platform.startswith("linux") or any(name in os.environ for name in ENVIRONMENT):
        return False
    libc_version = getattr(os, "confstr", None)
    try:
        if libc_version is None or not str(libc_version("CS_GNU_LIBC_VERSION") or "").startswith("glibc"):
            return False
        mallopt = ctypes.CDLL(None).mallopt  # the process's own libc, as broker/launcher.py and storage/ use it
    except (OSError, ValueError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # mallopt returns 1 on success; the mmap threshold first (setting it also stops glibc moving the thresholds).
    done = mallopt(M_MMAP_THRESHOLD, mmap_threshold) == 1 and mallopt(M_TRIM_THRESHOLD, trim_threshold) == 1
    if not done:
        log.warning("malloc tuning: mallopt refused the thresholds (%d, %d)", mmap_threshold, trim_threshold)
    return done
