"""A real ZooKeeper server process (Debian's package) for the cluster tests, the launcher and bench/.

No pytest in here. ``ZooKeeperProcess(workdir).start()`` runs ZooKeeperServerMain on a free 127.0.0.1 port with
``tickTime=500`` (so sessions of a few seconds are allowed), the admin server off and a bounded heap; ``stop()``
ends it. Every process started here is killed at exit at the latest.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from moldau.broker.launcher import zookeeper_command

from .harness import free_port, port_accepts

START_TIMEOUT_S = 30.0
_LIVE: set[ZooKeeperProcess] = set()


@dataclass(eq=False)
class ZooKeeperProcess:
    workdir: Path
    port: int = field(default_factory=free_port)
    tick_time_ms: int = 500
    proc: subprocess.Popen[bytes] | None = None

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / "zookeeper.out"

    def start(self, timeout: float = START_TIMEOUT_S) -> ZooKeeperProcess:
        self.workdir.mkdir(parents=True, exist_ok=True)
        cmd = zookeeper_command(self.workdir, self.port, self.tick_time_ms)
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                         start_new_session=True, env=dict(os.environ))
        _LIVE.add(self)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with {self.proc.returncode}:\n{self.tail()}")
            if port_accepts(self.port):
                return self
            time.sleep(0.1)
        self.stop()
        raise TimeoutError(f"ZooKeeper did not listen on {self.connect} within {timeout:.0f}s:\n{self.tail()}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        _LIVE.discard(self)

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no output)"


def _stop_all() -> None:
    for zk in list(_LIVE):
        zk.stop()


atexit.register(_stop_all)
