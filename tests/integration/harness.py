"""Start and stop real Moldau broker processes, and talk raw Kafka protocol to them.

Used by the integration tests (through the fixtures in conftest.py) and by bench/. No pytest in here.
Every wait is bounded; every process started here is registered so that `kill_all()` can end it.
"""

from __future__ import annotations

import atexit
import errno
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

REPO_ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 15.0

_LIVE: set[BrokerProcess] = set()

T = TypeVar("T")


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it when the process that started it dies (Linux).

    atexit does not run when pytest itself is killed (SIGTERM, SIGKILL, a CI timeout); this keeps brokers
    from outliving it.
    """
    if sys.platform == "linux":
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


# Ports handed to brokers, ZooKeeper and metrics endpoints come from a block below Linux's ephemeral range
# (32768-60999), one block per pytest-xdist worker. A port the kernel picks for bind(0) can be taken by some
# client's outgoing connection in the second between our probe and the broker's bind; a port below that range
# never is, and the blocks keep parallel workers from handing out the same port.
_PORT_BASE = 20000
_PORT_BLOCK = 2000
_PORT_WORKERS = 6  # 20000 + 6 * 2000 = 32000, still below the ephemeral range


def _port_block() -> range:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw0", "gw1", ... under pytest-xdist
    index = int(worker[2:]) % _PORT_WORKERS if worker.startswith("gw") and worker[2:].isdigit() else 0
    start = _PORT_BASE + index * _PORT_BLOCK
    return range(start, start + _PORT_BLOCK)


_PORTS = _port_block()
# Start at a random place in the block: a port a previous run's broker listened on may still be in TIME_WAIT.
_next_port = int.from_bytes(os.urandom(2), "big") % len(_PORTS)
_port_lock = threading.Lock()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago and that no other test worker hands out."""
    return free_ports(1)


def free_ports(n: int) -> int:
    """The first of `n` consecutive ports that were free a moment ago (a launcher's --port/--metrics-port take
    a base and add the broker's index); later calls do not hand out any of them again until the block wraps."""
    global _next_port
    for _ in range(len(_PORTS)):
        with _port_lock:
            if _next_port + n > len(_PORTS):
                _next_port = 0
            first = _next_port
            _next_port = (_next_port + n) % len(_PORTS)
        base = _PORTS[first]
        if all(_bindable(base + i) for i in range(n)):
            return base
    raise RuntimeError(f"no {n} consecutive free ports in {_PORTS.start}-{_PORTS.stop - 1}")


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


_held: list[socket.socket] = []


def closed_port() -> int:
    """A port nothing listens on (used as an unreachable broker address). It stays bound, without listening,
    for the rest of the session: connecting is refused, and no other process can start listening there."""
    while True:
        port = free_port()
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            s.close()
            continue
        _held.append(s)
        return port


def wait_until(predicate: Callable[[], T], timeout: float, what: str, interval: float = 0.05) -> T:
    """Polls `predicate` until it returns something truthy; raises TimeoutError naming `what`."""
    deadline = time.monotonic() + timeout
    last_exc: BaseException | None = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:  # noqa: BLE001 - we report the last one on timeout
            last_exc = exc
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_exc!r})" if last_exc else ""
            raise TimeoutError(f"timed out after {timeout:.1f}s waiting for {what}{detail}")
        time.sleep(interval)


