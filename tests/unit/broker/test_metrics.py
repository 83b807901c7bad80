from __future__ import annotations

import random
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter, generate_latest

from moldau.broker.metrics import BrokerMetrics, IdleMeter


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def metrics() -> Iterator[BrokerMetrics]:
    m = BrokerMetrics(num_io_threads=4)
    yield m
    m.close()


# --- IdleMeter


def test_idle_near_one_without_busy_time(clock: FakeClock) -> None:
    meter = IdleMeter(4, window_s=10, clock=clock)
    assert meter.idle_ratio() == 1.0
    clock.advance(25)
    assert meter.idle_ratio() == pytest.approx(1.0)


def test_idle_near_zero_when_every_worker_busy_all_window(clock: FakeClock) -> None:
    n = 4
    meter = IdleMeter(n, window_s=10, clock=clock)
    for _ in range(300):  # 30 s of 100-ms requests on every worker
        clock.advance(0.1)
        for _ in range(n):
            meter.record_busy(0.1)
    assert meter.idle_ratio() == pytest.approx(0.0, abs=1e-9)


def test_idle_half_when_half_the_workers_busy(clock: FakeClock) -> None:
    meter = IdleMeter(4, window_s=10, clock=clock)
    for _ in range(200):
        clock.advance(0.1)
        meter.record_busy(0.1)
        meter.record_busy(0.1)
    assert meter.idle_ratio() == pytest.approx(0.5, abs=1e-6)


def test_busy_time_slides_out_of_the_window(clock: FakeClock) -> None:
    meter = IdleMeter(1, window_s=10, clock=clock)
    clock.advance(20)
    meter.record_busy(5)  # busy for the 5 s just gone
    assert meter.idle_ratio() == pytest.approx(0.5)
    clock.advance(6)
    assert 0.5 < meter.idle_ratio() < 1.0
    clock.advance(10)
    assert meter.idle_ratio() == pytest.approx(1.0)


def test_young_meter_is_not_flattered(clock: FakeClock) -> None:
    meter = IdleMeter(1, window_s=10, clock=clock)
    clock.advance(2)
    meter.record_busy(2)  # busy since it was created
    assert meter.idle_ratio() == pytest.approx(0.0, abs=1e-9)
    meter.record_busy(100)  # cannot claim time before the meter existed
    assert meter.idle_ratio() == 0.0


def test_long_job_spreads_over_buckets(clock: FakeClock) -> None:
    meter = IdleMeter(1, window_s=10, clock=clock)
    clock.advance(30)
    meter.record_busy(3)
    clock.advance(8.5)
    # the window is now the last 10 s, from 1.5 s before the job ended; the job's bucket straddling the window
    # start counts half (0.5 s), the next one fully (1 s)
    assert meter.idle_ratio() == pytest.approx(1 - 1.5 / 10, abs=1e-9)


def test_in_flight_work_counts(clock: FakeClock) -> None:
    meter = IdleMeter(2, window_s=10, clock=clock)
    clock.advance(10)
    with meter.busy():
        clock.advance(10)
        assert meter.idle_ratio() == pytest.approx(0.5, abs=1e-6)
    assert meter.idle_ratio() == pytest.approx(0.5, abs=1e-6)
    clock.advance(10)
    assert meter.idle_ratio() == pytest.approx(1.0)


def test_bad_meter_arguments() -> None:
    with pytest.raises(ValueError):
        IdleMeter(0)
    with pytest.raises(ValueError):
        IdleMeter(1, window_s=0.5, bucket_s=1)


def test_recording_within_the_current_bucket_adds_what_the_locked_path_adds(clock: FakeClock) -> None:
    """record_busy's lock-free case (an interval inside the bucket written last) leaves exactly the buckets the
    general path leaves, across bucket boundaries, long intervals and the meter's start."""
    meter = IdleMeter(1, window_s=10, clock=clock)
    reference = IdleMeter(1, window_s=10, clock=clock)
    rng = random.Random(7)
    for step in range(5000):
        clock.advance(rng.choice((0.0, 0.0001, 0.003, 0.2, 0.7, 2.5)))
        seconds = rng.choice((0.0, 0.00002, 0.0004, 0.05, 0.3, 1.2, 30.0))
        meter.record_busy(seconds)
        if seconds > 0:
            with reference._lock:
                reference._add(max(clock.now - seconds, reference._start), clock.now)
        if step % 97 == 0:
            assert meter._buckets == reference._buckets
            assert meter.idle_ratio() == reference.idle_ratio()
    assert meter._buckets == reference._buckets


def test_bucket_memory_is_bounded(clock: FakeClock) -> None:
    meter = IdleMeter(1, window_s=10, clock=clock)
    for _ in range(10_000):
        clock.advance(0.5)
        meter.record_busy(0.1)
    assert len(meter._buckets) <= meter.n_buckets + 2


# --- BrokerMetrics


def _value(m: BrokerMetrics, name: str, labels: dict[str, str] | None = None) -> float | None:
    return m.registry.get_sample_value(name, labels or {})


