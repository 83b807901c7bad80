"""moldau.tasks.cancel_and_wait, and the rule that keeps Python 3.11's lossy asyncio.wait_for out of the runtime
code (a cancellation that arrives as the awaited operation completes is lost there: CPython gh-86296)."""

from __future__ import annotations

import ast
import asyncio
import time
from collections.abc import AsyncIterator, Coroutine
from pathlib import Path
from typing import Any

import pytest

from moldau.tasks import cancel_and_wait
from tests.unit.stubborn_tasks import loses_one_cancel, release_all, stubborn

ROOT = Path(__file__).resolve().parents[3]
# Command-line tools and the verification workloads run until they are done, not under a shutdown deadline.
TOOLS = ("broker/verify", "client/tools")


@pytest.fixture
async def release() -> AsyncIterator[asyncio.Event]:
    event = asyncio.Event()
    yield event
    await release_all(event)


async def _started(coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
    task = asyncio.create_task(coro)
    await asyncio.sleep(0)  # its first step runs (a task cancelled before it just ends)
    return task


async def test_tasks_end_and_their_outcomes_are_consumed() -> None:
    async def fails_when_cancelled() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            raise OSError("cleanup failed") from None

    tasks = [await _started(fails_when_cancelled()), await _started(loses_one_cancel()),
             await _started(asyncio.sleep(30))]
    t0 = time.monotonic()
    assert await cancel_and_wait(tasks, 5.0)
    assert time.monotonic() - t0 < 2.0  # one re-cancel (0.1 s) ends the task that lost its first cancel
    assert [t.done() for t in tasks] == [True, True, True]
    assert isinstance(tasks[0].exception(), OSError) and tasks[1].cancelled() and tasks[2].cancelled()


async def test_a_task_that_ignores_cancellation_is_given_up_after_the_timeout(release: asyncio.Event) -> None:
    task = await _started(stubborn(release))
    t0 = time.monotonic()
    assert not await cancel_and_wait([task], 0.3)
    assert 0.25 < time.monotonic() - t0 < 2.0 and not task.done()


async def test_the_callers_cancellation_goes_through(release: asyncio.Event) -> None:
    task = await _started(stubborn(release))
    caller = asyncio.create_task(cancel_and_wait([task]))
    await asyncio.sleep(0.05)
    caller.cancel()
    done, _ = await asyncio.wait({caller}, timeout=2.0)
    assert done and caller.cancelled()


def _wait_for_calls(path: Path) -> list[int]:
    return [node.lineno for node in ast.walk(ast.parse(path.read_text(), str(path)))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "wait_for"
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "asyncio"]


def test_the_rule_finds_a_wait_for(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("import asyncio\n\nasync def f(e):\n    await asyncio.wait_for(e.wait(), 1)\n")
    assert _wait_for_calls(probe) == [4]


def test_no_asyncio_wait_for_in_the_broker_or_the_client() -> None:
    """asyncio.timeout instead: it never loses the caller's cancellation, and costs no extra task."""
    files = [p for folder in ("broker", "client") for p in sorted((ROOT / folder).rglob("*.py"))
             if not str(p.relative_to(ROOT)).startswith(TOOLS)]
    assert len(files) > 100
    found = [f"{p.relative_to(ROOT)}:{line}" for p in files for line in _wait_for_calls(p)]
    assert found == []
