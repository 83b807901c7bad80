"""Stopping background tasks without losing the caller's own cancellation (client and broker alike).

The idiom ``task.cancel(); try: await task; except CancelledError: pass`` has two faults. If the *caller* is
cancelled while it waits (a shutdown step's deadline), the ``except`` swallows the caller's cancellation too: the
caller returns as if it had finished, so a deadline around it never takes effect. And a task that does not end at
its first cancel keeps the caller waiting without bound: Python 3.11's ``asyncio.wait_for`` loses a cancellation
that arrives as the awaited operation completes (CPython gh-86296), and a loop around it carries on. Loops use
``asyncio.timeout`` for that reason; ``cancel_and_wait`` covers the rest.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

RECANCEL_S = 0.1  # a task still running this long after a cancel is cancelled again (one cancel may be lost)


async def cancel_and_wait(tasks: Iterable[asyncio.Future[Any]], timeout_s: float | None = None) -> bool:
    """Cancels `tasks` and waits until they end, at most `timeout_s` (None: no limit); True if all ended.

    A task still running is cancelled again every ``RECANCEL_S``. The tasks' outcomes (result, error,
    cancellation) are consumed, never raised; the caller's own cancellation always propagates (``asyncio.wait``
    never swallows it), leaving the tasks cancelled."""
    loop = asyncio.get_running_loop()
    end = None if timeout_s is None else loop.time() + timeout_s
    every = list(tasks)
    pending = {t for t in every if not t.done()}
    while pending:
        for task in pending:
            task.cancel()
        wait = RECANCEL_S if end is None else min(RECANCEL_S, end - loop.time())
        if wait <= 0:
            break
        _, pending = await asyncio.wait(pending, timeout=wait)
    for task in every:
        if task.done() and not task.cancelled():
            task.exception()  # consumed: the failure of a task being stopped is not the caller's
    return not pending