def port_accepts(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


@dataclass(eq=False)
class BrokerProcess:
    """One broker process: `python -m moldau.broker server.properties --override ...`.

    The properties file holds the static settings; listeners, log.dirs and metrics.port are passed as
    --override so that both ways of configuring the broker are exercised.
    """

    workdir: Path
    broker_id: int = 0
    port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)
    overrides: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0
    # A cgroup (v2) the process starts in, so all its sockets belong to it (moldau.broker.verify.netfault).
    cgroup: Path | None = None

    def __post_init__(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.props_path.write_text(
            "# written by tests/integration/harness.py\n"
            f"broker.id={self.broker_id}\n"
            "num.partitions=1\n"
            "auto.create.topics.enable=true\n"
        )

    # -- addresses and paths ---------------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_dir(self) -> Path:
        return self.workdir / "logs"

    @property
    def log_dirs(self) -> list[Path]:
        return [self.log_dir]

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    @property
    def props_path(self) -> Path:
        return self.workdir / "server.properties"

    @property
    def stderr_path(self) -> Path:
        return self.workdir / "broker.stderr"

    @property
    def pid(self) -> int:
        assert self.proc is not None, "broker not started"
        return self.proc.pid

    def command(self) -> list[str]:
        settings = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.log_dir),
            "metrics.port": str(self.metrics_port),
            **self.overrides,
        }
        cmd = [sys.executable, "-m", "moldau.broker", str(self.props_path)]
        for key, value in settings.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd

    # -- lifecycle -------------------------------------------------------------------------------------
    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = START_TIMEOUT_S) -> BrokerProcess:
        """Starts the broker and waits (bounded) until its port accepts connections."""
        assert not self.is_running(), "broker already running"
        self.starts += 1
        with open(self.stderr_path, "ab") as err:
            err.write(f"\n===== harness: start #{self.starts}: {' '.join(self.command())}\n".encode())
            err.flush()
            env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1")
            self.proc = subprocess.Popen(
                self.command(),
                cwd=REPO_ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=err,
                stderr=err,
                start_new_session=True,  # Ctrl-C in the test terminal must not hit the broker directly
                preexec_fn=self._preexec,
            )
        _LIVE.add(self)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"broker exited with code {self.proc.returncode} during start-up\n"
                    f"--- broker stderr (tail) ---\n{self.stderr_tail()}"
                )
            if port_accepts(self.port):
                return self
            time.sleep(0.05)
        self.kill()
        raise TimeoutError(
            f"broker did not accept connections on {self.bootstrap} within {timeout:.0f}s\n"
            f"--- broker stderr (tail) ---\n{self.stderr_tail()}"
        )

    def _preexec(self) -> None:
        _die_with_parent()
        if self.cgroup is not None:
            # "0" moves the writing process, i.e. this child, before it creates any socket.
            with open(self.cgroup / "cgroup.procs", "w") as f:
                f.write("0\n")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """Sends `sig` and waits up to `timeout` s. Returns the exit code; on timeout kills and raises."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise TimeoutError(
                    f"broker did not exit within {timeout:.0f}s of signal {sig}; killed it\n"
                    f"--- broker stderr (tail) ---\n{self.stderr_tail()}"
                ) from None
        _LIVE.discard(self)
        return self.proc.returncode

    def kill(self) -> int | None:
        """SIGKILL (kill -9) and reap."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover - a SIGKILLed process always goes
                pass
        _LIVE.discard(self)
        return self.proc.returncode

    def restart(self, sig: int = signal.SIGTERM, timeout: float = STOP_TIMEOUT_S) -> BrokerProcess:
        self.stop(sig, timeout)
        return self.start()

    # -- diagnostics -----------------------------------------------------------------------------------
    def stderr_tail(self, max_lines: int = 60) -> str:
        try:
            lines = self.stderr_path.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return "(no stderr file)"
        return "\n".join(lines[-max_lines:])

    def stderr_text(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def rss_bytes(self) -> int:
        import psutil

        return int(psutil.Process(self.pid).memory_info().rss)

    def fetch_metrics(self, timeout: float = 5.0) -> str:
        with urllib.request.urlopen(self.metrics_url, timeout=timeout) as resp:
            return bytes(resp.read()).decode()

    def gauge(self, name: str) -> float:
        """The value of an unlabelled metric ``name`` in the broker's metrics now."""
        found = re.search(rf"^{name} ([0-9.e+-]+)$", self.fetch_metrics(), re.M)
        assert found is not None, f"{name} is not in the broker's metrics"
        return float(found.group(1))

    def partition_dir(self, topic: str, partition: int = 0) -> Path:
        """The directory holding a partition's segments (Kafka's layout: <log.dir>/<topic>-<partition>)."""
        for log_dir in self.log_dirs:
            candidate = log_dir / f"{topic}-{partition}"
            if candidate.is_dir():
                return candidate
        existing = sorted(p.name for d in self.log_dirs if d.is_dir() for p in d.iterdir())
        raise FileNotFoundError(f"no directory {topic}-{partition} under {self.log_dirs}; found {existing}")


def kill_all() -> None:
    """Kills every broker process started by this module that is still running."""
    for broker in list(_LIVE):
        broker.kill()


atexit.register(kill_all)


# ---------------------------------------------------------------------------------------------------------
# Raw protocol: just enough framing to send hand-made requests (hostile input, ApiVersions, Fetch timing).


def request_header_v1(api_key: int, api_version: int, correlation_id: int, client_id: str = "raw") -> bytes:
    cid = client_id.encode()
    return struct.pack(">hhih", api_key, api_version, correlation_id, len(cid)) + cid


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


class RawConnection:
    """A blocking socket with a timeout on every operation."""

    def __init__(self, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.settimeout(timeout)

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_then_eof(self, data: bytes) -> bool:
        """Sends data, then ends the stream (SHUT_WR). False if the peer closed first: a broker that refuses a
        frame may reset the connection while the rest is still in flight, and depending on when the reset
        arrives that shows as EPIPE, ECONNRESET (sendall) or ENOTCONN (shutdown)."""
        try:
            self.sock.sendall(data)
            self.sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            return False
        except OSError as exc:
            if exc.errno != errno.ENOTCONN:
                raise
            return False
        return True

    def request(self, api_key: int, api_version: int, correlation_id: int, body: bytes) -> None:
        self.send(frame(request_header_v1(api_key, api_version, correlation_id) + body))

    def recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
            buf += chunk
        return bytes(buf)

    def recv_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self.recv_exact(4))
        assert 0 <= size < 256 * 1024 * 1024, f"implausible response size {size}"
        return self.recv_exact(size)

    def wait_closed(self, timeout: float = 10.0) -> bytes:
        """Reads until the peer closes; returns whatever arrived before. Raises TimeoutError if it stays open."""
        self.sock.settimeout(timeout)
        deadline = time.monotonic() + timeout
        received = bytearray()
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"connection still open after {timeout:.0f}s (received {len(received)} bytes)")
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(65536)
            except (ConnectionResetError, BrokenPipeError):
                return bytes(received)
            except TimeoutError:
                raise TimeoutError(
                    f"connection still open after {timeout:.0f}s (received {len(received)} bytes)"
                ) from None
            if not chunk:
                return bytes(received)
            received += chunk
