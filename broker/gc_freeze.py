"""Keeps the broker's long-lived partition state out of CPython's full garbage collections (issue #21).

A full (generation 2) collection visits every object the collector tracks, and a broker's partitions are a few
hundred thousand of them per 10,000 partition replicas: logs, segments, indexes, follower states, dicts. With
10,000 partitions on three brokers (bench/many_partitions.py) each broker paused up to 650 ms per full
collection and spent 3.1-3.7 s in them over one run; an in-process replica manager with 10,000 partitions takes
~320 ms per full collection. Those pauses stall every replication round in flight.

The state settles after start-up and after each burst of LeaderAndIsr changes. Once it has (``quiet_s`` without a
change, or ``max_delay_s`` into a burst), the broker collects what the collector still sees and moves every
surviving object to CPython's permanent generation (``gc.freeze``), so later full collections visit only what
was allocated since: in the same run, the automatic full collections took 30-100 ms instead of 300-650 ms.
Frozen objects are still freed by reference counting; only a reference cycle among them that becomes garbage
stays, until a *full* freeze (every ``full_every_s`` at most) unfreezes and collects everything first. A full
freeze costs what a full collection did (~1 s at 10,000 partitions on a loaded machine), so it is rare.

The freezes in between collect only the young generations (0 and 1) before freezing: the old generation's
unfrozen objects are what the burst just built (a LeaderAndIsr of 10,010 partitions: ~150,000 objects), a full
collection of them found nothing to free in the runs of bench/many_partitions.py and paused the event loop
150-530 ms a second after each failover's LeaderAndIsr, while clients were looking for the new leaders (1 ms
instead in an in-process LeaderAndIsr of 10,000 partitions). A cycle among them that was already garbage stays
until the next full freeze, like one that dies after being frozen.

The broker's own process also collects its young generation less often (``raise_young_threshold``: every
``YOUNG_THRESHOLD`` allocations of container objects instead of CPython's 700). A replication round over thousands
of partitions allocates a few container objects per partition that live until the request is answered (decoded
request and answer entries, read results). At 700 the young collections kept visiting and promoting them, every
tenth one collected the middle generation too, and now and then all unfrozen old objects (the producer states and
fetch-session entries made since the last freeze) were visited: in bench/many_partitions.py's 10,000-partition
produce phase the three brokers spent ~0.2 s of their ~3 s of CPU in collections, ~0.06 s at 50,000 (and ~0.08 s
-> 0 in the 10-partition phase). A collection costs what it visits, the young objects still alive (those already
freed by reference counting are not): single collections in those phases took up to ~27 ms at 50,000, main's full
ones up to ~47 ms; while 10,000 partitions were created, up to ~150 ms against main's ~280 ms (docs/benchmarks.md,
branch p10k8).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Callable

log = logging.getLogger("moldau.gc")


YOUNG_THRESHOLD = 50_000


def raise_young_threshold(young: int = YOUNG_THRESHOLD) -> tuple[int, int, int]:
    """Collect the young generation every ``young`` allocations (the older generations' thresholds unchanged);
    returns the thresholds before. For a process the broker owns (see the module's docstring)."""
    before: tuple[int, int, int] = gc.get_threshold()
    if young > before[0]:
        gc.set_threshold(young, before[1], before[2])
    return before


def collect_and_freeze(full: bool) -> tuple[int, int, float]:
    """(objects collected, objects frozen, seconds): a collection of the young generations (``full``: of every
    object, frozen ones back in sight first), then every survivor into the permanent generation."""
    start = time.perf_counter()
    if full:
        gc.unfreeze()
        collected = gc.collect()
    else:
        collected = gc.collect(1)
    gc.freeze()
    return collected, gc.get_freeze_count(), time.perf_counter() - start


class GcFreezer:
    """Freezes the partition state once changes to it pause (see the module's docstring). ``changed()`` is cheap
    enough to call for each partition of a LeaderAndIsr."""

    def __init__(self, loop: asyncio.AbstractEventLoop, quiet_s: float = 1.0, max_delay_s: float = 10.0,
                 full_every_s: float = 600.0, clock: Callable[[], float] = time.monotonic,
                 freeze: Callable[[bool], tuple[int, int, float]] = collect_and_freeze) -> None:
        self._loop = loop
        self.quiet_s = quiet_s
        self.max_delay_s = max_delay_s
        self.full_every_s = full_every_s
        self._last_full: float | None = None
        self._clock = clock
        self._freeze = freeze
        self._first: float | None = None  # when the pending burst of changes began
        self._last = 0.0
        self._handle: asyncio.TimerHandle | None = None
        self.freezes = 0

    def changed(self) -> None:
        """The partition state changed (a partition added, its role changed): freeze once things settle."""
        now = self._clock()
        self._last = now
        if self._first is None:
            self._first = now
            self._handle = self._loop.call_later(self.quiet_s, self._tick)

    def _tick(self) -> None:
        first = self._first
        if first is None:
            return
        now = self._clock()
        wait = min(self.quiet_s - (now - self._last), self.max_delay_s - (now - first))
        if wait > 0:
            self._handle = self._loop.call_later(wait, self._tick)
            return
        self._first, self._handle = None, None
        self.freeze_now()

    def freeze_now(self) -> None:
        now = self._clock()
        full = self._last_full is None or now - self._last_full >= self.full_every_s
        if full:
            self._last_full = now
        collected, frozen, seconds = self._freeze(full)
        self.freezes += 1
        log.info("partition state settled: %d objects collected, %d frozen out of full collections (%s, %.0f ms)",
                 collected, frozen, "everything" if full else "new objects", seconds * 1000)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._first = None
