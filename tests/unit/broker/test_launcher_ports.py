"""The launcher's port plan and its checks (no process is started here)."""

from __future__ import annotations

import socket
from pathlib import Path

from moldau.broker.launcher import PICK_RANGE, Ports, _free_ports, busy_ports, ephemeral_range, plan_ports


def test_consecutive_ports_from_the_first_ones() -> None:
    assert plan_ports(3, 9092, 9404, 2181) == Ports(2181, (9092, 9093, 9094), (9404, 9405, 9406))


def test_port_zero_picks_distinct_free_ports() -> None:
    ports = plan_ports(3, 0, 0, 0)
    every = [ports.zookeeper, *ports.brokers, *ports.metrics]
    assert len(set(every)) == 7 and all(p > 0 for p in every)
    assert busy_ports(ports, 1) == []


def test_busy_and_shared_ports_are_named() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        problems = busy_ports(Ports(port, (port + 0,), (70000,)), first_id=5)
    assert f"port {port} (ZooKeeper) is already in use" in problems
    assert f"port {port} (broker 5) is also planned for ZooKeeper" in problems
    assert "port 70000 (broker 5 metrics) is not a TCP port" in problems


def test_port_zero_stays_out_of_the_ephemeral_range() -> None:
    """A port the kernel may give an outgoing connection can be taken before the broker binds it: never pick one."""
    eph = ephemeral_range()
    ports = plan_ports(3, 0, 0, 0)
    for port in [ports.zookeeper, *ports.brokers, *ports.metrics]:
        assert port not in eph and port in PICK_RANGE, port


def test_a_held_port_is_skipped_and_the_kernel_range_read(tmp_path: Path) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        # A pool of one busy port: it is never handed out.
        picked = _free_ports(1, pick=range(port, port + 1), ephemeral=range(0))
        assert picked != [port]  # fell back to bind(0): the only candidate was taken
    fake = tmp_path / "range"
    fake.write_text("40000\t50000\n")
    assert ephemeral_range(str(fake)) == range(40000, 50001)
    fake.write_text("garbage")
    assert ephemeral_range(str(fake)) == range(32768, 61000)
