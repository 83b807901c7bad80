"""Stand-in tasks for the faults that stopping a task must survive (tests of moldau.tasks and of shutdown steps)."""

from __future__ import annotations

import asyncio


async def stubborn(release: asyncio.Event) -> None:
    """Ignores every cancellation until `release` is set."""
    while not release.is_set():
        try:
            await release.wait()
        except asyncio.CancelledError:
            continue


async def loses_one_cancel() -> None:
    """A loop whose first cancellation was lost (Python 3.11's wait_for): it goes back to waiting for work."""
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        pass
    await asyncio.sleep(30)


async def release_all(release: asyncio.Event) -> None:
    """End of a test: lets the stubborn tasks end, and waits (bounded) for every other task."""
    release.set()
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    if others:
        await asyncio.wait(others, timeout=2.0)
