"""Per-broker Prometheus metrics and the /metrics endpoint.

Each broker owns a `BrokerMetrics` with its own `CollectorRegistry` (never the process-global one), so several
brokers can live in one test process. Names use the `moldau_` prefix and Prometheus conventions (base units,
`_total` for counters). The Kafka metric each one corresponds to, for porting dashboards:

    moldau_request_handler_avg_idle_ratio     KafkaRequestHandlerPool RequestHandlerAvgIdlePercent (0-1)
    moldau_network_processor_avg_idle_ratio   SocketServer NetworkProcessorAvgIdlePercent (0-1)
    moldau_requests_total{api}                RequestMetrics RequestsPerSec{request}
    moldau_request_latency_seconds{api}       RequestMetrics TotalTimeMs{request} (histogram, 0.1 ms..10 s)
    moldau_request_queue_time_seconds{api}    RequestMetrics RequestQueueTimeMs{request} (histogram)
    moldau_request_local_time_seconds{api}    RequestMetrics LocalTimeMs{request} (histogram)
    moldau_request_remote_time_seconds{api}   RequestMetrics RemoteTimeMs{request} (histogram)
    moldau_response_queue_time_seconds{api}   RequestMetrics ResponseQueueTimeMs{request} (histogram)
    moldau_response_send_time_seconds{api}    RequestMetrics ResponseSendTimeMs{request} (histogram)
    moldau_bytes_in_total                     socket-server-metrics incoming-byte-total
    moldau_bytes_out_total                    socket-server-metrics outgoing-byte-total
    moldau_fetch_sendfile_bytes_total         (none) fetch record bytes sent with sendfile
    moldau_fetch_copied_bytes_total           (none) fetch record bytes copied through Python
    moldau_request_queue_size                 RequestChannel RequestQueueSize
    moldau_purgatory_size{purgatory}          DelayedOperationPurgatory NumDelayedOperations{delayedOperation}
    moldau_under_replicated_partitions        ReplicaManager UnderReplicatedPartitions
    moldau_under_min_isr_partitions           ReplicaManager UnderMinIsrPartitionCount
    moldau_offline_partitions                 KafkaController OfflinePartitionsCount
    moldau_active_controller_count            KafkaController ActiveControllerCount (1 on the controller)
    moldau_offline_log_dirs                   LogManager OfflineLogDirectoryCount
    moldau_isr_shrinks_total                  ReplicaManager IsrShrinksPerSec
    moldau_isr_expands_total                  ReplicaManager IsrExpandsPerSec
    moldau_replica_max_lag                    ReplicaFetcherManager MaxLag
    moldau_partitions                         ReplicaManager PartitionCount
    moldau_leader_partitions                  ReplicaManager LeaderCount
    moldau_connections                        socket-server-metrics connection-count
    moldau_log_size_bytes{topic,partition}    kafka.log Log Size{topic,partition}
    moldau_last_stable_offset_lag{topic,partition}  kafka.cluster Partition LastStableOffsetLag (led here)
    moldau_transactional_ids{state}           (none) transactional ids coordinated here, by state (Ongoing,
                                              PrepareCommit, ...; a count stuck in Prepare* means markers fail)
    moldau_txn_marker_failures_total          (none) WriteTxnMarkers partitions that failed and were retried
    moldau_txn_timed_out_total                (none) transactions this coordinator aborted on their timeout
    moldau_consumer_group_lag{group,topic,partition}  (none; what kafka-consumer-groups.sh shows as LAG), for
                                              groups coordinated here and partitions led here
    moldau_log_cleaner_runs_total             (none) cleanings finished
    moldau_log_cleaner_bytes_removed_total    (none) bytes read minus bytes written by cleanings
    moldau_log_cleaner_records_removed_total  (none) records dropped by cleanings
    moldau_log_cleaner_max_dirty_ratio        LogCleanerManager max-dirty-percent (0-1)
    moldau_log_cleaner_max_clean_time_seconds LogCleaner max-clean-time-secs
    moldau_log_cleaner_uncleanable_partitions LogCleanerManager uncleanable-partitions-count
    moldau_connections_refused_total{reason}  (none) connections closed at accept: max.connections or
                                              max.connections.per.ip reached
    moldau_connections_evicted_total{reason}  (none) open connections closed by the broker: idle (longer than
                                              connections.max.idle.ms) or partial_request_memory
    moldau_failed_authentication_total{listener}      SocketServer failed-authentication-total
    moldau_successful_authentication_total{listener}  SocketServer successful-authentication-total
    moldau_client_quota_rate{quota,user,client_id}    Produce/Fetch byte-rate, Request request-time (per quota
                                              entity measured; docs/quotas.md)
    moldau_client_quota_bound{quota,user,client_id}   the quota in force for that entity
    moldau_client_quota_throttle_time_seconds_total{quota,user,client_id}  Produce/Fetch/Request throttle-time
                                              (as a running total)
    moldau_client_quota_recorded_total{quota,user,client_id}  bytes, or request time (percent x s), recorded

What the byte counters count: `bytes_in` every byte read from client sockets (request frames with their size
prefix); `bytes_out` every byte written to them, sendfile included. The two fetch counters split the *record
data* of fetch responses by how it left the process: `sendfile` (zero-copy, os.sendfile from the segment file)
or `copied` (read into Python and written, e.g. where sendfile is unavailable). If `copied` grows while
`sendfile` does not, the zero-copy path is not in use.

Gauges fed by callbacks are evaluated on the scrape thread; callbacks must only read simple state (len() of a
queue, an int). A failing callback reports NaN and is logged instead of breaking the scrape.
"""

