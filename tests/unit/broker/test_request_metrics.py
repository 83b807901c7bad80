"""The request-time split (Kafka's RequestMetrics) as the real HandlerPool stamps it, the per-partition log size
and consumer-group lag series, and their scrape-time callbacks."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from moldau.broker.handler_pool import HandlerPool
from moldau.broker.metrics import BrokerMetrics
from moldau.broker.request_channel import Request, RequestChannel
from moldau.broker.server import consumer_group_lag
from moldau.protocol.api import REGISTRY, ApiKey
from moldau.protocol.header import RequestHeader
from moldau.protocol.records import build_batch

from .apis.handler_env import make_env

PARTS = ("moldau_request_queue_time_seconds", "moldau_request_local_time_seconds",
         "moldau_request_remote_time_seconds", "moldau_response_queue_time_seconds",
         "moldau_response_send_time_seconds")


@pytest.fixture
def metrics() -> Iterator[BrokerMetrics]:
    m = BrokerMetrics()
    yield m
    m.close()


def _sum(m: BrokerMetrics, name: str, api: str, what: str = "sum") -> float:
    value = m.registry.get_sample_value(f"{name}_{what}", {"api": api})
    assert value is not None, name
    return value


def test_request_done_observes_every_part(metrics: BrokerMetrics) -> None:
    metrics.request_done("Produce", 0.015, queue=0.001, local=0.002, remote=0.01, response_queue=0.0005,
                         send=0.0015)
    for name, expected in zip(PARTS, (0.001, 0.002, 0.01, 0.0005, 0.0015), strict=True):
        assert _sum(metrics, name, "Produce") == pytest.approx(expected)
        assert _sum(metrics, name, "Produce", "count") == 1
    assert _sum(metrics, "moldau_request_latency_seconds", "Produce") == pytest.approx(0.015)


class NoMetrics:
    def handler_busy(self, seconds: float) -> None:
        pass


def _request() -> Request:
    api = REGISTRY[ApiKey.API_VERSIONS]
    wire = api.encode_request(0, {})
    return Request(RequestHeader(int(ApiKey.API_VERSIONS), 0, 1, "unit-test"), api, wire, 0, "127.0.0.1")


async def _through_pool(handler: Any) -> tuple[float, float, float, float, float]:
    """Run one request through a real HandlerPool and split its time as the connection does."""
    channel = RequestChannel(10)
    pool = HandlerPool(channel, {int(ApiKey.API_VERSIONS): handler}, None, 1, NoMetrics())
    pool.start()
    try:
        request = _request()
        request.done = asyncio.get_running_loop().create_future()
        await channel.send_request(request)
        await asyncio.wait_for(request.done, 10)
        resumed = time.perf_counter()
        return request.split(resumed, time.perf_counter())
    finally:
        await pool.stop()


async def test_an_answer_from_the_handler_has_no_remote_time() -> None:
    parts = await _through_pool(lambda ctx, request, body: {"error_code": 0})
    queue, local, remote, response_queue, send = parts
    assert remote == 0.0
    assert min(parts) >= 0.0 and local > 0.0


async def test_a_parked_request_counts_its_wait_as_remote_time() -> None:
    async def parked(ctx: Any, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0.05)  # stands for a purgatory: the handler returned, the answer comes later
        return {"error_code": 0}

    parts = await _through_pool(parked)
    assert parts[2] >= 0.05
    assert min(parts) >= 0.0


def test_split_of_a_request_failed_before_dequeue_is_not_negative() -> None:
    request = _request()
    request.fail()
    parts = request.split(time.perf_counter(), time.perf_counter())
    assert min(parts) >= 0.0


def test_log_size_and_lag_callbacks(metrics: BrokerMetrics) -> None:
    metrics.set_log_size_callback(lambda: [("t", 0, 1234), ("t", 1, 0)])
    metrics.set_consumer_lag_callback(lambda: [("app", "t", 0, 7)])
    get = metrics.registry.get_sample_value
    assert get("moldau_log_size_bytes", {"topic": "t", "partition": "0"}) == 1234
    assert get("moldau_log_size_bytes", {"topic": "t", "partition": "1"}) == 0
    assert get("moldau_consumer_group_lag", {"group": "app", "topic": "t", "partition": "0"}) == 7
    metrics.set_last_stable_offset_lag_callback(lambda: [("t", 0, 5)])
    assert get("moldau_last_stable_offset_lag", {"topic": "t", "partition": "0"}) == 5


def test_a_failing_callback_leaves_the_scrape_working(metrics: BrokerMetrics) -> None:
    def broken() -> list[tuple[str, int, int]]:
        raise RuntimeError("boom")

    metrics.set_log_size_callback(broken)
    text = metrics.render().decode()
    assert "# TYPE moldau_log_size_bytes gauge" in text and "moldau_log_size_bytes{" not in text


async def test_lag_of_a_committed_group_on_a_partition_led_here(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    await env.create_topic("orders")
    batch = build_batch([(None, b"v%d" % i, [], 1000) for i in range(5)])
    answer = await env.call(ApiKey.PRODUCE, 8, {"acks": 1, "timeout_ms": 1000, "transactional_id": None,
                                               "topic_data": [{"name": "orders", "partition_data": [
                                                   {"index": 0, "records": batch}]}]})
    assert answer["responses"][0]["partition_responses"][0]["error_code"] == 0
    commit = {"group_id": "app", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
              "retention_time_ms": -1, "topics": [{"name": "orders", "partitions": [
                  {"partition_index": 0, "committed_offset": 2, "committed_leader_epoch": -1,
                   "committed_metadata": ""}]}]}
    found = await env.call(ApiKey.FIND_COORDINATOR, 3, {"key": "app", "key_type": 0})  # creates the offsets topic
    assert found["error_code"] == 0
    answer = await env.call(ApiKey.OFFSET_COMMIT, 7, commit)
    assert answer["topics"][0]["partitions"][0]["error_code"] == 0
    rows = consumer_group_lag(env.coordinator.store.groups, env.replica_manager.partitions)
    assert rows == [("app", "orders", 0, 3)]
    # A partition this broker does not lead has no high watermark worth reporting here.
    env.replica_manager.partitions[("orders", 0)].leader_id = 99
    assert consumer_group_lag(env.coordinator.store.groups, env.replica_manager.partitions) == []
