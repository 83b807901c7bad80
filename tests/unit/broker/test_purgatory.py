from __future__ import annotations

import asyncio
import gc
import threading
import weakref
from dataclasses import dataclass, field

import pytest

from moldau.broker.purgatory import DelayedOperation, LoopTimer, ManualTimer, Purgatory


class WaitFor(DelayedOperation):
    """Completes once `state["value"] >= target`."""

    __slots__ = ("state", "target", "completions", "expirations", "tries")

    def __init__(self, delay_ms: float, state: dict[str, int], target: int) -> None:
        super().__init__(delay_ms)
        self.state = state
        self.target = target
        self.completions = 0
        self.expirations = 0
        self.tries = 0

    def try_complete(self) -> bool:
        self.tries += 1
        if self.state["value"] >= self.target:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        self.completions += 1

    def on_expiration(self) -> None:
        self.expirations += 1


@pytest.fixture
def timer() -> ManualTimer:
    return ManualTimer()


@pytest.fixture
def purgatory(timer: ManualTimer) -> Purgatory:
    return Purgatory("Test", timer)


def test_completes_immediately_without_watching(purgatory: Purgatory, timer: ManualTimer) -> None:
    op = WaitFor(100, {"value": 5}, 1)
    assert purgatory.try_complete_else_watch(op, ["k"]) is True
    assert op.is_completed and op.completions == 1
    assert purgatory.num_delayed == 0 and purgatory.watched() == 0 and timer.pending == 0


def test_completes_on_check(purgatory: Purgatory, timer: ManualTimer) -> None:
    state = {"value": 0}
    op = WaitFor(1000, state, 3)
    assert purgatory.try_complete_else_watch(op, ["tp-0"]) is False
    assert purgatory.num_delayed == 1 and purgatory.size == 1 and purgatory.watched() == 1
    assert timer.pending == 1
    state["value"] = 2
    assert purgatory.check_and_complete("tp-0") == 0
    assert not op.is_completed
    state["value"] = 3
    assert purgatory.check_and_complete("tp-0") == 1
    assert op.completions == 1 and op.expirations == 0
    assert purgatory.num_delayed == 0 and purgatory.watched() == 0 and purgatory.num_keys == 0
    assert timer.pending == 0  # the timeout was cancelled
    timer.advance(5000)
    assert op.completions == 1 and op.expirations == 0
    assert purgatory.check_and_complete("tp-0") == 0


def test_expires_after_delay(purgatory: Purgatory, timer: ManualTimer) -> None:
    op = WaitFor(500, {"value": 0}, 1)
    purgatory.try_complete_else_watch(op, ["a"])
    timer.advance(499)
    assert not op.is_completed
    timer.advance(1)
    assert op.is_completed and op.completions == 1 and op.expirations == 1
    assert purgatory.expired == 1
    assert purgatory.num_delayed == 0 and purgatory.watched() == 0


def test_expiry_order_follows_deadlines(purgatory: Purgatory, timer: ManualTimer) -> None:
    order: list[int] = []

    class Recorder(WaitFor):
        __slots__ = ("tag",)

        def on_expiration(self) -> None:
            order.append(int(self.delay_ms))

    for delay in (300, 100, 200, 100):
        purgatory.try_complete_else_watch(Recorder(delay, {"value": 0}, 1), ["k"])
    assert timer.advance(250) == 3
    assert order == [100, 100, 200]
    timer.advance(50)
    assert order == [100, 100, 200, 300]


def test_exactly_once_completion(purgatory: Purgatory, timer: ManualTimer) -> None:
    state = {"value": 0}
    op = WaitFor(100, state, 1)
    purgatory.try_complete_else_watch(op, ["a", "b"])
    state["value"] = 1
    assert purgatory.check_and_complete("a") == 1
    assert purgatory.check_and_complete("b") == 0
    assert op.force_complete() is False
    timer.advance(1000)
    assert op.completions == 1 and op.expirations == 0


def test_exactly_once_when_on_complete_reenters(purgatory: Purgatory) -> None:
    """on_complete triggering a check of the same key must not complete the operation again."""
    state = {"value": 0}

    class Reentrant(WaitFor):
        __slots__ = ()

        def on_complete(self) -> None:
            super().on_complete()
            purgatory.check_and_complete("k")

    ops = [Reentrant(100, state, 1) for _ in range(3)]
    for op in ops:
        purgatory.try_complete_else_watch(op, ["k"])
    state["value"] = 1
    purgatory.check_and_complete("k")
    assert [op.completions for op in ops] == [1, 1, 1]
    assert purgatory.num_delayed == 0


