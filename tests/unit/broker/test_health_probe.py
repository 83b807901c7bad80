"""The launcher's health watch on a fake probe and clock; the probe itself against a socket that accepts and
never answers (what a SIGSTOPped broker looks like) and one that answers (tests/integration/test_launcher.py
pauses a real broker)."""

from __future__ import annotations

import socket
import struct
import threading

from moldau.broker.health_probe import PROBE_FAILURES, PROBE_INTERVAL_S, HealthWatch, answers


def test_reports_once_after_consecutive_failures_and_once_on_recovery() -> None:
    said: list[str] = []
    up = [True]
    now = [0.0]
    watch = HealthWatch(said.append, probe=lambda _h, _p: up[0], clock=lambda: now[0])

    def tick() -> None:
        watch.check("broker-1", 42, 9092, "data/broker-1.log")
        now[0] += PROBE_INTERVAL_S

    tick()
    up[0] = False
    for _ in range(PROBE_FAILURES + 3):
        tick()
    assert len(said) == 1 and said[0].startswith("launcher: broker-1 (pid 42) is not answering on 127.0.0.1:9092")
    up[0] = True
    tick()
    tick()
    assert said[1:] == ["launcher: broker-1 (pid 42) answers again on 127.0.0.1:9092"]


def test_probe_needs_an_answer_not_only_a_connection() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert not answers("127.0.0.1", port, timeout=0.3)  # accepted by the kernel, never answered

        def answer_once() -> None:
            conn, _ = server.accept()
            with conn:
                conn.recv(1024)
                conn.sendall(struct.pack(">ii", 4, 1))

        # the first connection is still in the backlog: accept it and answer the next one
        server.accept()[0].close()
        thread = threading.Thread(target=answer_once)
        thread.start()
        assert answers("127.0.0.1", port, timeout=3)
        thread.join()
