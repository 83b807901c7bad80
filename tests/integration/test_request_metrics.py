"""Kafka's RequestMetrics split on a real three-broker cluster: an acks=all produce waits in the produce
purgatory until a follower has fetched the batch (remote time > 0), an acks=1 produce is answered by the
handler itself (remote time 0); queue, local, response-queue and send time are observed for every request of
every API. Also the per-partition log size the leader and the followers report."""

from __future__ import annotations

import re

import pytest

from moldau.protocol.errors import ErrorCode

from .harness import BrokerProcess, wait_until
from .test_cluster import Cluster, cluster, zookeeper  # noqa: F401
from .test_replication import create_topic, produce, start

pytestmark = pytest.mark.integration

PARTS = ("request_queue_time", "request_local_time", "request_remote_time", "response_queue_time",
         "response_send_time")


def histogram(text: str, name: str, api: str) -> tuple[float, float]:
    """(count, sum) of moldau_<name>_seconds{api=...} in a /metrics text (0, 0 when not observed yet)."""
    values = []
    for suffix in ("count", "sum"):
        found = re.search(rf'^moldau_{name}_seconds_{suffix}{{api="{api}"}} (\S+)$', text, re.M)
        values.append(float(found.group(1)) if found else 0.0)
    return values[0], values[1]


def snapshot(broker: BrokerProcess, api: str) -> dict[str, tuple[float, float]]:
    text = broker.fetch_metrics()
    return {name: histogram(text, name, api) for name in (*PARTS, "request_latency")}


def delta(after: dict[str, tuple[float, float]], before: dict[str, tuple[float, float]], name: str) \
        -> tuple[float, float]:
    return after[name][0] - before[name][0], after[name][1] - before[name][1]


def observed(leader: BrokerProcess, before: dict[str, tuple[float, float]], n: int) -> dict[str, tuple[float, float]]:
    """The produce histograms once they counted n more requests: the broker observes a request's send time
    after the last byte left, which can be a moment after the client read its answer."""
    def counted() -> dict[str, tuple[float, float]] | None:
        after = snapshot(leader, "produce")
        return after if all(delta(after, before, name)[0] >= n for name in (*PARTS, "request_latency")) else None

    return wait_until(counted, 10, f"{n} more produce requests in every histogram")


def test_remote_time_only_for_acks_all_and_every_part_observed(cluster: Cluster) -> None:  # noqa: F811
    start(cluster)
    create_topic(cluster, "timed", min_isr=2)
    leader = cluster.brokers[cluster.states("timed")[0]["leader"]]
    n = 5

    before = snapshot(leader, "produce")
    for i in range(n):
        assert produce(leader, "timed", [b"one-%d" % i], acks=1) is ErrorCode.NONE
    after = observed(leader, before, n)
    for name in (*PARTS, "request_latency"):
        assert delta(after, before, name)[0] == n, name
    # The handler answers acks=1 itself: no time after it returned.
    assert delta(after, before, "request_remote_time")[1] == 0.0
    assert delta(after, before, "request_local_time")[1] > 0.0
    assert delta(after, before, "response_send_time")[1] > 0.0

    before = after
    for i in range(n):
        assert produce(leader, "timed", [b"all-%d" % i], acks=-1) is ErrorCode.NONE
    after = observed(leader, before, n)
    count, remote = delta(after, before, "request_remote_time")
    assert count == n
    # Each acks=all produce waited at least for one follower's fetch round trip.
    assert remote > 0.0
    _, total = delta(after, before, "request_latency")
    parts = sum(delta(after, before, name)[1] for name in PARTS)
    assert remote <= total and parts == pytest.approx(total, rel=1e-6, abs=1e-6)

    # The followers' fetches (long polls parked in the fetch purgatory) and the test's Metadata requests are
    # split too.
    text = leader.fetch_metrics()
    for api in ("fetch", "metadata"):
        for name in PARTS:
            assert histogram(text, name, api)[0] > 0, (api, name)

    # Log size: every replica reports the partition's segments, the same size once the followers caught up.
    def sizes() -> list[float]:
        out = []
        for broker in cluster.brokers.values():
            found = re.search(r'^moldau_log_size_bytes{partition="0",topic="timed"} (\S+)$',
                              broker.fetch_metrics(), re.M)
            out.append(float(found.group(1)) if found else -1.0)
        return out

    wait_until(lambda: len(set(sizes())) == 1 and sizes()[0] > 0, 15, f"equal log sizes, got {sizes()}")
