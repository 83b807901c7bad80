"""The launcher as a user runs it (real ZooKeeper and broker processes): it refuses a busy port before starting
anything, and however it ends (SIGHUP, a closed stdout pipe, SIGKILL) no child outlives it."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import pytest

from moldau.broker.launcher import shutdown_bound
from moldau.tools.topics import main as topics_main

from .harness import wait_until

pytestmark = pytest.mark.integration
BROKERS = 1  # one broker keeps these cheap; the cluster path is tests/integration/test_cluster.py's launcher test


def _gone(pid: int) -> bool:
    """No such process, or a zombie nobody has reaped yet (it runs nothing any more)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _launch(tmp_path: Path, stdout: int | IO[bytes], *extra: str) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "moldau.broker.launcher", "--brokers", str(BROKERS), "--data",
           str(tmp_path / "data"), "--port", "0", *extra]
    return subprocess.Popen(cmd, stdout=stdout, stderr=open(tmp_path / "launcher.err", "wb"),
                            stdin=subprocess.DEVNULL, start_new_session=True)


def _child_pids(text: str) -> list[int]:
    return [int(pid) for pid in re.findall(r"\bpid (\d+)", text)]


_CHILDREN: list[int] = []  # every child pid a launcher reported, so a failed test leaves no orphan behind


