"""The rules that let the suite run on several pytest-xdist workers (tests/conftest.py, harness.free_port)."""

from __future__ import annotations

import socket
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests import conftest as suite
from tests.integration import harness

REPO = Path(__file__).resolve().parents[2]


def test_a_module_is_one_work_unit_and_the_spark_modules_share_one() -> None:
    assert suite.scope_of("tests/integration/test_replication.py::test_a[confluent]") == \
        suite.scope_of("tests/integration/test_replication.py::test_b") == "tests/integration/test_replication.py"
    assert suite.scope_of("tests/ops/test_ops_files.py::test_x") == "tests/ops/test_ops_files.py"
    spark = {suite.scope_of(f"tests/integration/test_spark_{m}.py::test_x") for m in ("batch", "stream", "pipeline")}
    assert spark == {"spark"}
    assert suite.scope_of("tests/unit/test_spark_rows.py::test_y") == "tests/unit/test_spark_rows.py"
    # The two modules that run `pip wheel .` in the source tree are one unit: never two builds at once.
    assert suite.scope_of("tests/ops/test_compose.py::test_down_leaves_nothing") == \
        suite.scope_of("tests/integration/test_install.py::test_a_plain_install") == "wheel"


def test_cluster_lane_units_go_to_the_first_worker_only() -> None:
    assert [suite.lane_of(s) for s in ("tests/integration/test_replication.py", "spark", "wheel",
                                       "tests/ops/test_ops_files.py", "tests/unit/test_x.py",
                                       "examples/order_service/tests/test_order_service.py",
                                       "tests/integration/test_hostile_input.py")] == \
        ["cluster", "cluster", "side", "side", "side", "cluster", "side"]
    assert all(m.startswith("tests/integration/") and (REPO / m).is_file() for m in suite.SIDE_INTEGRATION)
    pending = ["tests/integration/test_a.py", "wheel", "tests/unit/test_b.py"]
    assert suite.pick_scope("gw0", pending) == "tests/integration/test_a.py"
    assert suite.pick_scope("gw1", pending) == "wheel"
    assert suite.pick_scope("gw0", ["tests/unit/test_b.py"]) == "tests/unit/test_b.py"  # gw0 helps when done
    # A side worker whose lane is empty helps with the cluster lane from its far end...
    assert suite.pick_scope("gw2", ["tests/integration/test_a.py", "spark"]) == "spark"
    # ...but never while a kafka-python group module waits for gw0, which takes those first.
    groups = suite.KAFKA_PYTHON_GROUPS[0]
    assert suite.pick_scope("gw1", ["tests/integration/test_a.py", groups]) is None
    assert suite.pick_scope("gw0", ["tests/integration/test_a.py", groups]) == groups


class _Worker:
    """What the scheduler sees of an xdist worker: its id, the tests sent to it, shutdown."""

    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.sent: list[int] = []
        self.shutting_down = False

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.sent.extend(indexes)

    def shutdown(self) -> None:
        assert not self.shutting_down, f"{self.gateway.id} told to shut down twice"
        self.shutting_down = True


def test_the_lane_scheduler_runs_every_test_once_balances_the_lanes_and_stops_every_worker() -> None:
    pytest.importorskip("xdist")
    config: Any = SimpleNamespace(option=SimpleNamespace(loadscopereorder=False),
                                  getvalue=lambda name: ["2*popen"] if name == "tx" else None)
    sched = suite.pytest_xdist_make_scheduler(config, SimpleNamespace(loadscopesched=lambda *a: None))
    # A long cluster lane and a short side lane: gw1 runs dry while gw0 still has units queued.
    groups = suite.KAFKA_PYTHON_GROUPS[0]
    collection = ([f"tests/integration/test_c{m}.py::t{i}" for m in range(6) for i in range(5)] +
                  [f"{groups}::t{i}" for i in range(5)] +
                  ["tests/integration/test_install.py::t", "tests/integration/test_spark_batch.py::t",
                   "tests/integration/test_spark_stream.py::t", "tests/ops/test_compose.py::t1",
                   "tests/ops/test_compose.py::t2"] +
                  [f"tests/unit/test_u{m}.py::t{i}" for m in range(2) for i in range(2)])
    workers = [_Worker("gw0"), _Worker("gw1")]
    for w in workers:
        sched.add_node(w)
        sched.add_node_collection(w, collection)
    sched.schedule()
    done: dict[str, list[str]] = {"gw0": [], "gw1": []}
    # Run the workers in turn, one test at a time, as xdist reports them, until neither holds anything.
    for _ in range(10 * len(collection)):
        progressed = False
        for w in workers:
            ran = len(done[w.gateway.id])
            if ran < len(w.sent):
                done[w.gateway.id].append(collection[w.sent[ran]])
                sched.mark_test_complete(w, w.sent[ran])
                progressed = True
        if not progressed:
            break
    ran_all = done["gw0"] + done["gw1"]
    assert sorted(ran_all) == sorted(collection)  # every test once
    assert {t.split("::")[0] for t in done["gw1"]} >= {"tests/ops/test_compose.py", "tests/integration/test_install.py"}
    # gw0 began with the kafka-python group module, then ran cluster modules in collection order; gw1 ran dry
    # and took cluster modules from the far end, never the group module; every module ran whole on one worker.
    assert done["gw0"][0].startswith(groups + "::")
    assert not any(t.startswith(groups) for t in done["gw1"])
    by_worker = {w: {t.split("::")[0] for t in done[w] if suite.lane_of(suite.scope_of(t)) == "cluster"}
                 for w in done}
    assert by_worker["gw0"] and by_worker["gw1"] and not by_worker["gw0"] & by_worker["gw1"]
    rest = [t for t in done["gw0"] if suite.lane_of(suite.scope_of(t)) == "cluster" and not t.startswith(groups)]
    assert rest == sorted(rest, key=collection.index)
    # Each ran about half the tests: neither idled while the other still had a long queue.
    assert abs(len(done["gw0"]) - len(done["gw1"])) <= 6, {w: len(done[w]) for w in done}
    assert all(w.shutting_down for w in workers) and sched.tests_finished


def test_each_worker_hands_out_ports_from_its_own_block_below_the_ephemeral_range(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    blocks = []
    for worker in ("gw0", "gw1", "gw2", "gw5"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        blocks.append(set(harness._port_block()))
    for i, block in enumerate(blocks):
        assert max(block) < 32768
        for other in blocks[i + 1:]:
            assert not block & other
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    assert set(harness._port_block()) == blocks[0]  # no xdist: the first block


def test_free_port_skips_a_port_in_use() -> None:
    first = harness.free_port()
    assert first in harness._PORTS
    with socket.socket() as taken:
        # Hold the next port of the cycle: free_port must step over it.
        nxt = harness._PORTS[harness._next_port]
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            taken.bind(("127.0.0.1", nxt))
            taken.listen()
        except OSError:
            pass  # something else holds it already: free_port must step over it all the same
        got = harness.free_port()
        assert got != nxt and got in harness._PORTS


def test_free_ports_hands_out_a_run_that_later_calls_do_not_repeat() -> None:
    base = harness.free_ports(3)
    assert {base, base + 1, base + 2} <= set(harness._PORTS)
    # The launcher takes --port base and gives broker i base + i: nothing handed out next may be one of them.
    later = {harness.free_port() for _ in range(20)}
    assert not later & {base, base + 1, base + 2}
