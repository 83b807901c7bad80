"""The replication verification test driven by Moldau's own idempotent producer: leaders are stopped and killed
while it writes; every acknowledged value must be read exactly once, with no gap in the offsets (judged by
moldau-verify's checker, like the confluent-kafka and kafka-python runs in test_replication.py)."""

from __future__ import annotations

import signal
import time

import pytest

from moldau.broker.verify.checker import check
from moldau.broker.verify.history import FINAL_READ

from .harness import wait_until
from .test_cluster import Cluster, cluster, zookeeper  # noqa: F401
from .test_replication import Writer, bounce_leader, create_topic, read_all, start

pytestmark = pytest.mark.integration


class MoldauWriter(Writer):
    def _run(self) -> None:
        from moldau import Producer

        p = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all",
                      "linger.ms": 5, "delivery.timeout.ms": 120000, "retry.backoff.ms": 200,
                      "request.timeout.ms": 10000, "metadata.max.age.ms": 2000})
        t0 = time.monotonic()
        while not self.stop.is_set():
            n = self.sent
            p.send(self.topic, self._send(n), partition=0,
                   on_delivery=lambda err, meta, n=n: self._ok(n, meta.offset) if err is None
                   else self._failed(n, err))
            self.sent += 1
            self._pace(t0)
        p.flush(60)
        p.close(10)


@pytest.mark.slow
def test_moldau_producer_loses_and_duplicates_nothing_while_leaders_fail(cluster: Cluster) -> None:  # noqa: F811
    t_start = time.monotonic()
    start(cluster)
    topic = "verify"
    create_topic(cluster, topic)
    writer = MoldauWriter("moldau", cluster.bootstrap(), topic)
    writer.thread.start()
    try:
        wait_until(lambda: len(writer.acked) >= 100, 30,
                   "the first acknowledged writes")
        bounce_leader(cluster, topic, signal.SIGTERM)
        bounce_leader(cluster, topic, signal.SIGKILL)
        for _ in range(3):
            assert time.monotonic() - t_start < 150, "the fault schedule ran out of time"
            bounce_leader(cluster, topic, signal.SIGKILL)
        acked_before = len(writer.acked)
        wait_until(lambda: len(writer.acked) >= acked_before + 100, 30, "writes acknowledged after the last fault")
    finally:
        writer.stop.set()
        writer.thread.join(90)
    assert not writer.thread.is_alive()
    records = read_all(cluster.bootstrap(), topic)
    offsets = [o for o, _ in records]
    writer.history.read(FINAL_READ, [(0, o, v) for o, v in records])
    report = check(writer.history)
    print(f"\n[moldau] sent {writer.sent}, errors {len(writer.errors)} {writer.errors[:3]}\n{report.table()}")
    assert offsets == list(range(len(offsets))), "a gap in the offsets"
    assert report.ok, report.to_json()
    assert report.acked > 1000