@pytest.fixture
def launched() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Launchers a test started: whatever happens, they and the children they reported end with the test."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    while _CHILDREN:
        pid = _CHILDREN.pop()
        if not _gone(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_busy_port_is_refused_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cmd = [sys.executable, "-m", "moldau.broker.launcher", "--brokers", "3", "--data", str(tmp_path / "data"),
               "--port", "0", "--zookeeper-port", str(port)]
        result = subprocess.run(cmd, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode == 2
    err = result.stderr.decode()
    assert f"port {port} (ZooKeeper) is already in use" in err and "nothing was started" in err
    assert not (tmp_path / "data").exists()  # no data dir, no child logs: nothing was started


def test_every_busy_port_is_named(tmp_path: Path) -> None:
    socks = []
    try:
        for _ in range(2):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            s.listen()
            socks.append(s)
        broker_port, metrics_port = (s.getsockname()[1] for s in socks)
        cmd = [sys.executable, "-m", "moldau.broker.launcher", "--brokers", "1", "--data", str(tmp_path / "d"),
               "--port", str(broker_port), "--metrics-port", str(metrics_port), "--zookeeper-port", "0"]
        result = subprocess.run(cmd, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    finally:
        for s in socks:
            s.close()
    err = result.stderr.decode()
    assert result.returncode == 2
    assert f"port {broker_port} (broker 1) is already in use" in err
    assert f"port {metrics_port} (broker 1 metrics) is already in use" in err


def _wait_started(tmp_path: Path, read: Callable[[], str], proc: subprocess.Popen[bytes]) -> list[int]:
    def started() -> str | None:
        text = read()
        return text if "Stop everything" in text or proc.poll() is not None else None

    text = wait_until(started, 90, "the launcher's usage text")
    assert proc.poll() is None, f"the launcher exited: {(tmp_path / 'launcher.err').read_text()[-3000:]}"
    pids = _child_pids(text)
    _CHILDREN.extend(pids)
    assert len(pids) == BROKERS + 1, text
    return pids


def test_sighup_stops_every_child(tmp_path: Path, launched: list[subprocess.Popen[bytes]]) -> None:
    out_path = tmp_path / "launcher.out"
    with open(out_path, "wb") as out:
        proc = _launch(tmp_path, out)
    launched.append(proc)
    pids = _wait_started(tmp_path, out_path.read_text, proc)
    bootstrap = re.findall(r"Bootstrap servers: (\S+)", out_path.read_text())[0]
    assert topics_main(["--bootstrap-server", bootstrap, "--create", "--topic", "led"]) == 0
    proc.send_signal(signal.SIGHUP)  # what closing the terminal sends
    assert proc.wait(timeout=shutdown_bound(BROKERS)) == 0
    assert all(_gone(pid) for pid in pids)
    text = out_path.read_text()
    assert "SIGHUP received: stopping the cluster" in text and "stopped zookeeper" in text
    # the last broker leads a partition no other broker can take: its controlled shutdown ends at the first
    # answer (no partitions remaining) instead of retrying controlled.shutdown.max.retries times
    broker_log = (tmp_path / "data" / "broker-1.log").read_text()
    assert "controlled shutdown succeeded" in broker_log and "controlled shutdown attempt" not in broker_log


def test_closed_stdout_pipe_stops_every_child(tmp_path: Path, launched: list[subprocess.Popen[bytes]]) -> None:
    read_fd, write_fd = os.pipe()
    proc = _launch(tmp_path, write_fd)
    os.close(write_fd)
    launched.append(proc)
    os.set_blocking(read_fd, False)
    seen = bytearray()

    def read() -> str:
        try:
            seen.extend(os.read(read_fd, 65536))
        except BlockingIOError:
            pass
        return seen.decode()

    pids = _wait_started(tmp_path, read, proc)
    os.close(read_fd)  # `... | tee log` and tee dies: the launcher's next write (or poll) sees no reader
    assert proc.wait(timeout=shutdown_bound(BROKERS)) == 0
    assert all(_gone(pid) for pid in pids)


def test_children_die_with_a_killed_launcher(tmp_path: Path, launched: list[subprocess.Popen[bytes]]) -> None:
    out_path = tmp_path / "launcher.out"
    with open(out_path, "wb") as out:
        proc = _launch(tmp_path, out)
    launched.append(proc)
    pids = _wait_started(tmp_path, out_path.read_text, proc)
    proc.kill()  # no handler runs: only the kernel's parent-death signal can end the children
    proc.wait(10)
    wait_until(lambda: all(_gone(pid) for pid in pids), 10, "every child gone after SIGKILL of the launcher")


def test_a_child_exiting_stops_the_rest(tmp_path: Path, launched: list[subprocess.Popen[bytes]]) -> None:
    out_path = tmp_path / "launcher.out"
    with open(out_path, "wb") as out:
        proc = _launch(tmp_path, out)
    launched.append(proc)
    zk_pid, broker_pid = _wait_started(tmp_path, out_path.read_text, proc)
    os.kill(broker_pid, signal.SIGKILL)
    assert proc.wait(timeout=shutdown_bound(BROKERS)) == 1
    assert _gone(zk_pid)
    err = (tmp_path / "launcher.err").read_text()
    assert "broker-1 exited unexpectedly with code -9" in err


def test_detach_status_stop(tmp_path: Path) -> None:
    data = tmp_path / "data"
    launcher = [sys.executable, "-m", "moldau.broker.launcher"]
    started = subprocess.run([*launcher, "--brokers", str(BROKERS), "--data", str(data), "--port", "0",
                              "--detach"], capture_output=True, text=True, timeout=150, stdin=subprocess.DEVNULL)
    pids = _child_pids(started.stdout)
    _CHILDREN.extend(pids)
    launcher_pid = int((data / "launcher.pid").read_text())
    try:
        assert started.returncode == 0, started.stderr
        assert "Bootstrap servers" in started.stdout and f"stop --data {data}" in started.stdout
        assert len(pids) == BROKERS + 1 and not any(_gone(pid) for pid in pids)
        status = subprocess.run([*launcher, "status", "--data", str(data)], capture_output=True, text=True,
                                timeout=30)
        assert status.returncode == 0 and f"running: launcher pid {launcher_pid}" in status.stdout
        stop = subprocess.run([*launcher, "stop", "--data", str(data)], capture_output=True, text=True,
                              timeout=shutdown_bound(BROKERS) + 10)
        assert stop.returncode == 0, stop.stderr
        assert all(_gone(pid) for pid in [launcher_pid, *pids])
        status = subprocess.run([*launcher, "status", "--data", str(data)], capture_output=True, text=True,
                                timeout=30)
        assert status.returncode == 3 and "no cluster is running" in status.stdout
    finally:
        if not _gone(launcher_pid):
            os.kill(launcher_pid, signal.SIGKILL)
        for pid in pids:
            if not _gone(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def test_a_paused_broker_is_reported(tmp_path: Path, launched: list[subprocess.Popen[bytes]]) -> None:
    """SIGSTOP keeps the process alive and its port open: the launcher's ApiVersions probe notices, says so once,
    and says again when the broker answers after SIGCONT."""
    out_path = tmp_path / "launcher.out"
    with open(out_path, "wb") as out:
        proc = _launch(tmp_path, out)
    launched.append(proc)
    _zk_pid, broker_pid = _wait_started(tmp_path, out_path.read_text, proc)
    err = tmp_path / "launcher.err"
    os.kill(broker_pid, signal.SIGSTOP)
    try:
        wait_until(lambda: "broker-1 (pid" in err.read_text() and "is not answering" in err.read_text(), 60,
                   "the launcher to report the paused broker")
    finally:
        os.kill(broker_pid, signal.SIGCONT)
    wait_until(lambda: "answers again" in err.read_text(), 60, "the launcher to see the broker answer again")
    assert err.read_text().count("is not answering") == 1
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=shutdown_bound(BROKERS)) == 0
