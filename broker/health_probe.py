"""The launcher's health probe: does a broker still answer a request? A paused (SIGSTOP) or hung broker keeps its
port open (the kernel accepts connections into the backlog) and its process alive, so neither a port check nor
``poll()`` notices; an ApiVersions request that gets no answer does."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable

PROBE_INTERVAL_S = 2.0  # between two probes of one broker
PROBE_TIMEOUT_S = 3.0  # for the connection and the answer
PROBE_FAILURES = 2  # consecutive failed probes before the broker is reported (a loaded machine may miss one)

# ApiVersions v0: api_key 18, version 0, correlation id 1, client id "moldau-launcher-probe"
_CLIENT_ID = b"moldau-launcher-probe"
_BODY = struct.pack(">hhih", 18, 0, 1, len(_CLIENT_ID)) + _CLIENT_ID
_REQUEST = struct.pack(">i", len(_BODY)) + _BODY


def answers(host: str, port: int, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """True when the broker answers an ApiVersions request (any answer with our correlation id) in time."""
    deadline = time.monotonic() + timeout
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(_REQUEST)
            got = b""
            while len(got) < 8:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                sock.settimeout(left)
                chunk = sock.recv(8 - len(got))
                if not chunk:
                    return False
                got += chunk
            return struct.unpack(">i", got[4:8])[0] == 1
    except OSError:
        return False


class HealthWatch:
    """Probes each broker every PROBE_INTERVAL_S; says once when one stops answering and once when it is back."""

    def __init__(self, say: Callable[[str], None], probe: Callable[[str, int], bool] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.say = say
        self.probe = probe or (lambda host, port: answers(host, port))
        self.clock = clock
        self.failures: dict[str, int] = {}
        self.reported: set[str] = set()
        self.next_probe: dict[str, float] = {}

    def check(self, name: str, pid: int, port: int, log: str) -> None:
        now = self.clock()
        if now < self.next_probe.get(name, 0.0):
            return
        ok = self.probe("127.0.0.1", port)
        self.next_probe[name] = self.clock() + PROBE_INTERVAL_S
        if ok:
            self.failures[name] = 0
            if name in self.reported:
                self.reported.discard(name)
                self.say(f"launcher: {name} (pid {pid}) answers again on 127.0.0.1:{port}")
            return
        self.failures[name] = self.failures.get(name, 0) + 1
        if self.failures[name] >= PROBE_FAILURES and name not in self.reported:
            self.reported.add(name)
            self.say(f"launcher: {name} (pid {pid}) is not answering on 127.0.0.1:{port}: no ApiVersions answer "
                     f"in {PROBE_TIMEOUT_S:.0f} s, {self.failures[name]} times in a row (paused or hung?); "
                     f"see {log}")
