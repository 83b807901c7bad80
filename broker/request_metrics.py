"""Per-request metrics by API (Kafka's RequestMetrics): ``moldau_requests_total`` and seven latency histograms
(total, and its split into queue, local, remote, response queue and send time).

Every request records seven values, so this is on the hot path: prometheus_client's ``Histogram.observe`` takes
a lock per bucket and per sum, and the seven observes were ~8% of a broker's event loop under small requests
(py-spy, one-record Produce requests). Here a request costs one dict lookup, seven ``bisect`` calls and plain list
updates. Requests are recorded only from the broker's event loop thread; a scrape (the metrics server's thread)
reads the lists without a lock: it may see one request's values partly recorded, never a torn number.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from itertools import accumulate

from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

# (name, help) of each histogram, in the order of RequestMetrics.record's arguments.
HISTOGRAMS: tuple[tuple[str, str], ...] = (
    ("moldau_request_latency_seconds", "Time from reading a request to writing its response, by API"),
    ("moldau_request_queue_time_seconds", "Time a request waited in the request queue for a worker, by API"),
    ("moldau_request_local_time_seconds", "Time a worker spent decoding a request and running its handler up to "
     "its answer or the point it parked the request, by API"),
    ("moldau_request_remote_time_seconds", "Time a request waited after its handler returned (purgatory: "
     "acks=all produce, long-poll fetch; or another awaited step such as ZooKeeper), by API"),
    ("moldau_response_queue_time_seconds", "Time from a response being ready to its connection resuming to write "
     "it, by API"),
    ("moldau_response_send_time_seconds", "Time to encode a response and write it to the socket (sendfile "
     "included), by API"),
)


class _Series:
    """One API's counts: per histogram, the count of each bucket (the last is +Inf, not cumulative) and the sum."""

    __slots__ = ("counts", "sums")

    def __init__(self, n_buckets: int) -> None:
        self.counts = [[0] * (n_buckets + 1) for _ in HISTOGRAMS]
        self.sums = [0.0] * len(HISTOGRAMS)


class RequestMetrics(Collector):
    """Requests by API with their latency histograms (buckets: upper bounds in seconds, +Inf added)."""

    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.bounds = tuple(sorted(buckets))
        self._les = [floatToGoString(b) for b in self.bounds] + ["+Inf"]
        self._series: dict[str, _Series] = {}

    def record(self, api: str, total: float, queue: float, local: float, remote: float, response_queue: float,
               send: float) -> None:
        series = self._series.get(api)
        if series is None:
            series = self._series[api] = _Series(len(self.bounds))
        b, c, s = self.bounds, series.counts, series.sums
        c[0][bisect_left(b, total)] += 1
        c[1][bisect_left(b, queue)] += 1
        c[2][bisect_left(b, local)] += 1
        c[3][bisect_left(b, remote)] += 1
        c[4][bisect_left(b, response_queue)] += 1
        c[5][bisect_left(b, send)] += 1
        s[0] += total
        s[1] += queue
        s[2] += local
        s[3] += remote
        s[4] += response_queue
        s[5] += send

    def collect(self) -> Iterator[Metric]:
        series = list(self._series.items())  # an API seen for the first time during the scrape waits for the next
        requests = CounterMetricFamily("moldau_requests", "Requests handled, by API", labels=["api"])
        for api, one in series:
            requests.add_metric([api], sum(one.counts[0]))
        yield requests
        for i, (name, doc) in enumerate(HISTOGRAMS):
            family = HistogramMetricFamily(name, doc, labels=["api"])
            for api, one in series:
                cumulative = list(accumulate(one.counts[i]))
                family.add_metric([api], list(zip(self._les, cumulative, strict=True)), one.sums[i])
            yield family
