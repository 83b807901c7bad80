"""A group consumer run as a subprocess by test_groups.py (so that it can be SIGTERMed or SIGKILLed).

    python group_consumer.py CLIENT BOOTSTRAP TOPIC GROUP OUT_FILE

CLIENT is kafka-python, aiokafka or confluent (classic protocol), or confluent-consumer / moldau-consumer
(``group.protocol=consumer``, KIP-848: the broker's group.consumer.* settings time the session). It subscribes to
TOPIC in GROUP (session.timeout.ms 6000, heartbeats every second, earliest reset, no auto-commit) and writes JSON
lines to OUT_FILE:

    {"ev": "assigned", "partitions": [..]}     after every rebalance (eager: revoked first; incremental: the
                                                 whole assignment after each change)
    {"ev": "records", "items": [[partition, offset, value], ...]}   only after their commit succeeded
    {"ev": "closed"}                            after a clean close (SIGTERM)

Writing records only once their offsets are committed makes "every record exactly once across the group" a
property the test can check even when members come and go. Stand-alone: imports nothing from the repository
(moldau-consumer imports the installed moldau package).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import time
from typing import Any

SESSION_TIMEOUT_MS = 6000
HEARTBEAT_MS = 1000


class Out:
    def __init__(self, path: str) -> None:
        self.f = open(path, "a", buffering=1)

    def emit(self, ev: str, **fields: Any) -> None:
        self.f.write(json.dumps({"ev": ev, "t": time.time(), **fields}) + "\n")
        self.f.flush()


def kafka_python_metadata_before_join(consumer: Any) -> None:
    """Fetch the subscribed topics' metadata before kafka-python's first JoinGroup.

    kafka-python 3.0.12 loses a rebalance it started itself. Its coordinator keeps a "metadata snapshot" of the
    subscribed topics, rebuilt only when a Metadata answer arrives *after* subscribe(). If the first JoinGroup goes
    out before that answer, the leader assigns from an empty snapshot, sees the snapshot change, and rejoins. When
    that rejoin's SyncGroup answer lands just after poll()'s timeout (seen in 1 of 4 runs on a loaded machine),
    the assignment is never applied and, because only that rejoin wanted it, nothing retries: the member stays in
    the group without heartbeats or partitions until its session expires, and never rejoins (its debug log:
    "need_rejoin: False", heartbeat disabled, SyncGroup answered with error 0). A full Metadata fetch after
    subscribe() (what topics() does, waiting for the answer) builds the snapshot before the first join, so the
    leader's assignment matches it and the self-made rejoin never happens.
    """
    consumer.topics()


def run_kafka_python(bootstrap: str, topic: str, group: str, out: Out, stop: list[bool]) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer
    from kafka.errors import KafkaError

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: Any) -> None:
            out.emit("assigned", partitions=[])

        def on_partitions_assigned(self, assigned: Any) -> None:
            out.emit("assigned", partitions=sorted(tp.partition for tp in assigned))

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False, session_timeout_ms=SESSION_TIMEOUT_MS,
                             heartbeat_interval_ms=HEARTBEAT_MS, max_poll_interval_ms=20000)
    consumer.subscribe([topic], listener=Listener())
    kafka_python_metadata_before_join(consumer)
    while not stop[0]:
        batch = consumer.poll(timeout_ms=200)
        items = [[r.partition, r.offset, r.value.decode()] for recs in batch.values() for r in recs]
        if not items:
            continue
        try:
            consumer.commit()
        except KafkaError:
            continue  # a rebalance took the partitions: their next owner reads them from the last commit
        out.emit("records", items=items)
    consumer.close()
    out.emit("closed")


async def run_aiokafka(bootstrap: str, topic: str, group: str, out: Out, stop: list[bool]) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
    from aiokafka.errors import KafkaError

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: Any) -> None:
            out.emit("assigned", partitions=[])

        def on_partitions_assigned(self, assigned: Any) -> None:
            out.emit("assigned", partitions=sorted(tp.partition for tp in assigned))

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                                enable_auto_commit=False, session_timeout_ms=SESSION_TIMEOUT_MS,
                                heartbeat_interval_ms=HEARTBEAT_MS, max_poll_interval_ms=20000)
    consumer.subscribe([topic], listener=Listener())
    await consumer.start()
    while not stop[0]:
        batch = await consumer.getmany(timeout_ms=200)
        items = [[r.partition, r.offset, r.value.decode()] for recs in batch.values() for r in recs]
        if not items:
            continue
        try:
            await consumer.commit()
        except KafkaError:
            continue
        out.emit("records", items=items)
    await consumer.stop()
    out.emit("closed")


def run_confluent(bootstrap: str, topic: str, group: str, out: Out, stop: list[bool],
                  protocol: str = "classic") -> None:
    from confluent_kafka import Consumer, KafkaException

    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                              "enable.auto.commit": False, "max.poll.interval.ms": 20000}
    if protocol == "consumer":  # librdkafka refuses the classic session settings under KIP-848
        config["group.protocol"] = "consumer"
    else:
        config.update({"session.timeout.ms": SESSION_TIMEOUT_MS, "heartbeat.interval.ms": HEARTBEAT_MS})
    consumer = Consumer(config)
    if protocol == "consumer":  # incremental: the callbacks get only what changed
        owned: set[int] = set()

        def assigned(c: Any, ps: Any) -> None:
            owned.update(p.partition for p in ps)
            out.emit("assigned", partitions=sorted(owned))

        def revoked(c: Any, ps: Any) -> None:
            owned.difference_update(p.partition for p in ps)
            out.emit("assigned", partitions=sorted(owned))

        consumer.subscribe([topic], on_assign=assigned, on_revoke=revoked, on_lost=revoked)
    else:
        consumer.subscribe([topic],
                           on_assign=lambda c, ps: out.emit("assigned", partitions=sorted(p.partition for p in ps)),
                           on_revoke=lambda c, ps: out.emit("assigned", partitions=[]))
    while not stop[0]:
        msgs = [m for m in consumer.consume(num_messages=500, timeout=0.2) if m.error() is None]
        if not msgs:
            continue
        try:
            consumer.commit(asynchronous=False)
        except KafkaException:
            continue
        out.emit("records", items=[[m.partition(), m.offset(), (m.value() or b"").decode()] for m in msgs])
    consumer.close()
    out.emit("closed")


async def run_moldau(bootstrap: str, topic: str, group: str, out: Out, stop: list[bool]) -> None:
    from moldau.aio import Consumer, ConsumerRebalanceListener
    from moldau.errors import KafkaError

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: Any) -> None:
            out.emit("assigned", partitions=sorted(tp.partition for tp in consumer.assignment() - set(revoked)))

        def on_partitions_lost(self, lost: Any) -> None:
            self.on_partitions_revoked(lost)

        def on_partitions_assigned(self, assigned: Any) -> None:
            out.emit("assigned", partitions=sorted(tp.partition for tp in consumer.assignment()))

    await consumer.start()
    consumer.subscribe([topic], listener=Listener())
    while not stop[0]:
        batch = await consumer.getmany(timeout_ms=200)
        items = [[r.partition, r.offset, r.value.decode()] for recs in batch.values() for r in recs]
        if not items:
            continue
        try:
            await consumer.commit()
        except KafkaError:
            continue
        out.emit("records", items=items)
    await consumer.close()
    out.emit("closed")


def main() -> int:
    client, bootstrap, topic, group, path = sys.argv[1:6]
    out = Out(path)
    # The client's own log on stderr: the test prints its tail when a member misbehaves.
    logging.basicConfig(stream=sys.stderr, level=os.environ.get("GROUP_CONSUMER_LOG_LEVEL", "INFO"),
                        format="%(asctime)s %(threadName)s %(name)s %(levelname)s %(message)s")
    stop = [False]
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
    if client == "kafka-python":
        run_kafka_python(bootstrap, topic, group, out, stop)
    elif client == "aiokafka":
        asyncio.run(run_aiokafka(bootstrap, topic, group, out, stop))
    elif client == "confluent":
        run_confluent(bootstrap, topic, group, out, stop)
    elif client == "confluent-consumer":
        run_confluent(bootstrap, topic, group, out, stop, protocol="consumer")
    elif client == "moldau-consumer":
        asyncio.run(run_moldau(bootstrap, topic, group, out, stop))
    else:
        raise SystemExit(f"unknown client {client}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
