"""The rules that let the suite run on several pytest-xdist workers (tests/conftest.py, harness.free_port)."""

from __future__ import annotations

import socket

import pytest

from tests import conftest as suite
from tests.integration import harness


def test_a_module_is_one_work_unit_and_the_spark_modules_share_one() -> None:
    assert suite.scope_of("tests/integration/test_replication.py::test_a[confluent]") == \
        suite.scope_of("tests/integration/test_replication.py::test_b") == "tests/integration/test_replication.py"
    assert suite.scope_of("tests/ops/test_compose.py::test_down_leaves_nothing") == "tests/ops/test_compose.py"
    spark = {suite.scope_of(f"tests/integration/test_spark_{m}.py::test_x") for m in ("batch", "stream", "pipeline")}
    assert spark == {"spark"}
    assert suite.scope_of("tests/unit/test_spark_rows.py::test_y") == "tests/unit/test_spark_rows.py"


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
