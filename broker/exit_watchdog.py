"""The last line of the shutdown bound: once SIGTERM has arrived, the process exits by a deadline whatever hangs.

``BrokerServer.shutdown`` bounds each of its steps, but a step it abandons may leave a thread behind (kazoo's
session close runs in the default executor), and the interpreter joins such threads at exit without a timeout.
The watchdog is a daemon thread: at ``controlled.shutdown.max.retries x controlled.shutdown.retry.backoff.ms +
SHUTDOWN_GRACE_S + WATCHDOG_SLACK_S`` after the signal it logs every thread's stack and ends the process with
``os._exit``: code 0 if the shutdown had finished (logs flushed, clean-shutdown marker written: only a leftover
thread held the exit up), else ``EXIT_SHUTDOWN_TIMEOUT`` (the next start recovers the logs, as after a crash).
"""

from __future__ import annotations

import faulthandler
import logging
import os
import sys
import threading
from collections.abc import Callable

from moldau.broker.config import BrokerConfig

log = logging.getLogger("moldau.server")

WATCHDOG_SLACK_S = 5.0  # time for the log flush and the interpreter's own exit after the bounded steps
EXIT_SHUTDOWN_TIMEOUT = 3


def shutdown_deadline_s(config: BrokerConfig, grace_s: float) -> float:
    retries = int(config.get("controlled.shutdown.max.retries"))
    backoff_s = int(config.get("controlled.shutdown.retry.backoff.ms")) / 1000
    return retries * backoff_s + grace_s + WATCHDOG_SLACK_S


def arm(deadline_s: float, finished: Callable[[], bool]) -> threading.Thread:
    """Starts the watchdog; it does nothing if the process has exited before `deadline_s`."""
    def watch() -> None:
        threading.Event().wait(deadline_s)
        done = finished()
        log.error("shutdown still running %.1fs after SIGTERM (%s); exiting now", deadline_s,
                  "logs already closed cleanly" if done else "logs not closed: the next start recovers them")
        for handler in logging.getLogger().handlers:
            handler.flush()
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        os._exit(0 if done else EXIT_SHUTDOWN_TIMEOUT)

    thread = threading.Thread(target=watch, name="shutdown-watchdog", daemon=True)
    thread.start()
    return thread
