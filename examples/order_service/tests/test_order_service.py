"""The order service against real brokers from `moldau.testing`, driven with confluent-kafka and aiokafka.

One broker is shared by the module's single-broker tests (`broker_fixture(scope="module")`; each test uses its own
topics and group); the replication test has a ZooKeeper cluster of three brokers of its own (`moldau_cluster`).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import Consumer, Producer
from order_service import Topics, answer, run_aiokafka, run_confluent

from moldau.testing import MoldauBroker, MoldauCluster, broker_fixture

pytestmark = pytest.mark.integration  # starts brokers (and, once, ZooKeeper)

broker = broker_fixture(scope="module")

ORDERS = [
    (b"alice", {"order_id": "o-1", "item": "pen", "quantity": 3, "unit_price": 1.5}),
    (b"bob", {"order_id": "o-2", "item": "ink", "quantity": 0, "unit_price": 9.0}),
    (b"alice", {"order_id": "o-3", "item": "pad", "quantity": 2, "unit_price": 4.25}),
]
EXPECTED = {
    "o-1": {"order_id": "o-1", "status": "confirmed", "total": 4.5},
    "o-2": {"order_id": "o-2", "status": "rejected", "reason": "quantity must be positive"},
    "o-3": {"order_id": "o-3", "status": "confirmed", "total": 8.5},
}
TIMEOUT_S = 60.0


def _topics(target: MoldauBroker | MoldauCluster, partitions: int = 2) -> Topics:
    suffix = uuid.uuid4().hex[:8]
    return Topics(orders=target.create_topic(f"orders-{suffix}", partitions),
                  confirmations=target.create_topic(f"confirmations-{suffix}", partitions),
                  group=f"order-service-{suffix}")


def test_answer_is_pure_business_logic() -> None:
    assert json.loads(answer(b"not json")) == {"order_id": None, "status": "rejected", "reason": "not an order"}
    assert json.loads(answer(json.dumps(ORDERS[0][1]).encode())) == EXPECTED["o-1"]


@pytest.fixture
def confluent_service(request: pytest.FixtureRequest) -> Iterator[tuple[str, Topics]]:
    """The service's confluent-kafka runner in a thread against the broker or cluster named by the test's param."""
    target: MoldauBroker | MoldauCluster = request.getfixturevalue(request.param)
    topics = _topics(target)
    stop = threading.Event()
    failure: list[BaseException] = []

    def serve() -> None:
        try:
            run_confluent(target.bootstrap_servers, stop, topics)
        except BaseException as exc:  # noqa: BLE001 - reported by the fixture
            failure.append(exc)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield target.bootstrap_servers, topics
    stop.set()
    thread.join(TIMEOUT_S)
    assert not thread.is_alive(), "the service did not stop"
    assert not failure, f"the service failed: {failure[0]!r}"


def _confirmations(bootstrap: str, topic: str, count: int) -> dict[str, dict[str, object]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"checker-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: dict[str, dict[str, object]] = {}
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                value = json.loads(msg.value() or b"")
                got[value["order_id"]] = value
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("confluent_service", ["broker", "moldau_cluster"], indirect=True)
def test_confluent_service_answers_every_order(confluent_service: tuple[str, Topics]) -> None:
    bootstrap, topics = confluent_service
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for key, order in ORDERS:
        producer.produce(topics.orders, json.dumps(order).encode(), key=key)
    assert producer.flush(TIMEOUT_S) == 0
    assert _confirmations(bootstrap, topics.confirmations, len(ORDERS)) == EXPECTED


async def test_aiokafka_service_answers_every_order_under_the_customers_key(broker: MoldauBroker) -> None:
    topics = _topics(broker)
    stop = asyncio.Event()
    service = asyncio.create_task(run_aiokafka(broker.bootstrap_servers, stop, topics))
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all")
    consumer = AIOKafkaConsumer(topics.confirmations, bootstrap_servers=broker.bootstrap_servers,
                                auto_offset_reset="earliest", group_id=None)
    await producer.start()
    await consumer.start()
    try:
        for key, order in ORDERS:
            await producer.send_and_wait(topics.orders, json.dumps(order).encode(), key=key)
        got: dict[str, tuple[bytes | None, dict[str, object]]] = {}
        async with asyncio.timeout(TIMEOUT_S):
            while len(got) < len(ORDERS):
                record = await consumer.getone()
                value = json.loads(record.value or b"")
                got[value["order_id"]] = (record.key, value)
        assert {order_id: value for order_id, (_, value) in got.items()} == EXPECTED
        assert {order_id: key for order_id, (key, _) in got.items()} == {"o-1": b"alice", "o-2": b"bob",
                                                                         "o-3": b"alice"}
    finally:
        stop.set()
        await producer.stop()
        await consumer.stop()
        async with asyncio.timeout(TIMEOUT_S):
            answered = await service
    assert answered == len(ORDERS)
