"""The rules that let the suite run on several pytest-xdist workers (tests/conftest.py, harness.free_port)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests import conftest as suite
from tests.integration import harness


class _Item:
    def __init__(self, path: Path, integration: bool = False) -> None:
        self.path = path
        self._integration = integration

    def get_closest_marker(self, name: str) -> object | None:
        return object() if name == "integration" and self._integration else None


def test_modules_that_start_processes_stay_whole_and_spark_shares_one_worker() -> None:
    tests = suite.TESTS
    assert suite.xdist_group_of(_Item(tests / "integration" / "test_replication.py")) == "test_replication"
    assert suite.xdist_group_of(_Item(tests / "ops" / "test_compose.py")) == "test_compose"
    spark = {suite.xdist_group_of(_Item(tests / "integration" / f"test_spark_{m}.py"))
             for m in ("batch", "stream", "pipeline")}
    assert spark == {"spark"}
    # A unit test that starts a broker (marked integration) keeps its module's broker on one worker too.
    marked = _Item(tests / "unit" / "client" / "test_connection.py", integration=True)
    assert suite.xdist_group_of(marked) == "test_connection"
    assert suite.xdist_group_of(_Item(tests / "unit" / "protocol" / "test_schema.py")) is None


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
