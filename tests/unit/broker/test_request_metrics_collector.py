"""The request-metrics collector against prometheus_client's own Histogram as the oracle: the same observations
must expose the same buckets, counts and sums (values on a bucket bound included, as Prometheus' ``le``)."""

from __future__ import annotations

import random

from prometheus_client import CollectorRegistry, Histogram, generate_latest

from moldau.broker.metrics import LATENCY_BUCKETS
from moldau.broker.request_metrics import HISTOGRAMS, RequestMetrics


def _samples(registry: CollectorRegistry, prefix: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in registry.collect():
        for s in family.samples:
            if s.name.startswith(prefix) and not s.name.endswith("_created"):
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_buckets_counts_and_sums_match_prometheus_client() -> None:
    ours_registry, oracle_registry = CollectorRegistry(), CollectorRegistry()
    ours = RequestMetrics(LATENCY_BUCKETS)
    ours_registry.register(ours)
    oracle = [Histogram(name, doc, ["api"], registry=oracle_registry, buckets=LATENCY_BUCKETS)
              for name, doc in HISTOGRAMS]
    rng = random.Random(7)
    values = [*LATENCY_BUCKETS, 0.0, 11.0, 1e-9] + [rng.uniform(0, 12) ** 3 / 100 for _ in range(500)]
    for i, v in enumerate(values):
        api = ("Produce", "Fetch", "Metadata")[i % 3]
        parts = [v, v / 2, v / 3, v / 5, v / 7, v * 1.5]
        ours.record(api, *parts)
        for histogram, part in zip(oracle, parts, strict=True):
            histogram.labels(api).observe(part)
    for name, _ in HISTOGRAMS:
        mine, theirs = _samples(ours_registry, name), _samples(oracle_registry, name)
        assert mine.keys() == theirs.keys()
        for key, value in theirs.items():
            assert abs(mine[key] - value) <= 1e-9 * max(1.0, abs(value)), key
    assert ours_registry.get_sample_value("moldau_requests_total", {"api": "Produce"}) == len(values[::3])


def test_exposition_names_a_counter_and_histograms() -> None:
    registry = CollectorRegistry()
    metrics = RequestMetrics(LATENCY_BUCKETS)
    registry.register(metrics)
    metrics.record("Produce", 0.001, 0.0, 0.0005, 0.0, 0.0, 0.0005)
    text = generate_latest(registry).decode()
    assert "# TYPE moldau_requests_total counter" in text
    assert 'moldau_requests_total{api="Produce"} 1.0' in text
    assert "# TYPE moldau_request_latency_seconds histogram" in text
    assert 'moldau_request_latency_seconds_bucket{api="Produce",le="0.001"} 1.0' in text
    assert 'moldau_request_latency_seconds_bucket{api="Produce",le="0.0005"} 0.0' in text
