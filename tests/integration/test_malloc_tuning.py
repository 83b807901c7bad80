"""glibc's malloc thresholds of a broker's own process (broker/malloc_tuning.py): once set, a freed multi-megabyte
buffer's memory is reused by the next one instead of being faulted in afresh; an operator's MALLOC_*_ environment
variables are left to glibc. Each case runs in a fresh interpreter: the thresholds are process-wide."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not str(os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc"),
    reason="glibc only")

SCRIPT = """
import resource, sys
from moldau.broker.malloc_tuning import keep_freed_buffers

def faults_per_buffer():
    sizes = [8 * 1024 * 1024 + (i * 7 % 20) * 12289 for i in range(20)]  # 8 MB requests of various sizes
    bytearray(max(sizes))  # the first one may fault its pages in (the heap grows once); freed at once
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for size in sizes:
        buf = bytearray(size)  # zeroed: every page touched
        del buf
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / len(sizes)

tuned = keep_freed_buffers() if sys.argv[1] == "tune" else False
print(tuned, faults_per_buffer())
"""


def _run(env: dict[str, str], tune: bool = True) -> tuple[bool, float]:
    """(whether the thresholds were set, page faults per 8 MB buffer) in a fresh interpreter."""
    out = subprocess.run([sys.executable, "-c", SCRIPT, "tune" if tune else "plain"], env=env, capture_output=True,
                         text=True, timeout=60, check=True).stdout.split()
    return out[0] == "True", float(out[1])


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env.update(extra)
    return env


def test_freed_large_buffers_are_reused_without_page_faults() -> None:
    tuned, after = _run(_env())
    _, untuned = _run(_env(), tune=False)
    assert tuned
    # untuned, a good part of each 8 MB buffer is fresh pages (an mmap, or heap memory trimmed after the last free:
    # ~100-2,000 faults each, as glibc's moving thresholds happen to stand); tuned, the previous buffer's memory
    assert after < 10, (after, untuned)
    assert untuned > 40, untuned


def test_the_operators_malloc_environment_is_left_alone() -> None:
    tuned, after = _run(_env(MALLOC_TRIM_THRESHOLD_="131072"))
    assert not tuned
    assert after > 200, after  # glibc's own behaviour, with the operator's small trim threshold: fresh pages