def test_exactly_once_under_thread_race() -> None:
    completions = []

    class Op(DelayedOperation):
        def try_complete(self) -> bool:
            return self.force_complete()

        def on_complete(self) -> None:
            completions.append(1)

    for _ in range(50):
        op = Op(10)
        barrier = threading.Barrier(8)
        results: list[bool] = []

        def race(op: Op = op, barrier: threading.Barrier = barrier, results: list[bool] = results) -> None:
            barrier.wait()
            results.append(op.force_complete())

        threads = [threading.Thread(target=race) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results.count(True) == 1
    assert len(completions) == 50


def test_watched_under_several_keys(purgatory: Purgatory, timer: ManualTimer) -> None:
    state = {"value": 0}
    op = WaitFor(100, state, 1)
    other = WaitFor(100, {"value": 0}, 1)
    purgatory.try_complete_else_watch(op, ["a", "b", "c", "a"])  # duplicates collapse
    purgatory.try_complete_else_watch(other, ["b"])
    assert purgatory.watched() == 4 and purgatory.num_keys == 3 and purgatory.num_delayed == 2
    assert purgatory.check_and_complete("unwatched") == 0
    state["value"] = 1
    assert purgatory.check_and_complete("c") == 1
    # completion through "c" removed it from "a" and "b" too
    assert purgatory.watched() == 1 and purgatory.num_keys == 1 and purgatory.num_delayed == 1
    assert op.tries == 3  # first try, try after watching, the check via "c"
    assert purgatory.check_and_complete("b") == 0
    assert op.tries == 3


def test_second_try_after_watching_closes_the_race(purgatory: Purgatory, timer: ManualTimer) -> None:
    """The state changes after the first try but before anyone could find the op in a watch list."""
    state = {"value": 0}

    class Flaky(WaitFor):
        __slots__ = ()

        def try_complete(self) -> bool:
            done = super().try_complete()
            state["value"] = 1  # the change lands right after the first check
            return done

    op = Flaky(100, state, 1)
    assert purgatory.try_complete_else_watch(op, ["k"]) is True
    assert op.completions == 1 and purgatory.num_delayed == 0 and timer.pending == 0


def test_no_leak_when_many_complete_via_other_keys(purgatory: Purgatory, timer: ManualTimer) -> None:
    state = {"value": 0}
    refs = []
    for i in range(2000):
        op = WaitFor(60_000, state, 1)
        refs.append(weakref.ref(op))
        purgatory.try_complete_else_watch(op, [f"tp-{i % 10}", "shared"])
        del op
    assert purgatory.num_delayed == 2000 and purgatory.watched() == 4000
    state["value"] = 1
    for i in range(10):
        purgatory.check_and_complete(f"tp-{i}")
    # "shared" was never checked, yet nothing is left behind
    assert purgatory.num_delayed == 0 and purgatory.watched() == 0 and purgatory.num_keys == 0
    assert timer.pending == 0
    gc.collect()
    assert all(r() is None for r in refs)


def test_failing_try_complete_does_not_block_others(purgatory: Purgatory) -> None:
    state = {"value": 0}

    class Broken(WaitFor):
        __slots__ = ()

        def try_complete(self) -> bool:
            if state["value"]:
                raise RuntimeError("boom")
            return False

    broken = Broken(100, state, 1)
    fine = WaitFor(100, state, 1)
    purgatory.try_complete_else_watch(broken, ["k"])
    purgatory.try_complete_else_watch(fine, ["k"])
    state["value"] = 1
    assert purgatory.check_and_complete("k") == 2  # the broken one is answered rather than left to time out
    assert fine.completions == 1 and broken.completions == 1


def test_dataclass_operations_are_supported(purgatory: Purgatory, timer: ManualTimer) -> None:
    @dataclass(eq=True)
    class Op(DelayedOperation):
        delay: float
        done: list[int] = field(default_factory=list)

        def __post_init__(self) -> None:
            DelayedOperation.__init__(self, self.delay)

        def try_complete(self) -> bool:
            return False

        def on_complete(self) -> None:
            self.done.append(1)

    a, b = Op(10), Op(10)  # equal by value, unhashable
    purgatory.try_complete_else_watch(a, ["k"])
    purgatory.try_complete_else_watch(b, ["k"])
    assert purgatory.num_delayed == 2
    timer.advance(10)
    assert a.done == [1] and b.done == [1]


def test_rejects_bad_usage(purgatory: Purgatory) -> None:
    op = WaitFor(10, {"value": 0}, 1)
    with pytest.raises(ValueError):
        purgatory.try_complete_else_watch(op, [])
    purgatory.try_complete_else_watch(op, ["k"])
    with pytest.raises(ValueError):
        purgatory.try_complete_else_watch(op, ["k"])


def test_shutdown_cancels_timeouts(purgatory: Purgatory, timer: ManualTimer) -> None:
    ops = [WaitFor(100, {"value": 0}, 1) for _ in range(3)]
    for op in ops:
        purgatory.try_complete_else_watch(op, ["k"])
    assert purgatory.shutdown() == 3
    assert timer.pending == 0 and purgatory.num_delayed == 0 and purgatory.watched() == 0
    timer.advance(1000)
    assert all(op.completions == 0 for op in ops)
    with pytest.raises(RuntimeError):
        purgatory.try_complete_else_watch(WaitFor(1, {"value": 0}, 1), ["k"])


def test_manual_timer_runs_callbacks_scheduled_by_callbacks() -> None:
    timer = ManualTimer()
    fired: list[float] = []

    def first() -> None:
        fired.append(timer.now_ms)
        timer.schedule(10, lambda: fired.append(timer.now_ms))

    timer.schedule(5, first)
    handle = timer.schedule(7, lambda: fired.append(-1))
    handle.cancel()
    assert timer.advance(20) == 2
    assert fired == [5, 15]
    assert timer.now_ms == 20


async def test_loop_timer_expires_for_real() -> None:
    purgatory = Purgatory("Loop", LoopTimer())
    state = {"value": 0}
    slow = WaitFor(20, state, 1)
    fast = WaitFor(10_000, state, 1)
    purgatory.try_complete_else_watch(slow, ["k"])
    purgatory.try_complete_else_watch(fast, ["j"])
    await asyncio.sleep(0.1)
    assert slow.completions == 1 and slow.expirations == 1
    state["value"] = 1
    assert purgatory.check_and_complete("j") == 1
    assert fast.expirations == 0
    purgatory.shutdown()


class Ordered(WaitFor):
    """A WaitFor that declares its target as the key's threshold (ordered watch lists)."""

    __slots__ = ()

    def threshold(self, key: object) -> int | None:
        return self.target

    def blocked_on(self, key: object) -> bool:
        return self.state["value"] < self.target


def test_ordered_watchers_stop_at_the_first_still_blocked(purgatory: Purgatory) -> None:
    state = {"value": 0}
    ops = [Ordered(1000, state, target) for target in range(1, 101)]
    for op in ops:
        purgatory.try_complete_else_watch(op, ["tp"])
    for op in ops:
        op.tries = 0
    state["value"] = 10
    assert purgatory.check_and_complete("tp") == 10
    # The ten that completed plus the first still waiting: not a scan of all 100.
    assert sum(op.tries for op in ops) == 11
    assert all(op.is_completed for op in ops[:10]) and not any(op.is_completed for op in ops[10:])
    state["value"] = 100
    assert purgatory.check_and_complete("tp") == 90 and purgatory.num_delayed == 0


def test_thresholds_going_backwards_make_the_key_scanned_in_full(purgatory: Purgatory) -> None:
    """A retried duplicate batch waits for an older offset than the requests watched before it: it must still
    complete as soon as its own threshold is reached."""
    state = {"value": 0}
    first, second, duplicate = Ordered(1000, state, 5), Ordered(1000, state, 9), Ordered(1000, state, 5)
    for op in (first, second, duplicate):
        purgatory.try_complete_else_watch(op, ["tp"])
    state["value"] = 5
    assert purgatory.check_and_complete("tp") == 2
    assert first.is_completed and duplicate.is_completed and not second.is_completed
    state["value"] = 9
    assert purgatory.check_and_complete("tp") == 1
    # The key's list emptied: the next watchers are ordered again.
    late = [Ordered(1000, state, t) for t in (20, 30)]
    for op in late:
        purgatory.try_complete_else_watch(op, ["tp"])
    for op in late:
        op.tries = 0
    assert purgatory.check_and_complete("tp") == 0 and late[0].tries == 1 and late[1].tries == 0


def test_an_op_waiting_on_another_key_does_not_stop_the_scan(purgatory: Purgatory) -> None:
    state = {"value": 0}
    other = {"value": 0}

    class TwoKeys(Ordered):
        __slots__ = ()

        def try_complete(self) -> bool:
            self.tries += 1
            if self.state["value"] >= self.target and other["value"] >= 1:
                return self.force_complete()
            return False

    both = TwoKeys(1000, state, 1)
    single = Ordered(1000, state, 2)
    purgatory.try_complete_else_watch(both, ["tp", "other"])
    purgatory.try_complete_else_watch(single, ["tp"])
    state["value"] = 2
    # `both` has reached its threshold on "tp" (it waits on "other"), so the scan goes on to `single`.
    assert purgatory.check_and_complete("tp") == 1 and single.is_completed and not both.is_completed
    other["value"] = 1
    assert purgatory.check_and_complete("other") == 1 and both.is_completed


def test_check_and_complete_many_asks_each_operation_once(purgatory: Purgatory) -> None:
    """Changes to several keys told at once: an operation watching many of them is tried once, each key's
    ordered scan still stops at the first operation blocked on it, and what completes is what n single checks
    would complete."""
    a, b = {"value": 0}, {"value": 0}

    class Both(WaitFor):
        """Waits for a >= 1 and b >= 1 (an acks=all request over two partitions)."""

        __slots__ = ()

        def try_complete(self) -> bool:
            self.tries += 1
            if a["value"] >= 1 and b["value"] >= 1:
                return self.force_complete()
            return False

        def threshold(self, key: object) -> int | None:
            return 1

        def blocked_on(self, key: object) -> bool:
            return (a if key == "a" else b)["value"] < 1

    wide = Both(1000, a, 1)
    purgatory.try_complete_else_watch(wide, ["a", "b"])
    queue = [Ordered(1000, a, target) for target in range(1, 6)]  # ordered under "a" only
    for op in queue:
        purgatory.try_complete_else_watch(op, ["a"])
    for op in [wide, *queue]:
        op.tries = 0
    a["value"] = 2
    assert purgatory.check_and_complete_many(["a", "b"]) == 2
    assert wide.tries == 1 and not wide.is_completed  # b has not moved: tried once, for both keys
    # The two reached complete; the scan of "a" stops at the first still blocked (target 3); the rest untried.
    assert [op.is_completed for op in queue] == [True, True, False, False, False]
    assert [op.tries for op in queue] == [1, 1, 1, 0, 0]
    a["value"], b["value"] = 5, 1
    assert purgatory.check_and_complete_many(["b", "a", "b"]) == 4
    assert wide.is_completed and all(op.is_completed for op in queue) and purgatory.num_delayed == 0
    assert purgatory.check_and_complete_many(["a", "b", "c"]) == 0


def test_rewatch_moves_an_operation_to_other_keys_and_keeps_its_timeout(purgatory: Purgatory,
                                                                       timer: ManualTimer) -> None:
    """An operation that knows which key alone can move it on watches that one: a check of its old key no longer
    reaches it, one of the new key does, also when the move happens inside a check's walk, and its timeout
    stays. A lower threshold watched after a higher one makes the key's list unordered (scanned in full)."""
    state = {"value": 0}

    class Stepping(Ordered):
        """Watches "first" until value reaches 1, then "second" (moving itself from try_complete)."""

        __slots__ = ()

        def try_complete(self) -> bool:
            self.tries += 1
            if self.state["value"] >= self.target:
                return self.force_complete()
            if self.state["value"] >= 1 and self._keys == ("first",):
                assert self._purgatory is not None
                self._purgatory.rewatch(self, ["second"])
            return False

    later = Ordered(1000, state, 9)
    purgatory.try_complete_else_watch(later, ["second"])
    op = Stepping(1000, state, 3)
    purgatory.try_complete_else_watch(op, ["first"])
    assert purgatory.watched() == 2 and timer.pending == 2
    state["value"] = 1
    assert purgatory.check_and_complete("first") == 0  # moved itself to "second" during the walk
    assert purgatory.watched() == 2 and purgatory.num_keys == 1 and purgatory.num_delayed == 2
    op.tries = 0
    assert purgatory.check_and_complete("first") == 0 and op.tries == 0
    state["value"] = 3
    # "second" holds threshold 9 then 3: not ordered any more, so the scan goes past the blocked one.
    assert purgatory.check_and_complete("second") == 1 and op.is_completed and not later.is_completed
    purgatory.rewatch(op, ["third"])  # completed: nothing happens
    assert purgatory.num_keys == 1
    timer.advance(1000)
    assert later.expirations == 1 and op.expirations == 0 and purgatory.num_delayed == 0


def test_time_out_only_counts_and_times_an_operation(purgatory: Purgatory, timer: ManualTimer) -> None:
    """``time_out``: an operation woken by its own means is pending and expires at its delay, on no watch list;
    completed first, it leaves no timer behind."""
    state = {"value": 0}
    late, early = WaitFor(100, state, 1), WaitFor(100, state, 1)
    purgatory.time_out(late)
    purgatory.time_out(early)
    assert purgatory.num_delayed == 2 and purgatory.watched() == 0 and timer.pending == 2
    purgatory.check_and_complete("k")  # no key watches them
    assert early.tries == 0
    state["value"] = 1
    assert early.try_complete() and early.completions == 1
    assert purgatory.num_delayed == 1 and timer.pending == 1
    timer.advance(100)
    assert late.completions == 1 and late.expirations == 1 and purgatory.num_delayed == 0 and timer.pending == 0
    with pytest.raises(ValueError):
        purgatory.time_out(late)