def test_recording_methods(metrics: BrokerMetrics) -> None:
    metrics.request_done("Produce", 0.002)
    metrics.request_done("Produce", 0.5)
    metrics.request_done("Fetch", 0.00005)
    metrics.bytes_in(100)
    metrics.bytes_out(1000, sendfile=900)
    metrics.bytes_out(50)
    metrics.fetch_copied(7)
    metrics.connections(1)
    metrics.connections(1)
    metrics.connections(-1)
    assert _value(metrics, "moldau_requests_total", {"api": "Produce"}) == 2
    assert _value(metrics, "moldau_request_latency_seconds_count", {"api": "Produce"}) == 2
    assert _value(metrics, "moldau_request_latency_seconds_bucket", {"api": "Fetch", "le": "0.0001"}) == 1
    assert _value(metrics, "moldau_request_latency_seconds_bucket", {"api": "Produce", "le": "10.0"}) == 2
    assert _value(metrics, "moldau_bytes_in_total") == 100
    assert _value(metrics, "moldau_bytes_out_total") == 1050
    assert _value(metrics, "moldau_fetch_sendfile_bytes_total") == 900
    assert _value(metrics, "moldau_fetch_copied_bytes_total") == 7
    assert _value(metrics, "moldau_connections") == 1


def test_callback_gauges(metrics: BrokerMetrics) -> None:
    queue: list[int] = [1, 2, 3]
    metrics.set_request_queue_size_callback(lambda: len(queue))
    metrics.track_purgatory("Produce", lambda: 4)
    metrics.track_purgatory("Fetch", lambda: 9)
    metrics.set_under_replicated_callback(lambda: 2)
    metrics.set_partition_callbacks(lambda: 12, lambda: 6)
    assert _value(metrics, "moldau_request_queue_size") == 3
    queue.append(4)
    assert _value(metrics, "moldau_request_queue_size") == 4
    assert _value(metrics, "moldau_purgatory_size", {"purgatory": "Produce"}) == 4
    assert _value(metrics, "moldau_purgatory_size", {"purgatory": "Fetch"}) == 9
    assert _value(metrics, "moldau_under_replicated_partitions") == 2
    assert _value(metrics, "moldau_partitions") == 12
    assert _value(metrics, "moldau_leader_partitions") == 6


def test_failing_callback_does_not_break_scrape(metrics: BrokerMetrics) -> None:
    def broken() -> float:
        raise RuntimeError("gone")

    metrics.set_under_replicated_callback(broken)
    text = metrics.render().decode()
    assert "moldau_under_replicated_partitions NaN" in text


def test_idle_gauges_follow_meters() -> None:
    clock = FakeClock()
    m = BrokerMetrics(num_io_threads=2, num_network_threads=1, clock=clock)
    clock.advance(10)
    m.handler_busy(10)
    m.network_busy(2.5)
    assert _value(m, "moldau_request_handler_avg_idle_ratio") == pytest.approx(0.5)
    assert _value(m, "moldau_network_processor_avg_idle_ratio") == pytest.approx(0.75)


def test_byte_counters_are_exposed_as_prometheus_counters() -> None:
    """The socket byte counts (plain ints, not prometheus_client Counters) read as Counters would: a _total and a
    _created sample each, same help and type lines."""
    m = BrokerMetrics()
    m.bytes_in(5)
    m.bytes_out(70, sendfile=60)
    m.fetch_copied(3)
    lines = m.render().decode().splitlines()
    expected = CollectorRegistry()
    for name, doc, value in (("moldau_bytes_in_total", "Bytes read from client sockets", 5),
                             ("moldau_bytes_out_total", "Bytes written to client sockets, sendfile included", 70),
                             ("moldau_fetch_sendfile_bytes_total", "Fetch record bytes sent with sendfile (zero-copy)",
                              60),
                             ("moldau_fetch_copied_bytes_total", "Fetch record bytes copied through user space", 3)):
        Counter(name, doc, registry=expected).inc(value)
    for line in generate_latest(expected).decode().splitlines():
        if "_created " in line and not line.startswith("#"):
            name = line.split(" ")[0]
            assert any(mine.startswith(name + " ") for mine in lines), name
        else:
            assert line in lines, line


def test_registries_are_per_broker() -> None:
    a, b = BrokerMetrics(), BrokerMetrics()
    a.bytes_in(5)
    assert _value(a, "moldau_bytes_in_total") == 5
    assert _value(b, "moldau_bytes_in_total") == 0


def test_http_endpoint_serves_the_names(metrics: BrokerMetrics) -> None:
    from moldau.broker.launcher import live_brokers_metric

    metrics.request_done("Metadata", 0.001)
    metrics.set_live_brokers_callback(lambda: 3)
    port = metrics.start_http_server("127.0.0.1", 0)
    assert port > 0 and metrics.http_port == port
    assert live_brokers_metric(port) == 3  # what the launcher waits on before its usage text
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        assert resp.status == 200
        body = resp.read().decode()
    for name in ("moldau_request_handler_avg_idle_ratio", "moldau_network_processor_avg_idle_ratio",
                 'moldau_requests_total{api="Metadata"}', "moldau_request_latency_seconds_bucket",
                 "moldau_bytes_in_total", "moldau_bytes_out_total", "moldau_fetch_sendfile_bytes_total",
                 "moldau_fetch_copied_bytes_total", "moldau_request_queue_size",
                 "moldau_under_replicated_partitions",
                 "moldau_partitions", "moldau_leader_partitions", "moldau_connections"):
        assert name in body, name
    with pytest.raises(RuntimeError):
        metrics.start_http_server("127.0.0.1", 0)
    metrics.close()
    assert metrics.http_port is None
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)
    metrics.close()  # idempotent


def test_replication_metrics(metrics: BrokerMetrics) -> None:
    metrics.isr_changed(True)
    metrics.isr_changed(True)
    metrics.isr_changed(False)
    metrics.set_replication_callbacks(max_lag=lambda: 42.0, offline=lambda: 3.0)
    text = metrics.render().decode()
    assert "moldau_isr_shrinks_total 2.0" in text
    assert "moldau_isr_expands_total 1.0" in text
    assert "moldau_replica_max_lag 42.0" in text
    assert "moldau_offline_partitions 3.0" in text
