"""Connection limits on a real broker process: max.connections.per.ip (+ overrides), max.connections,
connections.max.idle.ms, and the budget for partially received frames (moldau.socket.partial.requests.max.bytes)
under a flood of idle and slow-loris sockets, while a confluent-kafka producer and consumer keep working.
"""

from __future__ import annotations

import logging
import re
import socket
import struct
import time
from collections.abc import Callable

import pytest

from .clients import ck_consumer
from .harness import BrokerProcess, RawConnection, request_header_v1, wait_until

pytestmark = pytest.mark.integration
log = logging.getLogger(__name__)

API_VERSIONS, PRODUCE = 18, 0
MIB = 1024 * 1024
IDLE_SOCKETS = 4800  # + 200 slow-loris = the 5,000 hostile connections of issue 13


def api_versions_ok(conn: RawConnection, correlation_id: int = 7) -> bool:
    conn.request(API_VERSIONS, 0, correlation_id, b"")
    response = conn.recv_frame()
    return struct.unpack(">ih", response[:6]) == (correlation_id, 0)


def metric(broker: BrokerProcess, name: str, reason: str) -> float:
    match = re.search(rf'^{name}{{reason="{re.escape(reason)}"}} (\S+)$', broker.fetch_metrics(), re.M)
    return float(match.group(1)) if match else 0.0


def open_working(broker: BrokerProcess) -> RawConnection:
    """A connection that answered ApiVersions. The harness's start-up probe may still count against the limits
    until the broker has read its close (it can even sit unaccepted in the backlog), so a refused attempt is
    retried with a new socket, bounded."""
    def attempt() -> RawConnection | None:
        conn = RawConnection(broker.port)
        try:
            if api_versions_ok(conn):
                return conn
        except (ConnectionError, OSError):
            pass
        conn.close()
        return None

    conn = wait_until(attempt, 10, "a connection within the limits answering")
    assert conn is not None
    return conn


def test_connections_over_the_per_ip_limit_are_closed_at_accept(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    # The override (5 for 127.0.0.1) wins over max.connections.per.ip=2.
    broker = broker_factory({"max.connections.per.ip": "2", "max.connections.per.ip.overrides": "127.0.0.1:5"})
    conns: list[RawConnection] = []
    try:
        for _ in range(5):
            conns.append(open_working(broker))
        extra = RawConnection(broker.port)
        extra.wait_closed(10)  # the 6th from this IP: accepted by the kernel, closed by the broker at once
        extra.close()
        assert all(api_versions_ok(c, 8 + i) for i, c in enumerate(conns)), "the allowed ones keep working"
        assert metric(broker, "moldau_connections_refused_total", "max.connections.per.ip") >= 1
        conns.pop().close()

        open_working(broker).close()  # once the broker has seen one of the five go, a new one is served
    finally:
        for c in conns:
            c.close()


def test_max_connections_closes_the_one_over_the_broker_wide_limit(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory({"max.connections": "3"})
    conns = [open_working(broker) for _ in range(3)]
    try:
        extra = RawConnection(broker.port)
        extra.wait_closed(10)
        extra.close()
        assert metric(broker, "moldau_connections_refused_total", "max.connections") >= 1
        assert api_versions_ok(conns[0], 99)
    finally:
        for c in conns:
            c.close()


def test_idle_connections_are_closed_after_connections_max_idle_ms(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory({"connections.max.idle.ms": "1500"})
    with RawConnection(broker.port) as idle, RawConnection(broker.port) as busy:
        t0 = time.monotonic()  # before idle's last request: the broker cannot have counted from earlier
        assert api_versions_ok(idle) and api_versions_ok(busy)
        closed_at: list[float] = []
        # The busy one sends a request every 300 ms and must stay open while the idle one is closed.
        while not closed_at and time.monotonic() - t0 < 15:
            assert api_versions_ok(busy, 11), "an active connection was closed"
            idle.sock.settimeout(0.3)
            try:
                if idle.sock.recv(1) == b"":
                    closed_at.append(time.monotonic() - t0)
            except TimeoutError:
                pass
            except ConnectionResetError:
                closed_at.append(time.monotonic() - t0)
        assert closed_at, "the idle connection was still open after 15 s"
        assert closed_at[0] >= 1.4, f"closed after {closed_at[0]:.2f}s, before connections.max.idle.ms"
        assert api_versions_ok(busy, 12)
    assert metric(broker, "moldau_connections_evicted_total", "idle") >= 1


@pytest.mark.slow
def test_idle_and_slow_loris_floods_keep_memory_bounded_and_clients_served(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    budget = 8 * MIB
    broker = broker_factory({"moldau.socket.partial.requests.max.bytes": str(budget)})
    topic = "flood"
    rss_before = broker.rss_bytes()
    idle: list[socket.socket] = []
    loris: list[socket.socket] = []
    try:
        for _ in range(IDLE_SOCKETS):
            idle.append(socket.create_connection(("127.0.0.1", broker.port), timeout=10))
        # Each slow-loris announces a 1 MiB produce request and sends 100 KiB of it: 20 MiB in all, over the
        # 8 MiB budget, so the broker must close the largest holders.
        head = struct.pack(">i", MIB) + request_header_v1(PRODUCE, 3, 1)
        for _ in range(200):
            s = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
            s.sendall(head + b"\x00" * (100 * 1024 - len(head)))
            loris.append(s)
        wait_until(lambda: metric(broker, "moldau_connections_evicted_total", "partial_request_memory") >= 100,
                   30, "slow-loris connections closed for the partial-frame budget")
        grown = broker.rss_bytes() - rss_before
        log.info("RSS grew by %.1f MiB with %d idle + 200 slow-loris sockets", grown / MIB, IDLE_SOCKETS)
        assert grown < 64 * MIB, f"RSS grew by {grown / MIB:.0f} MiB"
        latency = _confluent_round_trip(broker.bootstrap, topic)
        log.info("confluent-kafka produce+consume of 100 records beside the flood: %.2fs", latency)
        assert latency < 15, f"a well-behaved client took {latency:.1f}s"
        assert broker.rss_bytes() - rss_before < 64 * MIB
    finally:
        for s in idle + loris:
            s.close()
    assert broker.is_running(), broker.stderr_tail()


def _confluent_round_trip(bootstrap: str, topic: str) -> float:
    from confluent_kafka import Producer, TopicPartition

    t0 = time.monotonic()
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 20000})
    delivered: list[int] = []
    for i in range(100):
        producer.produce(topic, value=f"v{i}".encode(), partition=0,
                         on_delivery=lambda err, msg: delivered.append(msg.offset()) if err is None else None)
    assert producer.flush(20) == 0 and len(delivered) == 100
    consumer = ck_consumer(bootstrap)
    try:
        consumer.assign([TopicPartition(topic, 0, min(delivered))])
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(got) < 100 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        assert got == [f"v{i}".encode() for i in range(100)]
    finally:
        consumer.close()
    return time.monotonic() - t0

