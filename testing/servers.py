"""Brokers for tests: `start_broker()` (one broker, no ZooKeeper) and `start_cluster(n)` (ZooKeeper + n brokers).

Each broker is a `BrokerServer` on its own event loop in a daemon thread of the calling process (in-process):
after the one-time import of the broker modules a broker starts in ~0.1 s against ~1-5 s for a new interpreter
(docs/testing.md has the numbers), it binds port 0 itself (no probe-then-bind race with other processes), and it
cannot outlive the test process. ZooKeeper, for clusters, is a Java child process (Debian's ``zookeeper`` package)
that the kernel kills when the thread that started it dies (PR_SET_PDEATHSIG), and at interpreter exit at the
latest. No pytest in here: any harness (or a script) can use these; the fixtures are in moldau.testing.
"""

from __future__ import annotations

import asyncio
import atexit
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

from moldau.broker.config import BrokerConfig
from moldau.broker.launcher import zookeeper_command
from moldau.broker.server import BrokerServer

T = TypeVar("T")
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0

# Testcontainers' Kafka module makes the same choices: one offsets partition (a group's first join does not wait for
# 50 partitions to load) and no initial rebalance delay (a lone consumer gets its partitions at once).
SINGLE_BROKER_DEFAULTS = {"offsets.topic.num.partitions": "1", "group.initial.rebalance.delay.ms": "0"}

_LIVE: set[BrokerThread | ZooKeeper] = set()


def wait_until(predicate: Callable[[], T], timeout: float, what: str, interval: float = 0.05) -> T:
    """Polls `predicate` until it returns something truthy; raises TimeoutError naming `what` (and the last error)."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:  # noqa: BLE001 - reported on timeout
            last = exc
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}"
                               + (f" (last error: {last!r})" if last else ""))
        time.sleep(interval)


def unique_topic_name(prefix: str = "topic") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


class BrokerThread:
    """One in-process broker. `start()` returns once it accepts connections; `stop()` shuts it down cleanly and can
    be followed by `start()` again (same id, data and port)."""

    def __init__(self, log_dir: Path, overrides: Mapping[str, str] | None = None, broker_id: int = 0) -> None:
        self.log_dir = log_dir
        self.broker_id = broker_id
        self.overrides = dict(overrides or {})
        self.port = 0  # 0 until the first start: the broker binds a free port, and keeps it across restarts
        self.server: BrokerServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def is_running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def config(self) -> BrokerConfig:
        settings = {"broker.id": str(self.broker_id), "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                    "log.dirs": str(self.log_dir), **self.overrides}
        return BrokerConfig.from_sources(None, [f"{k}={v}" for k, v in settings.items()])

    def start(self, timeout: float = START_TIMEOUT_S) -> BrokerThread:
        assert not self.is_running(), "broker already running"
        config = self.config()  # a bad override raises here, in the caller's thread
        loop = _new_loop(str(config.get("moldau.event.loop")))
        server = BrokerServer(config)
        started = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(server.start())
            except BaseException as exc:  # noqa: BLE001 - handed to start()'s caller
                failure.append(exc)
                try:
                    loop.run_until_complete(server.shutdown())  # releases what was opened (port, log files)
                except BaseException:  # noqa: BLE001 - the start-up failure is the one to report
                    pass
                finally:
                    loop.close()
                    started.set()
                return
            started.set()
            loop.run_forever()
            loop.close()

        self.server, self._loop = server, loop
        self._thread = threading.Thread(target=run, name=f"moldau-broker-{self.broker_id}", daemon=True)
        self._thread.start()
        _LIVE.add(self)
        if not started.wait(timeout):
            raise TimeoutError(f"broker {self.broker_id} did not start within {timeout:.0f}s")
        if failure:
            self._thread.join(timeout)
            _LIVE.discard(self)
            raise RuntimeError(f"broker {self.broker_id} failed to start: {failure[0]!r}") from failure[0]
        self.port = next(port for name, _, host, port in server.advertised_endpoints())
        return self

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Shuts the broker down (logs flushed, clean-shutdown marker written). Does nothing if it is not running."""
        loop, thread, server = self._loop, self._thread, self.server
        _LIVE.discard(self)
        if loop is None or thread is None or server is None or not thread.is_alive():
            return
        try:
            asyncio.run_coroutine_threadsafe(server.shutdown(), loop).result(timeout)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout)


def _new_loop(kind: str) -> asyncio.AbstractEventLoop:
    if kind == "uvloop":
        try:
            import uvloop

            return uvloop.new_event_loop()
        except ImportError:
            pass
    return asyncio.new_event_loop()


def _die_with_parent() -> None:
    """In the child before exec: the kernel SIGKILLs it when the thread that started it dies (Linux). The thread,
    not the process: start a cluster from a thread that lives as long as the cluster (pytest's main thread does)."""
    if sys.platform == "linux":
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serving(port: int) -> bool:
    """True once ZooKeeper serves requests: it accepts connections before it has loaded its database, and a
    session asked for in between may time out (seen under load), so ask its ``srvr`` command for its mode."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(b"srvr")
            reply = b""
            while chunk := s.recv(4096):
                reply += chunk
    except OSError:
        return False
    return b"Mode: " in reply


class ZooKeeper:
    """A ZooKeeper server (``ZooKeeperServerMain`` from Debian's package, ``-Xmx256m``, admin server off)."""

    def __init__(self, workdir: Path, tick_time_ms: int = 500) -> None:
        self.workdir = workdir
        self.tick_time_ms = tick_time_ms
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / "zookeeper.out"

    def start(self, timeout: float = START_TIMEOUT_S) -> ZooKeeper:
        # ZooKeeper cannot report a port it chose, so a free one is probed; another process may take it in between,
        # which shows as an early exit: then once more on another port.
        for attempt in range(2):
            self.port = _free_port()
            self.workdir.mkdir(parents=True, exist_ok=True)
            cmd = zookeeper_command(self.workdir, self.port, self.tick_time_ms)
            with open(self.log_path, "ab") as out:
                self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                             start_new_session=True, preexec_fn=_die_with_parent)
            _LIVE.add(self)
            try:
                wait_until(lambda: self._up(), timeout, f"ZooKeeper to serve on {self.connect}", 0.1)
                return self
            except RuntimeError:
                if attempt == 1:
                    raise
            except TimeoutError:
                self.stop()
                raise TimeoutError(f"ZooKeeper did not serve on {self.connect} within {timeout:.0f}s:\n"
                                   f"{self.tail()}") from None
        raise AssertionError("unreachable")

    def _up(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            _LIVE.discard(self)
            raise RuntimeError(f"ZooKeeper exited with {self.proc.returncode}:\n{self.tail()}")
        return _serving(self.port)

    def stop(self) -> None:
        _LIVE.discard(self)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no output)"


def _stop_all() -> None:
    for thing in list(_LIVE):
        try:
            thing.stop()
        except Exception:  # noqa: BLE001 - exiting anyway; the kernel ends what is left
            pass


atexit.register(_stop_all)
