"""The controller's partition-state writes: chunks go to ZooKeeper together, and a version conflict in one chunk
re-reads and re-decides only the partitions of that chunk (ZooKeeper is replaced by a recorder of multis)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kazoo.exceptions import BadVersionError

from moldau.broker.controller import zk_data as Z
from moldau.broker.controller.controller import MULTI_CHUNK, Controller, ControllerSettings
from moldau.broker.controller.zk import ControllerMovedError

PARTITIONS = MULTI_CHUNK * 3


class RecordingZk:
    """controller_multi: records the state paths of each multi; ``gate`` holds every multi until ``expected`` of
    them are in flight at once; ``conflict`` paths fail their multi (BadVersionError) on the first attempt."""

    def __init__(self, expected: int = 1, conflict: frozenset[str] = frozenset(),
                 moved: bool = False) -> None:
        self.expected = expected
        self.conflict = set(conflict)
        self.moved = moved
        self.in_flight = 0
        self.gate = asyncio.Event()
        self.writes: list[str] = []
        self.reads: list[str] = []

    async def controller_multi(self, epoch_zk_version: int, ops: list[Any]) -> list[Any]:
        self.in_flight += 1
        if self.in_flight >= self.expected:
            self.gate.set()
        await asyncio.wait_for(self.gate.wait(), 5)
        paths = [op[1] for op in ops]
        if self.moved:
            raise ControllerMovedError("moved")
        if self.conflict.intersection(paths):
            self.conflict.difference_update(paths)
            raise BadVersionError()
        self.writes += paths
        return [type("Stat", (), {"version": op[3] + 1})() for op in ops]

    async def partition_states_of(self, tps: list[tuple[str, int]]) -> dict[tuple[str, int], Z.LeaderIsr]:
        self.reads += [Z.state_path(*tp) for tp in tps]
        return {tp: Z.LeaderIsr(1, 0, [1, 3], 1, 7) for tp in tps}  # a leader changed the ISR meanwhile: version 7


def _controller(zk: RecordingZk) -> Controller:
    controller = Controller(1, zk, ControllerSettings(), lambda: 10)  # type: ignore[arg-type]  # never started
    ctx = controller.ctx
    ctx.epoch = 1
    ctx.assignments["t"] = {p: [1, 2, 3] for p in range(PARTITIONS)}
    for p in range(PARTITIONS):
        ctx.states[("t", p)] = Z.LeaderIsr(1, 0, [1, 2, 3], 1, 0)
    return controller


def _shrink(controller: Controller) -> Any:
    def decide(tp: Any, state: Z.LeaderIsr) -> Z.LeaderIsr | None:
        if 2 not in state.isr:
            return None
        return controller._new_state(tp, state.leader, [r for r in state.isr if r != 2])
    return decide


def test_the_chunks_of_a_large_change_are_written_concurrently() -> None:
    async def run() -> None:
        zk = RecordingZk(expected=3)  # one multi after the other never has three in flight: wait_for times out
        controller = _controller(zk)
        written = await controller._decide_and_write(sorted(controller.ctx.states), _shrink(controller))
        assert len(written) == PARTITIONS
        assert sorted(zk.writes) == sorted(Z.state_path("t", p) for p in range(PARTITIONS))
        assert all(s.isr == [1, 3] and s.zk_version == 1 for s in controller.ctx.states.values())

    asyncio.run(run())


def test_a_conflict_re_reads_and_re_decides_only_the_chunk_that_failed() -> None:
    async def run() -> None:
        conflicting = Z.state_path("t", MULTI_CHUNK + 5)  # in the second chunk
        zk = RecordingZk(expected=3, conflict=frozenset({conflicting}))
        controller = _controller(zk)
        written = await controller._decide_and_write(sorted(controller.ctx.states), _shrink(controller))
        assert len(written) == MULTI_CHUNK * 2  # the re-read states already had broker 2 out: nothing to write
        second = {Z.state_path("t", p) for p in range(MULTI_CHUNK, 2 * MULTI_CHUNK)}
        assert sorted(zk.reads) == sorted(second)
        assert not second.intersection(zk.writes) and len(zk.writes) == len(set(zk.writes)) == 2 * MULTI_CHUNK
        assert controller.ctx.states[("t", MULTI_CHUNK + 5)].zk_version == 7

    asyncio.run(run())


def test_a_moved_controller_epoch_stops_the_writes() -> None:
    async def run() -> None:
        controller = _controller(RecordingZk(moved=True))
        with pytest.raises(ControllerMovedError):
            await controller._decide_and_write(sorted(controller.ctx.states), _shrink(controller))

    asyncio.run(run())


class TakeoverZk(RecordingZk):
    """What a new controller reads, topic by topic: topic "b"'s states are answered only once a state of topic
    "a" has been written (within 5 s), as a controller that waited for every read before writing never would."""

    def __init__(self) -> None:
        super().__init__()
        self.gate.set()
        self.a_written = asyncio.Event()
        self.client = type("Client", (), {"watch_data": staticmethod(lambda path, callback: None)})()

    async def assignment(self, topic: str) -> Z.TopicAssignment:
        return Z.TopicAssignment(topic, bytes(16), {p: [1, 2, 3] for p in range(4)}, {}, {})

    async def topic_config(self, topic: str) -> dict[str, str]:
        return {}

    async def partition_states(self, topic: str, partitions: Any) -> dict[int, Z.LeaderIsr]:
        if topic == "b":
            await asyncio.wait_for(self.a_written.wait(), 5)
        return {p: Z.LeaderIsr(1 + p % 2, 3, [1, 2, 3], 1, 4) for p in partitions}  # broker 1 leads the even ones

    async def controller_multi(self, epoch_zk_version: int, ops: list[Any]) -> list[Any]:
        results = await super().controller_multi(epoch_zk_version, ops)
        if any("/topics/a/" in op[1] for op in ops):
            self.a_written.set()
        return results


def test_a_new_controller_writes_each_topic_as_soon_as_it_is_read() -> None:
    """Broker 1 (the old controller) is dead: every partition loses it from its ISR, the ones it led get a new
    leader from the live ISR (the first live replica: 2), one new leader epoch each; the states of one topic are
    written while the next is still being read."""
    async def run() -> None:
        zk = TakeoverZk()
        controller = Controller(2, zk, ControllerSettings(), lambda: 10)  # type: ignore[arg-type]  # never started
        controller.ctx.epoch = 2
        controller.ctx.live = {b: Z.BrokerInfo(b, f"h{b}", 9092) for b in (2, 3)}
        written = await controller._load_and_elect(["a", "b"])
        assert sorted(written) == [(t, p) for t in "ab" for p in range(4)]
        for tp, state in written.items():
            assert (state.leader, state.isr, state.leader_epoch, state.zk_version) == (2, [2, 3], 4, 5), tp
            assert controller.ctx.states[tp] is state
        assert zk.writes.index(Z.state_path("a", 0)) < zk.writes.index(Z.state_path("b", 0))

    asyncio.run(run())
