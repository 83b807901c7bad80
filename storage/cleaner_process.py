"""``python -m moldau.storage.cleaner_process <parent pid> <niceness>``: runs one cleaning in its own process.

The broker's cleaner starts this per cleaning (broker/log_cleaner.py) so the CPU-bound work runs in an interpreter
of its own: on a thread it would hold the broker's GIL, and every produce or fetch request would first wait for
the cleaner to let go of it. Reads a pickled :class:`~moldau.storage.cleaner_job.CleanJob` on stdin, writes the
pickled ``("ok", JobResult | None)`` or ``("error", exception)`` to stdout. It dies with the broker (a cleaning
must not go on writing files under a restarted broker). ``niceness`` (log.cleaner.nice) lowers its CPU priority
so that, when the cores are busy, the broker's request handling runs first and compaction takes what is left.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys

from moldau.storage.cleaner_job import run_job

PR_SET_PDEATHSIG = 1


def _die_with_parent(parent_pid: int) -> None:
    if sys.platform == "linux":
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)


def main() -> None:
    _die_with_parent(int(sys.argv[1]))
    if int(sys.argv[2]) > 0:
        os.nice(int(sys.argv[2]))
    job = pickle.load(sys.stdin.buffer)
    try:
        out: tuple[str, object] = ("ok", run_job(job))
    except Exception as exc:  # reported to the broker, which logs it or marks the log uncleanable
        out = ("error", exc)
    pickle.dump(out, sys.stdout.buffer, protocol=pickle.HIGHEST_PROTOCOL)
    sys.stdout.buffer.flush()


if __name__ == "__main__":
    main()
