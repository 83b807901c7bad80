"""Delayed operations (Kafka's DelayedOperation + DelayedOperationPurgatory).

A request that cannot be answered yet (produce with acks=all waiting for the ISR, fetch waiting for
min_bytes, ...) becomes a `DelayedOperation` parked in a `Purgatory` under one or more *watch keys* (usually a
topic-partition). Whoever changes the state the operation waits for (an append moves the log end offset, the
high watermark advances, ...) calls `purgatory.check_and_complete(key)`, which asks every operation watching
that key to `try_complete()`. An operation still waiting when its delay runs out is forced complete by the
timer and then told `on_expiration()`.

Life cycle of one operation (all on the broker's event loop; the completion flag is also lock-protected, so a
thread calling in cannot break the exactly-once guarantee):

    try_complete()   -- subclass: check the condition; if met, call force_complete() and return its result
    force_complete() -- first caller wins: marks completed, cancels the timeout, leaves every watch list,
                        runs on_complete() exactly once; later callers get False
    on_complete()    -- subclass: build and send the response
    on_expiration()  -- subclass hook, after on_complete() when completion came from the timeout

Ordered watch lists (issue #21): an operation may name, per key, a threshold the key's state must reach
(`threshold(key)`, e.g. the offset the high watermark must pass) and say whether it is still below it
(`blocked_on(key)`). While the thresholds of a key's watchers are non-decreasing in the order they were watched
(acks=all produces on one partition: appends get increasing offsets), `check_and_complete(key)` stops at the
first operation still blocked on that key, since every later one waits for at least as much: a high-watermark
move costs the operations it completes plus one, not a scan of everything waiting. A key whose thresholds ever
go backwards (a retried duplicate batch answers an older offset) is scanned in full until its list empties.

Completed operations leave all their watch lists at once (not lazily as in Kafka), so an operation completed
via key A does not linger in key B's list; no purge pass is needed and memory is bounded by the pending
operations.

Time comes from an injected `Timer`: `LoopTimer` in the broker (loop.call_later), `ManualTimer` in tests.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import threading
from collections.abc import Callable, Hashable, Iterable
from typing import Protocol

log = logging.getLogger(__name__)


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Timer(Protocol):
    """Runs `callback` once after `delay_ms`, unless the returned handle is cancelled first."""

    def schedule(self, delay_ms: float, callback: Callable[[], None]) -> TimerHandle: ...


class LoopTimer:
    """Timer on an asyncio loop (call_later). Callbacks run on the loop thread."""

    __slots__ = ("_loop",)

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop if loop is not None else asyncio.get_running_loop()

    def schedule(self, delay_ms: float, callback: Callable[[], None]) -> TimerHandle:
        return self._loop.call_later(max(0.0, delay_ms) / 1000.0, callback)


def _nothing() -> None:
    pass


class _ManualHandle:
    __slots__ = ("deadline_ms", "callback", "cancelled")

    def __init__(self, deadline_ms: float, callback: Callable[[], None]) -> None:
        self.deadline_ms = deadline_ms
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        # Drop the callback (and what it references) now, as asyncio's TimerHandle does; the heap entry stays
        # until its deadline passes.
        self.cancelled = True
        self.callback = _nothing


class ManualTimer:
    """A timer driven by hand, for tests: `advance(ms)` runs the due callbacks in deadline order (ties in the
    order they were scheduled), including callbacks scheduled by callbacks that fall due within the
    advance."""

    def __init__(self, now_ms: float = 0.0) -> None:
        self.now_ms = now_ms
        self._heap: list[tuple[float, int, _ManualHandle]] = []
        self._seq = itertools.count()

    def schedule(self, delay_ms: float, callback: Callable[[], None]) -> TimerHandle:
        handle = _ManualHandle(self.now_ms + max(0.0, delay_ms), callback)
        heapq.heappush(self._heap, (handle.deadline_ms, next(self._seq), handle))
        return handle

    def advance(self, ms: float) -> int:
        """Move time forward by `ms`; returns how many callbacks ran."""
        target = self.now_ms + ms
        fired = 0
        while self._heap and self._heap[0][0] <= target:
            deadline, _, handle = heapq.heappop(self._heap)
            if handle.cancelled:
                continue
            self.now_ms = max(self.now_ms, deadline)
            handle.callback()
            fired += 1
        self.now_ms = target
        return fired

    @property
    def pending(self) -> int:
        """Scheduled callbacks not yet run or cancelled."""
        return sum(1 for _, _, h in self._heap if not h.cancelled)


class DelayedOperation:
    """An operation that completes when a condition holds or when `delay_ms` has passed.

    Subclasses implement `try_complete()` (call `force_complete()` when satisfied and return its result) and
    `on_complete()` (send the response; it must read the current state, since it also runs on expiry), and may
    override `on_expiration()`.
    """

    __slots__ = ("delay_ms", "_completed", "_lock", "_timeout", "_purgatory", "_keys", "__weakref__")

    def __init__(self, delay_ms: float) -> None:
        self.delay_ms = delay_ms
        self._completed = False
        self._lock = threading.Lock()
        self._timeout: TimerHandle | None = None
        self._purgatory: Purgatory | None = None
        self._keys: tuple[Hashable, ...] = ()

    @property
    def is_completed(self) -> bool:
        return self._completed

    def try_complete(self) -> bool:
        """Check whether the operation can complete; if so call and return `force_complete()`."""
        raise NotImplementedError

    def on_complete(self) -> None:
        """Send the result. Runs exactly once, whether the operation completed or expired."""
        raise NotImplementedError

    def on_expiration(self) -> None:
        """Called after on_complete() when the operation completed because its delay ran out."""

    def threshold(self, key: Hashable) -> int | None:
        """The value `key`'s state must reach for this operation, if it waits for one (ordered watch lists);
        None: no order, every check of the key asks this operation."""
        return None

    def blocked_on(self, key: Hashable) -> bool:
        """After a failed try_complete(): True while `key`'s state is still below `threshold(key)`."""
        return False

    def force_complete(self) -> bool:
        """Complete now. Returns True only for the one caller that actually completed the operation."""
        with self._lock:
            if self._completed:
                return False
            self._completed = True
        if self._timeout is not None:
            self._timeout.cancel()
            self._timeout = None
        if self._purgatory is not None:
            self._purgatory._unwatch(self)
        self.on_complete()
        return True

    def __repr__(self) -> str:
        state = "completed" if self._completed else "pending"
        return f"{type(self).__name__}(delay_ms={self.delay_ms}, {state})"


