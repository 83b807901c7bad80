"""The broker's partition state leaves CPython's full garbage collections once it settles (broker/gc_freeze.py):
after a quiet period, or at most a bound into a burst of changes; young garbage is collected, not frozen."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import pytest

from moldau.broker.gc_freeze import YOUNG_THRESHOLD, GcFreezer, collect_and_freeze, raise_young_threshold


@pytest.fixture(autouse=True)
def _unfreeze() -> Iterator[None]:
    yield
    gc.unfreeze()


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


async def _until(condition: object, timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():  # type: ignore[operator]
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


def test_collect_and_freeze_frees_cycles_and_freezes_the_living() -> None:
    a, b = Node(), Node()
    a.other, b.other = b, a
    dead = weakref.ref(a)
    del a, b  # a reference cycle: only the collector frees it
    kept = Node()
    collected, frozen, _ = collect_and_freeze(full=False)
    assert dead() is None and collected >= 2
    assert frozen == gc.get_freeze_count() > 0
    assert not any(o is kept for o in gc.get_objects())  # out of every generation the collector visits
    # A cycle of frozen objects that dies later stays through plain collections and new-object freezes; a full
    # freeze, which unfreezes first, frees it.
    c, d = Node(), Node()
    c.other, d.other = d, c
    collect_and_freeze(full=False)
    later = weakref.ref(c)
    del c, d
    gc.collect()
    collect_and_freeze(full=False)
    assert later() is not None
    collect_and_freeze(full=True)
    assert later() is None


def test_a_new_object_freeze_collects_only_the_young_generations() -> None:
    """Between full freezes only generations 0 and 1 are collected: what reached the old generation since the
    last freeze (a LeaderAndIsr's partition state) is frozen without a full collection's pause."""
    collect_and_freeze(full=True)
    a, b = Node(), Node()
    a.other, b.other = b, a
    gc.collect()  # they survive into the old generation, not frozen
    old = weakref.ref(a)
    del a, b
    c, d = Node(), Node()
    c.other, d.other = d, c
    young = weakref.ref(c)
    del c, d
    collect_and_freeze(full=False)
    assert young() is None
    assert old() is not None  # frozen: freed by the next full freeze
    collect_and_freeze(full=True)
    assert old() is None


async def test_freezes_once_changes_pause() -> None:
    calls: list[bool] = []
    now = [0.0]
    freezer = GcFreezer(asyncio.get_running_loop(), quiet_s=0.05, max_delay_s=0.5, full_every_s=100,
                        clock=lambda: now[0], freeze=lambda full: (calls.append(full), (0, 0, 0.0))[1])
    for _ in range(1000):  # one burst: one freeze, after it
        freezer.changed()
    assert calls == []
    now[0] = 0.06
    await _until(lambda: calls == [True])  # the first one sees everything
    assert freezer.freezes == 1
    # Changes that never pause are frozen at the latest max_delay_s into the burst.
    start = now[0] = 1.0
    freezer.changed()
    for step in range(1, 200):
        now[0] = start + step * 0.01
        freezer.changed()
        await asyncio.sleep(0.005)
        if len(calls) == 2:
            break
    assert calls == [True, False] and now[0] - start >= 0.5  # new objects only: no full one for 100 s
    now[0] = 200.0
    freezer.changed()
    now[0] = 200.1
    await _until(lambda: len(calls) == 3)
    assert calls[2] is True
    freezer.close()


def _young_collections_while_allocating(n: int) -> int:
    """Young collections while ``n`` container objects are made and kept (as a request's decoded entries are)."""
    count = [0]

    def counted(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            count[0] += 1

    gc.collect()
    gc.callbacks.append(counted)
    try:
        kept = [[] for _ in range(n)]  # type: ignore[var-annotated]
    finally:
        gc.callbacks.remove(counted)
    assert len(kept) == n
    return count[0]


def test_the_raised_young_threshold_lets_a_request_worth_of_objects_pass_without_a_collection() -> None:
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, before[1], before[2])  # CPython's default
        assert _young_collections_while_allocating(5000) >= 5
        assert raise_young_threshold() == (700, before[1], before[2])
        assert gc.get_threshold() == (YOUNG_THRESHOLD, before[1], before[2])  # the older generations' unchanged
        assert _young_collections_while_allocating(YOUNG_THRESHOLD // 2) == 0
        raise_young_threshold(500)  # never lowers it
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD
    finally:
        gc.set_threshold(*before)
