"""A small order service: consumes orders from one topic and produces a confirmation (or a rejection) per order.

An order is JSON ``{"order_id": "o-1", "item": "pen", "quantity": 3, "unit_price": 1.5}`` keyed by customer; the
answer goes to the confirmations topic under the same key: ``{"order_id": "o-1", "status": "confirmed",
"total": 4.5}`` or ``{"order_id": "o-1", "status": "rejected", "reason": "quantity must be positive"}``.
Delivery is at least once: the consumer's offset is committed only after the answer is acknowledged.

Two runners over the same logic, one per client library: `run_confluent` (confluent-kafka, blocking) and
`run_aiokafka` (aiokafka, asyncio). Its tests (tests/) run both against `moldau.testing`'s brokers.

    python examples/order_service/order_service.py --bootstrap 127.0.0.1:9092 [--client aiokafka]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
from dataclasses import dataclass

ORDERS = "orders"
CONFIRMATIONS = "order-confirmations"


@dataclass(frozen=True)
class Topics:
    orders: str = ORDERS
    confirmations: str = CONFIRMATIONS
    group: str = "order-service"


def answer(order: bytes) -> bytes:
    """The confirmation or rejection of one order (the service's whole business logic)."""
    try:
        data = json.loads(order)
        order_id = str(data["order_id"])
    except (ValueError, KeyError, TypeError):
        return json.dumps({"order_id": None, "status": "rejected", "reason": "not an order"}).encode()
    quantity, price = data.get("quantity"), data.get("unit_price")
    if not isinstance(quantity, int) or quantity <= 0:
        reason = "quantity must be positive"
    elif not isinstance(price, int | float) or price < 0:
        reason = "unit_price must not be negative"
    else:
        total = round(quantity * price, 2)
        return json.dumps({"order_id": order_id, "status": "confirmed", "total": total}).encode()
    return json.dumps({"order_id": order_id, "status": "rejected", "reason": reason}).encode()


def run_confluent(bootstrap_servers: str, stop: threading.Event, topics: Topics = Topics()) -> int:
    """Serves orders with confluent-kafka until `stop` is set; returns how many it answered."""
    from confluent_kafka import Consumer, KafkaException, Producer

    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": topics.group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    producer = Producer({"bootstrap.servers": bootstrap_servers, "acks": "all", "enable.idempotence": True})
    answered = 0
    try:
        consumer.subscribe([topics.orders])
        while not stop.is_set():
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            producer.produce(topics.confirmations, answer(msg.value() or b""), key=msg.key())
            if producer.flush(30) != 0:
                raise RuntimeError("a confirmation was not acknowledged within 30 s")
            consumer.commit(message=msg, asynchronous=False)
            answered += 1
    finally:
        consumer.close()
    return answered


async def run_aiokafka(bootstrap_servers: str, stop: asyncio.Event, topics: Topics = Topics()) -> int:
    """Serves orders with aiokafka until `stop` is set; returns how many it answered."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    consumer = AIOKafkaConsumer(topics.orders, bootstrap_servers=bootstrap_servers, group_id=topics.group,
                                auto_offset_reset="earliest", enable_auto_commit=False)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap_servers, acks="all", enable_idempotence=True)
    await consumer.start()
    await producer.start()
    answered = 0
    try:
        while not stop.is_set():
            batches = await consumer.getmany(timeout_ms=200)
            for records in batches.values():
                for record in records:
                    await producer.send_and_wait(topics.confirmations, answer(record.value or b""), key=record.key)
                    answered += 1
            if batches:
                await consumer.commit()
    finally:
        await consumer.stop()
        await producer.stop()
    return answered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--client", choices=("confluent", "aiokafka"), default="confluent")
    args = parser.parse_args()
    try:
        if args.client == "confluent":
            run_confluent(args.bootstrap, threading.Event())
        else:
            asyncio.run(run_aiokafka(args.bootstrap, asyncio.Event()))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
