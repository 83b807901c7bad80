"""A LeaderAndIsr or a controller's state write over many partitions logs one summary line, not one per partition
(10,000 lines per broker death were 8-11% of the event loop's time); each partition stays at DEBUG."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from moldau.broker.controller import zk_data as Z
from moldau.broker.controller.controller import Controller, ControllerSettings
from moldau.broker.log_summary import partition_examples
from moldau.broker.metadata import PartitionState
from moldau.broker.replica_manager import ReplicaManager
from moldau.storage.config import LogConfig, ManualClock
from moldau.storage.log_manager import LogManager

PARTITIONS = 40


def test_the_replica_manager_reports_role_changes_to_the_caller_and_logs_them_at_debug(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    lm = LogManager([tmp_path], LogConfig(), ManualClock(1_000))
    lm.load()
    rm = ReplicaManager(1, lm, lambda _: LogConfig(), clock=ManualClock(1_000))
    for p in range(PARTITIONS):
        rm.become_leader_or_follower("t", PartitionState(p, 1, 0, [1, 2], [1, 2], zk_version=0), {})
    became: dict[str, list[tuple[str, int]]] = {}
    with caplog.at_level(logging.DEBUG, logger="moldau.replica_manager"):
        for p in range(PARTITIONS):  # half move to broker 2, half get a new epoch here
            leader = 2 if p % 2 else 1
            rm.become_leader_or_follower("t", PartitionState(p, leader, 1, [1, 2], [1, 2], zk_version=1), {}, became)
    assert became == {"leader": [("t", p) for p in range(0, PARTITIONS, 2)],
                      "follower": [("t", p) for p in range(1, PARTITIONS, 2)]}
    records = [r for r in caplog.records if r.name == "moldau.replica_manager"]
    assert len(records) == PARTITIONS and all(r.levelno == logging.DEBUG for r in records)


def test_a_state_write_logs_one_line_at_info(caplog: pytest.LogCaptureFixture) -> None:
    class Zk:
        async def controller_multi(self, epoch_zk_version: int, ops: list[object]) -> list[object]:
            return [type("Stat", (), {"version": 1})() for _ in ops]

    controller = Controller(1, Zk(), ControllerSettings(), lambda: 10)  # type: ignore[arg-type]  # never started
    controller.ctx.epoch = 1
    changes = {("t", p): Z.LeaderIsr(1 + p % 2, 1, [1 + p % 2], 1, 0) for p in range(PARTITIONS)}
    with caplog.at_level(logging.INFO, logger="moldau.controller"):
        asyncio.run(controller._write_states(changes))
    lines = [r.getMessage() for r in caplog.records if r.name == "moldau.controller"]
    assert len(lines) == 1
    assert lines[0].startswith(f"wrote {PARTITIONS} partition states (partitions per leader {{1: 20, 2: 20}}): "
                               "t-0: leader 1, epoch 1, ISR [1]; t-1: leader 2, epoch 1, ISR [2]")
    assert lines[0].endswith(f"; and {PARTITIONS - 5} more")


def test_partition_examples_name_a_few_and_count_the_rest() -> None:
    assert partition_examples([("a", 0)]) == "a-0"
    assert partition_examples([("a", i) for i in range(7)]) == "a-0, a-1, a-2, a-3, a-4 and 2 more"
    assert partition_examples([]) == ""
