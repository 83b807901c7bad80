"""Rates, throttle times and what is recorded per request (broker/quotas.py), on a hand-moved clock."""

from __future__ import annotations

from typing import Any

import pytest

from moldau.broker.quota_config import DEFAULT, QuotaEntity
from moldau.broker.quotas import BrokerQuotas, Rate, fetch_response_bytes
from moldau.broker.request_channel import Request
from moldau.protocol.api import REGISTRY, ApiKey
from moldau.protocol.header import RequestHeader
from moldau.protocol.types import INT32


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def request(api_key: int, size: int, client_id: str = "app", principal: str = "User:ANONYMOUS",
            response: dict[str, Any] | None = None, replica_id: int = -1, version: int = 4) -> Request:
    frame = bytearray(size)
    INT32.pack_into(frame, 0, replica_id)  # Fetch: replica_id is the body's first field (v4-12)
    r = Request(RequestHeader(api_key, version, 1, client_id), REGISTRY[api_key], frame, 0, "127.0.0.1",
                principal=principal)
    r.response = response if response is not None else {"throttle_time_ms": 0}
    return r


def test_rate_is_kafkas_sampled_rate_with_a_minimum_window() -> None:
    rate = Rate(11, 1000, 0.0)
    rate.record(1000.0, 0.0)
    # A young rate divides by (num - 1) samples, never by the short time it has existed.
    assert rate.window_ms(0.0) == 10_000 and rate.measure(0.0) == pytest.approx(100.0)
    for t in range(1, 30):
        rate.record(1000.0, t * 1000.0)
    # Steady 1000/s: the 11 live samples span 10-11 s; the old ones have expired.
    assert rate.measure(29_500.0) == pytest.approx(11_000 / 10.5)
    assert rate.measure(100_000.0) == 0.0  # everything expired


def test_throttle_time_brings_the_rate_back_to_the_quota() -> None:
    clock = Clock()
    quotas = BrokerQuotas(clock=clock)
    quotas.configs.set(QuotaEntity(None, DEFAULT), {"producer_byte_rate": 1000.0})
    # Within the quota over the (minimum) 10 s window: no throttle.
    assert quotas.throttle(request(ApiKey.PRODUCE, 5_000 - 4), 0.0) == 0
    # 20 000 bytes in a 10 s window = 2000 B/s, twice the quota: silent for (2000-1000)/1000 x 10 s.
    r = request(ApiKey.PRODUCE, 15_000 - 4)
    assert quotas.throttle(r, 0.0) == 10_000
    assert r.response == {"throttle_time_ms": 10_000}
    rows = list(quotas.metric_rows())
    assert rows == [("produce", "", "app", 1000.0, pytest.approx(2000.0), 10_000.0, 20_000.0)]


@pytest.mark.parametrize("size", [1_000, 50_000])  # up to 5 s of quota per request
def test_a_client_that_honours_its_throttle_times_gets_its_quota(size: int) -> None:
    """Requests back to back, each after the previous throttle time: over ten minutes (after the first
    window's allowance) the client is held to its quota. (As with Kafka's rate, requests larger than the quota
    over the window can overshoot it: the window forgets them before the client is through.)"""
    clock = Clock()
    quotas = BrokerQuotas(clock=clock)
    quotas.configs.set(QuotaEntity(None, DEFAULT), {"producer_byte_rate": 10_000.0})
    sent, start, throttled = 0, None, 0
    while clock.now < 1000.0 + 600:
        throttle = quotas.throttle(request(ApiKey.PRODUCE, size - 4), 0.0)
        if clock.now >= 1030.0:
            start = clock.now if start is None else start
            sent += size
        throttled += throttle > 0
        clock.now += throttle / 1000 + 0.01  # 10 ms per request: far above the quota when not throttled
    assert start is not None and throttled > 10
    assert sent / (clock.now - start) == pytest.approx(10_000, rel=0.1)


def test_entities_share_a_rate_as_kafka_tags_them() -> None:
    clock = Clock()
    quotas = BrokerQuotas(clock=clock)
    quotas.configs.set(QuotaEntity("alice"), {"producer_byte_rate": 1000.0})  # shared by alice's clients
    quotas.configs.set(QuotaEntity(None, DEFAULT), {"producer_byte_rate": 1000.0})  # each client id its own
    assert quotas.throttle(request(ApiKey.PRODUCE, 9_996, "a", "User:alice"), 0.0) == 0
    assert quotas.throttle(request(ApiKey.PRODUCE, 9_996, "b", "User:alice"), 0.0) > 0
    assert quotas.throttle(request(ApiKey.PRODUCE, 9_996, "a", "User:bob"), 0.0) == 0
    assert quotas.throttle(request(ApiKey.PRODUCE, 9_996, "b", "User:bob"), 0.0) == 0
    assert set(quotas.produce.sensors) == {("alice", ""), ("", "a"), ("", "b")}
    # A changed quota applies to the running rate at once.
    quotas.configs.set(QuotaEntity("alice"), {"producer_byte_rate": 1e9})
    assert quotas.throttle(request(ApiKey.PRODUCE, 9_996, "c", "User:alice"), 0.0) == 0


