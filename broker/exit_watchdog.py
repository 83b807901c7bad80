"""The last line of the shutdown bound: once SIGTERM has arrived, the process exits by a deadline whatever hangs.

``BrokerServer.shutdown`` bounds each of its steps, but a step it abandons may leave a thread behind (kazoo's
session close runs in the default executor), and the interpreter joins such threads at exit without a timeout.
The watchdog is a daemon thread: at ``controlled.shutdown.max.retries x controlled.shutdown.retry.backoff.ms +
SHUTDOWN_GRACE_S + WATCHDOG_SLACK_S`` after the signal it logs every thread's stack and ends the process with
``os._exit``: code 0 if the shutdown had finished (logs flushed, clean-shutdown marker written: only a leftover
thread held the exit up), else ``EXIT_SHUTDOWN_TIMEOUT`` (the next start recovers the logs, as after a crash).

Except while the logs are being closed and that makes progress (``ShutdownProgress``): ending a clean shutdown
that is closing its logs one after another turns it into a crash whose recovery costs far more than the rest of
the close. A broker with 10,000 partitions created a file or two per log at close (250-550 us each on ext4 after
a burst of deletions) and was ended at 25 s with its logs half closed. So at the deadline, and every
``PROGRESS_CHECK_S`` after it, the watchdog waits on if logs were closed since its last look, or the file-system
sync runs (an exit would wait for that system call anyway); a log close that stalls is ended as before.
"""

from __future__ import annotations

import faulthandler
import logging
import os
import sys
import threading
from collections.abc import Callable

from moldau.broker.config import BrokerConfig
from moldau.storage.log_manager import ShutdownProgress

log = logging.getLogger("moldau.server")

WATCHDOG_SLACK_S = 5.0  # time for the log flush and the interpreter's own exit after the bounded steps
EXIT_SHUTDOWN_TIMEOUT = 3
PROGRESS_CHECK_S = 5.0  # past the deadline, how long the log close may go without closing a log



def shutdown_deadline_s(config: BrokerConfig, grace_s: float) -> float:
    retries = int(config.get("controlled.shutdown.max.retries"))
    backoff_s = int(config.get("controlled.shutdown.retry.backoff.ms")) / 1000
    return retries * backoff_s + grace_s + WATCHDOG_SLACK_S


def arm(deadline_s: float, finished: Callable[[], bool], progress: ShutdownProgress | None = None,
        check_s: float = PROGRESS_CHECK_S) -> threading.Thread:
    """Starts the watchdog; it does nothing if the process has exited before `deadline_s`. With ``progress``, a log
    close that is still making progress at the deadline is waited for (see the module's doc)."""
    def watch() -> None:
        pause = threading.Event().wait
        pause(deadline_s)
        waited = deadline_s
        last = progress.logs_closed if progress is not None else -1
        while progress is not None and last >= 0 and not finished():
            pause(check_s)
            waited += check_s
            closed, syncing = progress.logs_closed, progress.syncing
            if finished() or (closed == last and not syncing):
                break
            log.warning("shutdown still closing logs %.0f s after SIGTERM (%d of %d closed, %d in the last %.0f s%s);"
                        " waiting on", waited, closed, progress.logs_total, closed - last, check_s,
                        ", syncing the file system" if syncing else "")
            last = closed
        done = finished()
        log.error("shutdown still running %.1fs after SIGTERM (%s); exiting now", waited,
                  "logs already closed cleanly" if done else "logs not closed: the next start recovers them")
        for handler in logging.getLogger().handlers:
            handler.flush()
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        os._exit(0 if done else EXIT_SHUTDOWN_TIMEOUT)

    thread = threading.Thread(target=watch, name="shutdown-watchdog", daemon=True)
    thread.start()
    return thread