class Purgatory:
    """Pending delayed operations of one kind (e.g. "Produce", "Fetch"), watched by key."""

    def __init__(self, name: str, timer: Timer, broker_id: int = -1) -> None:
        # broker_id is for introspection only: log lines get the broker tag from the logging setup.
        self.name = name
        self.broker_id = broker_id
        self._timer = timer
        # key -> {id(op): op}, insertion-ordered, of the pending operations watching it. Keyed by id() so that
        # subclasses may be dataclasses with value equality (unhashable).
        self._watchers: dict[Hashable, dict[int, DelayedOperation]] = {}
        # key -> the largest threshold watched under it while its watchers' thresholds are non-decreasing in
        # watch order; None once they are not (or an operation has none). Dropped with the key's watch list.
        self._ordered: dict[Hashable, int | None] = {}
        self._pending: dict[int, DelayedOperation] = {}
        self._shut_down = False
        self.expired = 0  # operations completed by their timeout (a counter for metrics and tests)

    # --- public API

    def try_complete_else_watch(self, op: DelayedOperation, keys: Iterable[Hashable]) -> bool:
        """Complete `op` now if it can; otherwise watch it under every key and start its timeout.

        Returns True if `op` was completed by this call. `keys` must not be empty.
        """
        keys = tuple(dict.fromkeys(keys))  # de-duplicated, order kept
        if not keys:
            raise ValueError("a delayed operation needs at least one watch key")
        if op._purgatory is not None or op._keys:
            raise ValueError(f"{op!r} is already watched")
        if self._shut_down:
            raise RuntimeError(f"purgatory {self.name} is shut down")
        if self._try(op):
            return True
        if op.is_completed:
            return False
        op._purgatory = self
        op._keys = keys
        for key in keys:
            self._watch(key, op)
        self._pending[id(op)] = op
        # The state may have changed between the first check and watching (a caller on another thread, or a
        # try_complete() that triggered a check itself): check once more now that any change will find the op.
        if self._try(op):
            return True
        if op.is_completed:  # completed elsewhere while we were adding it: make sure nothing is left behind
            self._unwatch(op)
        else:
            op._timeout = self._timer.schedule(op.delay_ms, lambda: self._expire(op))
        return False

    def time_out(self, op: DelayedOperation) -> None:
        """Pending here, and completed by its timeout unless something completes it first, but on no watch list:
        for an operation woken by its own means (a fetch session's parked fetch: the session tells it of
        changes). The caller has just found it cannot complete (in the same step, so nothing changed since)."""
        if op._purgatory is not None or op._keys:
            raise ValueError(f"{op!r} is already watched")
        if self._shut_down:
            raise RuntimeError(f"purgatory {self.name} is shut down")
        if op.is_completed:
            return
        op._purgatory = self
        self._pending[id(op)] = op
        op._timeout = self._timer.schedule(op.delay_ms, lambda: self._expire(op))

    def check_and_complete(self, key: Hashable) -> int:
        """Ask every operation watching `key` to try to complete; returns how many completed."""
        watchers = self._watchers.get(key)
        if not watchers:
            return 0
        completed = 0
        ordered = self._ordered.get(key) is not None
        for op in list(watchers.values()):  # completing ops leave the dict while we iterate
            if op.is_completed:
                continue
            if self._try(op):
                completed += 1
            elif ordered and op.blocked_on(key):
                break  # every later watcher of this key waits for at least as much
        return completed

    def check_and_complete_many(self, keys: Iterable[Hashable]) -> int:
        """``check_and_complete`` of each key, for state changes that all happened before this call (the high
        watermarks one follower fetch moved): an operation watching several of the keys is asked once, as a
        second try would find what the first found. Its watch lists are still walked in order, so an ordered
        key's scan stops at the first operation blocked on it. Returns how many completed."""
        completed = 0
        tried: set[int] = set()
        for key in keys:
            watchers = self._watchers.get(key)
            if not watchers:
                continue
            ordered = self._ordered.get(key) is not None
            for op in list(watchers.values()):
                if op.is_completed:
                    continue
                if id(op) not in tried:
                    tried.add(id(op))
                    if self._try(op):
                        completed += 1
                        continue
                if ordered and op.blocked_on(key):
                    break
        return completed

    def rewatch(self, op: DelayedOperation, keys: Iterable[Hashable]) -> None:
        """A pending operation watched here watches ``keys`` from now on instead of its keys so far (it keeps its
        timeout). For an operation that knows which key alone can move it on, e.g. an acks=all request settled
        partition by partition in request order, which watches only the partition it waits for: watching all
        of them cost a watch list entry per partition, made and dropped again, for every request. It may be
        called from the operation's ``try_complete`` while a check walks a watch list."""
        if op._purgatory is not self or op.is_completed:
            return
        keys = tuple(dict.fromkeys(keys))
        if not keys:
            raise ValueError("a delayed operation needs at least one watch key")
        self._leave(op)
        op._keys = keys
        for key in keys:
            self._watch(key, op)

    def watched(self) -> int:
        """Total watch-list entries (an operation watched under n keys counts n times)."""
        return sum(len(w) for w in self._watchers.values())

    @property
    def num_delayed(self) -> int:
        """Operations waiting for completion or expiry."""
        return len(self._pending)

    size = num_delayed

    @property
    def num_keys(self) -> int:
        return len(self._watchers)

    def shutdown(self) -> int:
        """Cancel every timeout and forget every pending operation (none of them completes); returns how many
        were dropped. Call when the broker stops; connections are closing anyway."""
        self._shut_down = True
        dropped = list(self._pending.values())
        for op in dropped:
            if op._timeout is not None:
                op._timeout.cancel()
                op._timeout = None
            op._purgatory = None
            op._keys = ()
        self._pending.clear()
        self._watchers.clear()
        self._ordered.clear()
        return len(dropped)

    def __repr__(self) -> str:
        return f"Purgatory({self.name!r}, delayed={self.num_delayed}, keys={self.num_keys})"

    # --- internals

    def _try(self, op: DelayedOperation) -> bool:
        try:
            return op.try_complete()
        except Exception:
            # One broken operation must not stop the others watching the same key; complete it so that the
            # client gets an answer (on_complete reads the state) instead of waiting for the timeout.
            log.exception("%s purgatory: try_complete of %r failed", self.name, op)
            try:
                return op.force_complete()
            except Exception:
                log.exception("%s purgatory: on_complete of %r failed", self.name, op)
                return False

    def _expire(self, op: DelayedOperation) -> None:
        op._timeout = None  # it has fired; nothing to cancel
        try:
            if op.force_complete():
                self.expired += 1
                op.on_expiration()
        except Exception:
            log.exception("%s purgatory: expiring %r failed", self.name, op)

    def _watch(self, key: Hashable, op: DelayedOperation) -> None:
        threshold = op.threshold(key)
        watchers = self._watchers.get(key)
        if watchers is None:
            self._watchers[key] = {id(op): op}
            self._ordered[key] = threshold
            return
        watchers[id(op)] = op
        last = self._ordered.get(key)
        if last is not None:
            self._ordered[key] = threshold if threshold is not None and threshold >= last else None

    def _unwatch(self, op: DelayedOperation) -> None:
        self._leave(op)
        self._pending.pop(id(op), None)

    def _leave(self, op: DelayedOperation) -> None:
        """Takes ``op`` out of the watch lists of its keys."""
        for key in op._keys:
            watchers = self._watchers.get(key)
            if watchers is not None:
                watchers.pop(id(op), None)
                if not watchers:
                    del self._watchers[key]
                    self._ordered.pop(key, None)