def test_fetch_counts_consumer_record_bytes_and_sizes_responses() -> None:
    clock = Clock()
    quotas = BrokerQuotas(clock=clock)
    assert quotas.fetch_limit(request(ApiKey.FETCH, 64)) is None
    quotas.configs.set(QuotaEntity(None, "app"), {"consumer_byte_rate": 100.0})
    assert quotas.fetch_limit(request(ApiKey.FETCH, 64)) == 1000.0  # quota x (num - 1) samples
    response = {"throttle_time_ms": 0, "responses": [{"partitions": [{"records": b"x" * 3000},
                                                                      {"records": b""}]}]}
    assert fetch_response_bytes(response) == 3000
    # 3000 bytes in the 10 s window = 300 B/s: silent for (300 - 100) / 100 x 10 s.
    assert quotas.throttle(request(ApiKey.FETCH, 64, response=response), 0.0) == 20_000
    # A follower's fetch is replication: never counted or throttled.
    follower = request(ApiKey.FETCH, 64, response=dict(response), replica_id=2)
    assert quotas.throttle(follower, 0.0) == 0


def test_request_percentage_counts_handler_time() -> None:
    clock = Clock()
    quotas = BrokerQuotas(clock=clock)
    quotas.configs.set(QuotaEntity(DEFAULT), {"request_percentage": 1.0})  # 1% of a thread = 10 ms/s
    assert quotas.throttle(request(ApiKey.METADATA, 16), 0.05) == 0  # 50 ms over a 10 s window = 0.5%
    assert quotas.throttle(request(ApiKey.METADATA, 16), 0.15) == 10_000  # 200 ms = 2%: twice the quota
    assert quotas.throttle(request(ApiKey.LEADER_AND_ISR, 16), 5.0) == 0  # cluster actions are exempt


def test_connection_creation_rates() -> None:
    clock = Clock()
    quotas = BrokerQuotas(clock=clock, max_connection_creation_rate=1)
    delays = [quotas.connection_delay("10.0.0.1")[0] for _ in range(12)]
    assert delays[:10] == [0.0] * 10 and delays[-1] > 0  # 10 in the 10 s minimum window, then waits
    quotas.configs.set(QuotaEntity(ip="10.0.0.2"), {"connection_creation_rate": 0.5})
    refused = [quotas.connection_delay("10.0.0.2")[1] for _ in range(7)]
    assert refused == [False] * 5 + [True] * 2
    assert not quotas.connection_delay("10.0.0.3")[1]


@pytest.mark.parametrize(("api_key", "strict_from"), [(ApiKey.CREATE_TOPICS, 6), (ApiKey.DELETE_TOPICS, 5),
                                                      (ApiKey.CREATE_PARTITIONS, 3)])
def test_controller_mutation_rate_is_strict_for_new_versions(api_key: int, strict_from: int) -> None:
    """KIP-599: a token bucket of quota x 11 x 1 s partitions; a request from a version that knows
    THROTTLING_QUOTA_EXCEEDED is refused while the bucket is below zero, an older one is only throttled."""
    clock = Clock()
    quotas = BrokerQuotas(clock=clock)
    assert quotas.mutations(request(api_key, 16, version=strict_from)) is None  # no quota: no budget
    quotas.configs.set(QuotaEntity(None, "app"), {"controller_mutation_rate": 2.0})  # bucket: 22 partitions
    budget = quotas.mutations(request(api_key, 16, version=strict_from))
    assert budget is not None and budget.strict and not budget.refused()
    budget.record(20)
    assert not budget.refused() and budget.throttle_ms() == 0
    budget.record(10)  # accepted while the bucket was above zero: now 8 below
    assert budget.refused() and budget.throttle_ms() == 4000  # 8 partitions at 2/s
    old = quotas.mutations(request(api_key, 16, version=strict_from - 1))
    assert old is not None and not old.strict and not old.refused()
    # The network layer mutes the channel for the response's throttle time.
    r = request(api_key, 16, version=strict_from, response={"throttle_time_ms": budget.throttle_ms()})
    assert quotas.throttle(r, 0.0) == 4000
    clock.now += 4.0
    assert not budget.refused() and budget.throttle_ms() == 0
    assert quotas.mutations(request(api_key, 16, client_id="other")) is None


def test_the_worker_pool_measures_cpu_time_while_a_request_percentage_quota_is_set() -> None:
    """The handler's CPU time (a system call to read, twice per request) is measured only while some
    request_percentage quota is set, the only reader of it; otherwise the wall-clock fallback applies."""
    from moldau.broker.handler_pool import HandlerPool
    from moldau.broker.metrics import BrokerMetrics
    from moldau.broker.request_channel import RequestChannel

    quotas = BrokerQuotas(clock=Clock())
    pool = HandlerPool(RequestChannel(1), {ApiKey.METADATA: lambda ctx, r, body: {}}, None, 1, BrokerMetrics(),
                       cpu_quota=quotas.request)
    body = REGISTRY[ApiKey.METADATA].encode_request(1, {"topics": []})

    def handled() -> Request:
        r = Request(RequestHeader(ApiKey.METADATA, 1, 1, "app"), REGISTRY[ApiKey.METADATA], body, 0, "127.0.0.1")
        pool.handle_timed(r)
        assert r.response == {}
        return r

    assert handled().cpu_seconds == -1.0
    quotas.configs.set(QuotaEntity(DEFAULT), {"request_percentage": 50.0})
    assert handled().cpu_seconds >= 0.0
    quotas.configs.set(QuotaEntity(DEFAULT), {})
    assert handled().cpu_seconds == -1.0
