"""KIP-848's consumer group protocol against a real broker, beside classic groups on the same topic.

librdkafka (confluent-kafka, ``group.protocol=consumer``) and Moldau's client (the same setting) share one
consumer group; two kafka-python members (classic JoinGroup/SyncGroup) read the same topic in another group.
Members run as subprocesses (tests/integration/group_consumer.py) that write a record only after its offset
commit succeeded, so "every record exactly once per group" is checkable across a member's death. The broker
runs with group.consumer.session.timeout.ms=6000 and heartbeats every 500 ms; every wait is bounded.
"""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .harness import BrokerProcess, wait_until
from .test_groups import PARTITIONS, Member, covers_all, create_topic, produce, read_by, wait_read

pytestmark = pytest.mark.integration

SESSION_TIMEOUT_S = 6.0
BROKER = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000",
          "offsets.topic.num.partitions": "3", "num.partitions": str(PARTITIONS),
          "group.consumer.session.timeout.ms": str(int(SESSION_TIMEOUT_S * 1000)),
          "group.consumer.min.session.timeout.ms": "1000", "group.consumer.heartbeat.interval.ms": "500",
          "group.consumer.min.heartbeat.interval.ms": "100"}


@pytest.fixture(scope="module")
def kip848_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path_factory.mktemp("kip848-broker"), overrides=dict(BROKER))
    try:
        broker.start()
        yield broker
    finally:
        try:
            broker.stop()
        finally:
            broker.kill()


@pytest.fixture
def started(tmp_path: Path) -> Iterator[list[Member]]:
    members: list[Member] = []
    yield members
    for m in members:
        if m.alive():
            m.proc.kill()
            m.proc.wait(timeout=10)


def _admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def test_consumer_protocol_group_beside_a_classic_group(kip848_broker: BrokerProcess, started: list[Member],
                                                        tmp_path: Path) -> None:
    from confluent_kafka import ConsumerGroupType

    bootstrap = kip848_broker.bootstrap
    topic, new_group, classic_group = (f"kip848-{uuid.uuid4().hex[:8]}", f"g848-{uuid.uuid4().hex[:6]}",
                                       f"gclassic-{uuid.uuid4().hex[:6]}")
    create_topic(bootstrap, topic)
    first = produce(bootstrap, topic, "a", 10)

    def member(client: str, group: str) -> Member:
        m = Member(client, bootstrap, topic, group, tmp_path, f"m{len(started)}-{client}")
        started.append(m)
        return m

    rdkafka, moldau = member("confluent-consumer", new_group), member("moldau-consumer", new_group)
    classic = [member("kafka-python", classic_group), member("kafka-python", classic_group)]
    new = [rdkafka, moldau]
    wait_until(lambda: covers_all(new), 60, "librdkafka and Moldau's client split the partitions (KIP-848)")
    wait_until(lambda: covers_all(classic), 60, "the classic group splits the partitions")
    wait_read(new, first, 60, "the consumer-protocol group reads the first batch")
    wait_read(classic, first, 60, "the classic group reads the first batch")

    admin = _admin(bootstrap)
    listed = {g.group_id: g for g in admin.list_consumer_groups(request_timeout=15).result().valid}
    assert listed[new_group].type == ConsumerGroupType.CONSUMER
    assert listed[classic_group].type == ConsumerGroupType.CLASSIC
    described = admin.describe_consumer_groups([new_group], request_timeout=15)[new_group].result()
    assert described.type == ConsumerGroupType.CONSUMER
    assert len(described.members) == 2
    assert sorted(p.partition for m in described.members for p in m.assignment.topic_partitions) == \
        list(range(PARTITIONS))

    # librdkafka's member dies (SIGKILL: no leave). It is idle (no new records since it committed the first
    # batch), so nothing it read is left uncommitted; its partitions must move within the session timeout.
    wait_until(lambda: bool(rdkafka.assignment()), 10, "librdkafka owns partitions before it dies")
    rdkafka.proc.send_signal(signal.SIGKILL)
    rdkafka.proc.wait(timeout=10)
    killed = time.monotonic()
    wait_until(lambda: sorted(moldau.assignment()) == list(range(PARTITIONS)), SESSION_TIMEOUT_S + 10,
               "Moldau's client takes over every partition")
    moved_after = time.monotonic() - killed
    assert moved_after < SESSION_TIMEOUT_S + 4, f"partitions moved {moved_after:.1f}s after the death"

    second = produce(bootstrap, topic, "b", 10)
    wait_read([moldau], second, 60, "the survivor reads the second batch")
    wait_read(classic, second, 60, "the classic group reads the second batch")
    for group, name in ((new, "consumer-protocol"), (classic, "classic")):
        counts = read_by(group)
        twice = [r for r, n in counts.items() if n > 1]
        assert not twice, f"{name} group consumed committed records twice, e.g. {twice[:5]}"
        assert set(counts) == first | second
