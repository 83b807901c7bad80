"""Prometheus series of tiered storage (docs/tiered-storage.md, docs/metrics.md), collected on each scrape from
the remote log manager's counters and its partitions."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric, SummaryMetricFamily
from prometheus_client.registry import Collector

from moldau.broker.remote_log_manager import RemoteLogManager


class RemoteLogCollector(Collector):
    def __init__(self, manager: RemoteLogManager) -> None:
        self.manager = manager

    def collect(self) -> Iterator[Metric]:
        stats = self.manager.stats
        for name, doc, value in (
            ("moldau_remote_copy_bytes", "Bytes of segments copied to remote storage", stats.copied_bytes),
            ("moldau_remote_copy_segments", "Segments copied to remote storage", stats.copied_segments),
            ("moldau_remote_copy_errors", "Failed remote storage tasks (copy, delete, metadata)", stats.copy_errors),
            ("moldau_remote_delete_segments", "Remote segments deleted", stats.deleted_segments),
            ("moldau_remote_fetch_bytes", "Bytes read from remote storage for fetches", stats.fetched_bytes),
            ("moldau_remote_fetch_errors", "Remote reads that failed", stats.fetch_errors),
        ):
            yield CounterMetricFamily(name, doc, value=value)
        yield SummaryMetricFamily("moldau_remote_fetch_latency_seconds", "Time of one remote read",
                                  count_value=stats.fetches, sum_value=stats.fetch_seconds)
        segments = GaugeMetricFamily("moldau_remote_copy_lag_segments", "Rolled segments below the high watermark "
                                     "not yet copied to remote storage", labels=["topic", "partition"])
        size = GaugeMetricFamily("moldau_remote_copy_lag_bytes", "Bytes of those segments",
                                 labels=["topic", "partition"])
        for topic, index, n, nbytes in self.manager.copy_lag():
            segments.add_metric([topic, str(index)], n)
            size.add_metric([topic, str(index)], nbytes)
        yield segments
        yield size