from __future__ import annotations

import itertools
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import start_wsgi_server
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from moldau.broker.request_metrics import RequestMetrics

log = logging.getLogger(__name__)

# 0.1 ms .. 10 s
LATENCY_BUCKETS: tuple[float, ...] = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)


class IdleMeter:
    """The average idle ratio of a pool of `n_workers` over a sliding window.

    Workers report busy time: `record_busy(seconds)` after the fact (the interval is taken to end now), or
    `with meter.busy(): ...`, which also counts a job still in progress when the ratio is read. The ratio is

        idle = 1 - busy_seconds_in_window / (window_seconds * n_workers)

    clamped to [0, 1]. The window is the last `window_s` seconds, kept in `bucket_s` buckets (the bucket
    straddling the window start counts pro rata), but never reaches back before the meter was created, so a
    young meter is not flattered by time that never happened. A busy interval is spread over the buckets it
    covers, so a long job does not pile into one bucket.

    `n_workers` is how many workers can be busy *at the same time*. Moldau's handler workers and connection
    coroutines all run on the one event-loop thread and are timed around their synchronous work only (no
    awaits), so their busy intervals never overlap and both broker meters use n_workers = 1:

    * request handler idle: busy while a worker decodes a request and runs its handler up to the point where
      the handler returns or parks the request. 1 - idle is the share of the loop's time spent in handlers;
      near 0 means the loop is saturated by handler work and requests wait in the queue (the meaning of
      Kafka's RequestHandlerAvgIdlePercent: no handler capacity left).
    * network processor idle: busy while connection code decodes frames and headers and encodes responses.
      1 - idle is the share of the loop's time spent on socket-side work.

    If a component ever times work across awaits (worker slot occupancy rather than loop time), give its
    meter n_workers = the slot count (num.io.threads). The clock is injectable (seconds, monotonic) so tests
    control time. The ratio may be read from another thread (the scrape's); busy time is recorded from one thread
    at a time (the broker's event loop): the common case adds to the current bucket without taking the lock.
    """

    def __init__(self, n_workers: int, window_s: float = 10.0, bucket_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if n_workers < 1 or bucket_s <= 0 or window_s < bucket_s:
            raise ValueError("need n_workers >= 1 and window_s >= bucket_s > 0")
        self.n_workers = n_workers
        self.bucket_s = bucket_s
        self.n_buckets = max(1, round(window_s / bucket_s))
        self._clock = clock
        self._start = clock()
        self._buckets: dict[int, float] = {}
        # The last bucket `_add` wrote to and the span an interval must lie in to go straight into it
        # (`record_busy`'s fast path): empty until the first `_add`.
        self._current = 0
        self._current_from = math.inf
        self._current_to = -math.inf
        self._in_flight: dict[int, float] = {}
        self._tokens = itertools.count()
        self._lock = threading.Lock()

    def record_busy(self, seconds: float) -> None:
        """Add `seconds` of busy time of one worker, ending now."""
        if seconds <= 0:
            return
        now = self._clock()
        start = now - seconds
        if self._current_from <= start and now < self._current_to:
            # The common case, a few times per request: within the current bucket, which exists. No lock: the dict
            # keeps its size (a scrape iterating it is safe) and only this thread records.
            self._buckets[self._current] += now - start
            return
        with self._lock:
            self._add(max(start, self._start), now)

    @contextmanager
    def busy(self) -> Iterator[None]:
        """Measure the body as busy time of one worker (counted while in progress, too)."""
        token = next(self._tokens)
        with self._lock:
            self._in_flight[token] = self._clock()
        try:
            yield
        finally:
            now = self._clock()
            with self._lock:
                started = self._in_flight.pop(token)
                self._add(max(started, self._start), now)

    def idle_ratio(self) -> float:
        now = self._clock()
        b = self.bucket_s
        window_start = max(now - self.n_buckets * b, self._start)
        span = now - window_start
        if span <= 0:
            return 1.0
        first = math.floor(window_start / b)
        # The oldest bucket straddles the window start: count the share of it inside the window (busy time is
        # taken as spread evenly within a bucket), unless the window starts at the meter's birth.
        first_weight = 1.0 if window_start == self._start else ((first + 1) * b - window_start) / b
        with self._lock:
            busy = sum(v * (first_weight if idx == first else 1.0)
                       for idx, v in self._buckets.items() if idx >= first)
            busy += sum(now - max(started, window_start) for started in self._in_flight.values())
        ratio = 1.0 - busy / (span * self.n_workers)
        return min(1.0, max(0.0, ratio))

    def _add(self, start: float, end: float) -> None:
        if end <= start:
            return
        b = self.bucket_s
        last = math.floor(end / b)
        if start >= last * b and last in self._buckets:
            # Within the current bucket, which already exists (so nothing is old enough to drop either).
            self._buckets[last] += end - start
            return
        oldest = last - self.n_buckets  # keep one bucket more than the window, for reads a moment later
        start = max(start, oldest * b)
        for idx in range(max(math.floor(start / b), oldest), last + 1):
            overlap = min(end, (idx + 1) * b) - max(start, idx * b)
            if overlap > 0:
                self._buckets[idx] = self._buckets.get(idx, 0.0) + overlap
        if len(self._buckets) > self.n_buckets + 1:
            for idx in [i for i in self._buckets if i < oldest]:
                del self._buckets[idx]
        if self._current not in self._buckets:
            self._current_from, self._current_to = math.inf, -math.inf
        if last in self._buckets and last >= self._current:
            # What the first branch above takes: an interval from max(last * b, the meter's start) on, ending
            # before the next bucket begins.
            self._current, self._current_from, self._current_to = last, max(last * b, self._start), (last + 1) * b


class _ByteCounters(Collector):
    """The socket byte counters, exported as prometheus_client Counters are (``<name>_total`` and
    ``<name>_created``). They are plain ints added to by the broker's event loop, the only thread that records them:
    a Counter's ``inc`` takes a lock, and two of them per request were ~1.5 us of every request/answer exchange.
    A scrape reads each count as it stands."""

    FAMILIES = (("moldau_bytes_in", "Bytes read from client sockets", "bytes_in"),
                ("moldau_bytes_out", "Bytes written to client sockets, sendfile included", "bytes_out"),
                ("moldau_fetch_sendfile_bytes", "Fetch record bytes sent with sendfile (zero-copy)", "fetch_sendfile"),
                ("moldau_fetch_copied_bytes", "Fetch record bytes copied through user space", "fetch_copied"))

    def __init__(self) -> None:
        self.bytes_in = self.bytes_out = self.fetch_sendfile = self.fetch_copied = 0
        self.created = time.time()

    def collect(self) -> Iterator[CounterMetricFamily]:
        for name, doc, attr in self.FAMILIES:
            family = CounterMetricFamily(name, doc)
            family.add_metric([], float(getattr(self, attr)), created=self.created)
            yield family


class _LabelledGauges(Collector):
    """A gauge family whose labelled samples come from a callback on each scrape (`fn()` yields tuples of
    label values followed by the value), for series whose label sets come and go with partitions or groups.
    A failing callback is logged and yields no samples instead of breaking the scrape."""

    def __init__(self, name: str, doc: str, labels: list[str]) -> None:
        self.name, self.doc, self.labels = name, doc, labels
        self.fn: Callable[[], Iterable[tuple[Any, ...]]] | None = None

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(self.name, self.doc, labels=self.labels)
        fn = self.fn
        if fn is not None:
            try:
                for row in fn():
                    family.add_metric([str(v) for v in row[:-1]], float(row[-1]))
            except Exception:
                log.exception("metrics callback for %s failed", self.name)
                family = GaugeMetricFamily(self.name, self.doc, labels=self.labels)
        yield family


class _ClientQuotaCollector(Collector):
    """Per quota entity (quota type produce|fetch|request, user, client_id as Kafka's quota metric tags): the
    measured rate, the quota and the throttle time imposed so far, from ``fn()`` rows read on each scrape."""

    LABELS = ["quota", "user", "client_id"]

    def __init__(self) -> None:
        self.fn: Callable[[], Iterable[tuple[str, str, str, float, float, float, float]]] | None = None

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        rate = GaugeMetricFamily("moldau_client_quota_rate", "Measured rate of a quota entity over the quota "
                                 "window: bytes/s (produce, fetch) or percent of one thread (request)",
                                 labels=self.LABELS)
        bound = GaugeMetricFamily("moldau_client_quota_bound", "The quota of the entity, in the rate's unit",
                                  labels=self.LABELS)
        throttle = CounterMetricFamily("moldau_client_quota_throttle_time_seconds", "Throttle time imposed on "
                                       "the entity's clients (their channels muted for it)", labels=self.LABELS)
        recorded = CounterMetricFamily("moldau_client_quota_recorded", "Everything recorded against the entity's "
                                       "quota: bytes (produce, fetch) or percent of one thread x seconds "
                                       "(request); its increase over an interval is the rate over that interval",
                                       labels=self.LABELS)
        fn = self.fn
        if fn is not None:
            try:
                for quota, user, client_id, q, measured, throttle_ms, total in fn():
                    labels = [quota, user, client_id]
                    rate.add_metric(labels, measured)
                    bound.add_metric(labels, q)
                    throttle.add_metric(labels, throttle_ms / 1000.0)
                    recorded.add_metric(labels, total)
            except Exception:
                log.exception("metrics callback for client quotas failed")
        yield rate
        yield bound
        yield throttle
        yield recorded


def _safe(fn: Callable[[], float], what: str) -> Callable[[], float]:
    def call() -> float:
        try:
            return float(fn())
        except Exception:
            log.exception("metrics callback for %s failed", what)
            return math.nan

    return call


class BrokerMetrics:
    """The metrics of one broker. Create it early, pass it to the components (it satisfies
    network.NetworkMetrics and handler_pool.HandlerMetrics), call `start_http_server()` if metrics.port != -1,
    and `close()` at shutdown. `num_io_threads`/`num_network_threads` are the meters' n_workers: how many
    workers can be busy at the same time, i.e. 1 for Moldau's loop-time measurements (see IdleMeter), not the
    num.io.threads setting."""

    def __init__(self, num_io_threads: int = 1, num_network_threads: int = 1, *, window_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.request_handler_idle = IdleMeter(num_io_threads, window_s, clock=clock)
        self.network_idle = IdleMeter(num_network_threads, window_s, clock=clock)
        # Called several times per request: the meters' own methods, without the wrappers below in between.
        self.handler_busy = self.request_handler_idle.record_busy  # type: ignore[method-assign]
        self.network_busy = self.network_idle.record_busy  # type: ignore[method-assign]
        Gauge("moldau_request_handler_avg_idle_ratio",
              "Share of the last window the request handlers were idle (0 = saturated)",
              registry=r).set_function(self.request_handler_idle.idle_ratio)
        Gauge("moldau_network_processor_avg_idle_ratio",
              "Share of the last window the event loop was not busy with network processing (0 = saturated)",
              registry=r).set_function(self.network_idle.idle_ratio)
        # moldau_requests_total and the request-time histograms: a collector of its own, cheap to record
        self.requests = RequestMetrics(LATENCY_BUCKETS)
        r.register(self.requests)
        # moldau_bytes_in_total, moldau_bytes_out_total, moldau_fetch_sendfile_bytes_total and
        # moldau_fetch_copied_bytes_total: plain counts read at each scrape (two updates per request)
        self.byte_counts = _ByteCounters()
        r.register(self.byte_counts)
        self.request_queue_size = Gauge("moldau_request_queue_size", "Requests waiting for a handler",
                                        registry=r)
        self.purgatory_size = Gauge("moldau_purgatory_size", "Delayed operations waiting in a purgatory",
                                    ["purgatory"], registry=r)
        self.under_replicated_partitions = Gauge(
            "moldau_under_replicated_partitions",
            "Partitions led here with fewer in-sync replicas than replicas", registry=r)
        self.under_min_isr_partitions = Gauge(
            "moldau_under_min_isr_partitions",
            "Partitions led here whose ISR is smaller than min.insync.replicas (acks=all is refused)", registry=r)
        self.active_controller_count = Gauge(
            "moldau_active_controller_count", "1 on the active controller, 0 on every other broker", registry=r)
        self.incremental_fetch_sessions = Gauge(
            "moldau_incremental_fetch_sessions", "Incremental fetch sessions (KIP-227) held: followers' and "
            "consumers'", registry=r)
        self.incremental_fetch_partitions = Gauge(
            "moldau_incremental_fetch_partitions_cached", "Partitions held by all incremental fetch sessions",
            registry=r)
        self.live_brokers = Gauge(
            "moldau_live_brokers", "Live brokers in this broker's metadata (itself included): what it answers "
            "clients' Metadata requests with and places new topics' replicas on", registry=r)
        self.offline_log_dirs = Gauge("moldau_offline_log_dirs",
                                      "Log dirs of this broker taken offline after an I/O error", registry=r)
        self.offline_partitions = Gauge(
            "moldau_offline_partitions", "Partitions without a leader (reported by the active controller)",
            registry=r)
        self.isr_shrinks_total = Counter("moldau_isr_shrinks_total", "ISR shrinks of partitions led here",
                                         registry=r)
        self.isr_expands_total = Counter("moldau_isr_expands_total", "ISR expansions of partitions led here",
                                         registry=r)
        self.replica_max_lag = Gauge("moldau_replica_max_lag",
                                     "Largest lag in records of a partition this broker follows (leader HW minus "
                                     "own log end offset)", registry=r)
        self.partitions = Gauge("moldau_partitions", "Partitions with a replica on this broker", registry=r)
        self.leader_partitions = Gauge("moldau_leader_partitions", "Partitions led by this broker",
                                       registry=r)
        self.open_connections = Gauge("moldau_connections", "Open client connections", registry=r)
        self.cleaner_runs_total = Counter("moldau_log_cleaner_runs_total", "Log cleanings finished",
                                          registry=r)
        self.cleaner_bytes_removed_total = Counter(
            "moldau_log_cleaner_bytes_removed_total", "Bytes removed from logs by the cleaner", registry=r)
        self.cleaner_records_removed_total = Counter(
            "moldau_log_cleaner_records_removed_total", "Records removed from logs by the cleaner", registry=r)
        self.cleaner_max_dirty_ratio = Gauge("moldau_log_cleaner_max_dirty_ratio",
                                             "Dirty ratio of the last log picked for cleaning", registry=r)
        self.cleaner_max_clean_time = Gauge("moldau_log_cleaner_max_clean_time_seconds",
                                            "Longest cleaning so far", registry=r)
        self.cleaner_uncleanable_partitions = Gauge(
            "moldau_log_cleaner_uncleanable_partitions", "Partitions the cleaner gave up on", registry=r)
        self._max_clean_time = 0.0
        self.connections_refused_total = Counter(
            "moldau_connections_refused_total", "Connections closed right after accept because a limit was reached",
            ["reason"], registry=r)
        self.connections_evicted_total = Counter(
            "moldau_connections_evicted_total", "Open connections the broker closed (idle, partial_request_memory)",
            ["reason"], registry=r)
        self.failed_authentication_total = Counter(
            "moldau_failed_authentication_total", "SASL logins that failed (wrong password, unknown user, broken "
            "exchange), by listener", ["listener"], registry=r)
        self.successful_authentication_total = Counter(
            "moldau_successful_authentication_total", "SASL logins that succeeded, by listener", ["listener"],
            registry=r)
        self.log_size = _LabelledGauges("moldau_log_size_bytes", "Size of a partition's log on this broker "
                                        "(sum of its segments)", ["topic", "partition"])
        self.consumer_group_lag = _LabelledGauges(
            "moldau_consumer_group_lag", "High watermark minus committed offset, for groups coordinated here and "
            "partitions led here", ["group", "topic", "partition"])
        self.last_stable_offset_lag = _LabelledGauges(
            "moldau_last_stable_offset_lag", "High watermark minus last stable offset of a partition led here: "
            "grows while a transaction stays open", ["topic", "partition"])
        self.transactional_ids = _LabelledGauges(
            "moldau_transactional_ids", "Transactional ids coordinated by this broker, by transaction state",
            ["state"])
        self.txn_marker_failures_total = Counter(
            "moldau_txn_marker_failures_total", "Transaction markers (one per partition) that a leader did not "
            "write and that the coordinator retried", registry=r)
        self.txn_timed_out_total = Counter(
            "moldau_txn_timed_out_total", "Transactions aborted by this coordinator because they were open longer "
            "than their transaction.timeout.ms", registry=r)
        r.register(self.transactional_ids)
        r.register(self.log_size)
        r.register(self.last_stable_offset_lag)
        self.client_quotas = _ClientQuotaCollector()
        r.register(self.client_quotas)
        r.register(self.consumer_group_lag)
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    # --- recording (these methods satisfy network.NetworkMetrics and handler_pool.HandlerMetrics)

    def request_done(self, api: str, seconds: float, queue: float = 0.0, local: float = 0.0,
                     remote: float = 0.0, response_queue: float = 0.0, send: float = 0.0) -> None:
        """Count one request of `api` (e.g. "Produce") that took `seconds` from read to response written, split
        as Kafka's RequestMetrics (queue + local + remote + response_queue + send = seconds)."""
        self.requests.record(api, seconds, queue, local, remote, response_queue, send)

    def handler_busy(self, seconds: float) -> None:
        """A request-handler worker was busy for `seconds`, ending now."""
        self.request_handler_idle.record_busy(seconds)

    def network_busy(self, seconds: float) -> None:
        """The event loop spent `seconds`, ending now, on network processing."""
        self.network_idle.record_busy(seconds)

    def bytes_in(self, n: int) -> None:
        self.byte_counts.bytes_in += n

    def bytes_out(self, n: int, sendfile: int = 0) -> None:
        """`n` bytes written to a client socket, `sendfile` of them fetch record bytes sent with sendfile."""
        counts = self.byte_counts
        counts.bytes_out += n
        if sendfile:
            counts.fetch_sendfile += sendfile

    def fetch_copied(self, n: int) -> None:
        """`n` fetch record bytes were read into Python and written (the non-zero-copy path)."""
        self.byte_counts.fetch_copied += n

    def connections(self, delta: int) -> None:
        self.open_connections.inc(delta)

    def connection_refused(self, reason: str) -> None:
        self.connections_refused_total.labels(reason).inc()

    def connection_evicted(self, reason: str) -> None:
        self.connections_evicted_total.labels(reason).inc()

    def authentication(self, listener: str, ok: bool) -> None:
        (self.successful_authentication_total if ok else self.failed_authentication_total).labels(listener).inc()

    def set_request_queue_size_callback(self, fn: Callable[[], float]) -> None:
        self.request_queue_size.set_function(_safe(fn, "moldau_request_queue_size"))

    def track_purgatory(self, name: str, fn: Callable[[], float]) -> None:
        """Report `fn()` (e.g. `lambda: purgatory.num_delayed`) as moldau_purgatory_size{purgatory=name}."""
        self.purgatory_size.labels(name).set_function(_safe(fn, f"moldau_purgatory_size{{{name}}}"))

    def set_active_controller_callback(self, fn: Callable[[], float]) -> None:
        self.active_controller_count.set_function(_safe(fn, "moldau_active_controller_count"))

    def set_fetch_session_callbacks(self, sessions: Callable[[], float], partitions: Callable[[], float]) -> None:
        self.incremental_fetch_sessions.set_function(_safe(sessions, "moldau_incremental_fetch_sessions"))
        self.incremental_fetch_partitions.set_function(
            _safe(partitions, "moldau_incremental_fetch_partitions_cached"))

    def set_live_brokers_callback(self, fn: Callable[[], float]) -> None:
        self.live_brokers.set_function(_safe(fn, "moldau_live_brokers"))

    def set_offline_log_dirs_callback(self, fn: Callable[[], float]) -> None:
        self.offline_log_dirs.set_function(_safe(fn, "moldau_offline_log_dirs"))

    def set_under_replicated_callback(self, fn: Callable[[], float]) -> None:
        self.under_replicated_partitions.set_function(_safe(fn, "moldau_under_replicated_partitions"))

    def set_under_min_isr_callback(self, fn: Callable[[], float]) -> None:
        self.under_min_isr_partitions.set_function(_safe(fn, "moldau_under_min_isr_partitions"))

    def isr_changed(self, shrunk: bool) -> None:
        (self.isr_shrinks_total if shrunk else self.isr_expands_total).inc()

    def set_replication_callbacks(self, max_lag: Callable[[], float], offline: Callable[[], float]) -> None:
        self.replica_max_lag.set_function(_safe(max_lag, "moldau_replica_max_lag"))
        self.offline_partitions.set_function(_safe(offline, "moldau_offline_partitions"))

    def set_partition_callbacks(self, partitions: Callable[[], float], leaders: Callable[[], float]) -> None:
        self.partitions.set_function(_safe(partitions, "moldau_partitions"))
        self.leader_partitions.set_function(_safe(leaders, "moldau_leader_partitions"))

    def set_log_size_callback(self, fn: Callable[[], Iterable[tuple[str, int, int]]]) -> None:
        """`fn()` yields (topic, partition, size in bytes) per hosted partition, read on the scrape thread."""
        self.log_size.fn = fn

    def set_last_stable_offset_lag_callback(self, fn: Callable[[], Iterable[tuple[str, int, int]]]) -> None:
        """`fn()` yields (topic, partition, HW - LSO) per partition led here, read on the scrape thread."""
        self.last_stable_offset_lag.fn = fn

    def set_transactional_ids_callback(self, fn: Callable[[], Iterable[tuple[str, int]]]) -> None:
        """(state, count) rows for moldau_transactional_ids."""
        self.transactional_ids.fn = fn
    def set_client_quota_callback(
            self, fn: Callable[[], Iterable[tuple[str, str, str, float, float, float, float]]]) -> None:
        """`fn()` yields (quota type, user, client id, quota, rate, throttle ms so far, recorded so far), read on
        the scrape
        thread."""
        self.client_quotas.fn = fn

    def set_consumer_lag_callback(self, fn: Callable[[], Iterable[tuple[str, str, int, int]]]) -> None:
        """`fn()` yields (group, topic, partition, lag in records), read on the scrape thread."""
        self.consumer_group_lag.fn = fn

    def cleaner_run(self, bytes_removed: int, records_removed: int, seconds: float) -> None:
        """One log cleaning finished."""
        self.cleaner_runs_total.inc()
        self.cleaner_bytes_removed_total.inc(max(bytes_removed, 0))
        self.cleaner_records_removed_total.inc(records_removed)
        if seconds > self._max_clean_time:
            self._max_clean_time = seconds
            self.cleaner_max_clean_time.set(seconds)

    def set_cleaner_callbacks(self, max_dirty_ratio: Callable[[], float],
                              uncleanable: Callable[[], float]) -> None:
        self.cleaner_max_dirty_ratio.set_function(_safe(max_dirty_ratio, "moldau_log_cleaner_max_dirty_ratio"))
        self.cleaner_uncleanable_partitions.set_function(
            _safe(uncleanable, "moldau_log_cleaner_uncleanable_partitions"))

    def render(self) -> bytes:
        """The text exposition of this registry (what /metrics serves)."""
        return generate_latest(self.registry)

    # --- HTTP endpoint

    def start_http_server(self, host: str, port: int) -> int:
        """Serve /metrics on host:port from a daemon thread; port 0 picks a free port. Returns the bound
        port (log it: with port 0 it is the only way to find the endpoint)."""
        if self._server is not None:
            raise RuntimeError("the metrics endpoint is already running")
        server, thread = start_wsgi_server(port, host or "0.0.0.0", self.registry)
        self._server, self._thread = server, thread
        return int(server.server_port)

    @property
    def http_port(self) -> int | None:
        return None if self._server is None else int(self._server.server_port)

    def close(self) -> None:
        """Stop the HTTP endpoint (if started). Safe to call more than once."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join(timeout=5)
