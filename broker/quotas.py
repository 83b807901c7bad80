"""Client quotas enforced as Kafka does since KIP-219: measure, answer at once with throttle_time_ms, mute.

Each quota type (produce bytes, fetch bytes, request time) has a ``ClientQuotaManager`` holding one ``Rate`` per
quota entity matched (broker/quota_config.py decides which clients share it). A rate is Kafka's sampled rate:
``quota.window.num`` samples of ``quota.window.size.seconds``, divided by the elapsed window but never by less
than ``(num - 1) x size``; it is what the metrics show. The throttle time comes from a token bucket over the same
window (as Kafka's KIP-599 controller mutation quota): it fills at the quota up to ``quota x (num - 1) x size``
(the sampled rate's first-window allowance), each request takes its value out, and a client that took it below
zero must stay silent until it is back at zero. Kafka's ``(rate - bound) / bound x window`` on the sampled rate
lets a burst come back every ``num x size`` seconds, when its samples expire (bench/quotas.py measured Moldau's
producer alternating 11 MB bursts and 5 s silences, 0.7-1.1x its quota over 30 s); the bucket holds a busy
client to the quota on any interval after its first allowance. The connection sends the response with
that ``throttle_time_ms`` at once and then reads nothing from the client for that long (broker/network.py).

What is recorded (per request, never per record): Produce, the request's size on the wire; Fetch from a
consumer, the record bytes of the response (follower fetches are replication, not client traffic); request
time, the time a worker spent on the request (decode + handler) as a percentage of one second. Inter-broker
and SASL requests are exempt. Fetch responses are also sized so a throttled consumer is never handed more than
its quota allows over one window (``max_value_in_window``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from moldau.broker.quota_config import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaConfigs,
    QuotaEntity,
    Resolved,
    parse_values,
)
from moldau.broker.request_channel import Request
from moldau.protocol.types import INT32

PRODUCE_KEY, FETCH_KEY = 0, 1
# LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown, SaslHandshake, ApiVersions, SaslAuthenticate:
# cluster actions and the connection's own set-up are never throttled.
EXEMPT_KEYS = frozenset({4, 5, 6, 7, 17, 18, 36})
# CreateTopics, DeleteTopics, CreatePartitions: controller_mutation_rate (KIP-599). From these versions on the
# quota is strict (a request above it gets THROTTLING_QUOTA_EXCEEDED); older clients are throttled instead.
MUTATION_STRICT_FROM = {19: 6, 20: 5, 37: 3}
SENSOR_EXPIRY_MS = 3600 * 1000
INT_MAX = 2**31 - 1  # max.connection.creation.rate's default: no limit  # Kafka expires an idle client's sensors after an hour


class Rate:
    """Kafka's Rate over a SampledStat: ``num`` samples of ``size_ms`` each; ``measure`` is per second."""

    __slots__ = ("num", "size_ms", "starts", "values", "current")

    def __init__(self, num: int, size_ms: int, now_ms: float) -> None:
        self.num = num
        self.size_ms = size_ms
        self.starts = [now_ms] * num
        self.values = [0.0] * num
        self.current = 0

    def record(self, value: float, now_ms: float) -> None:
        i = self.current
        if now_ms - self.starts[i] >= self.size_ms:
            i = self.current = (i + 1) % self.num
            self.starts[i] = now_ms
            self.values[i] = 0.0
        self.values[i] += value

    def window_ms(self, now_ms: float) -> float:
        """Elapsed time since the oldest live sample, at least (num - 1) full samples (Kafka's Rate.windowSize).
        Samples older than the whole window count as reset (read-only: the scrape thread calls this too)."""
        expire = self.num * self.size_ms
        oldest = min((s for s in self.starts if now_ms - s < expire), default=now_ms)
        elapsed = now_ms - oldest
        full = int(elapsed // self.size_ms)
        if full < self.num - 1:
            elapsed += (self.num - 1 - full) * self.size_ms
        return elapsed

    def measure(self, now_ms: float) -> float:
        expire = self.num * self.size_ms
        total = sum(v for s, v in zip(self.starts, self.values, strict=True) if now_ms - s < expire)
        window = self.window_ms(now_ms)
        return total / (window / 1000.0) if window > 0 else 0.0


@dataclass(slots=True)
class Sensor:
    """The rate of one quota entity and what throttling it cost its clients."""

    bound: float
    rate: Rate
    last_record_ms: float
    tokens: float = 0.0  # the token bucket (see the module docstring), as of tokens_ms
    tokens_ms: float = 0.0
    throttle_ms_total: float = 0.0
    throttled_responses: int = 0
    recorded_total: float = 0.0  # everything recorded (bytes, or percent x seconds): rates over any interval


@dataclass(slots=True)
class ClientQuotaManager:
    """One quota type (``key``: producer_byte_rate, consumer_byte_rate or request_percentage)."""

    key: str
    configs: QuotaConfigs
    window_num: int = 11
    window_size_ms: int = 1000
    burst_samples: int = 0  # the token bucket holds this many samples' quota (0: window_num - 1)
    sensors: dict[tuple[str, str], Sensor] = field(default_factory=dict)
    _cache: dict[tuple[str, str], Resolved | None] = field(default_factory=dict)
    _cache_version: int = -1
    _enabled: bool = False
    _last_prune_ms: float = 0.0

    def _refresh(self) -> None:
        if self._cache_version != self.configs.version:
            self._cache.clear()
            self._cache_version = self.configs.version
            self._enabled = self.configs.has(self.key)
            for tags, sensor in list(self.sensors.items()):  # a changed bound applies to the running rate
                resolved = self.configs.resolve(self.key, *tags) if tags[0] or tags[1] else None
                if resolved is None or (resolved.user_tag, resolved.client_tag) != tags:
                    del self.sensors[tags]
                else:
                    sensor.bound = resolved.bound

    @property
    def enabled(self) -> bool:
        if self._cache_version != self.configs.version:  # asked several times per request: no call if unchanged
            self._refresh()
        return self._enabled

    def resolve(self, user: str, client_id: str) -> Resolved | None:
        self._refresh()
        pair = (user, client_id)
        try:
            return self._cache[pair]
        except KeyError:
            found = self._cache[pair] = self.configs.resolve(self.key, user, client_id)
            return found

    def record(self, user: str, client_id: str, value: float, now_ms: float) -> int:
        """Record ``value`` for the client; the throttle time in ms (0 while within the quota)."""
        resolved = self.resolve(user, client_id)
        if resolved is None:
            return 0
        tags = (resolved.user_tag, resolved.client_tag)
        sensor = self.sensors.get(tags)
        burst = self.burst(resolved.bound)
        if sensor is None:
            sensor = self.sensors[tags] = Sensor(resolved.bound, Rate(self.window_num, self.window_size_ms, now_ms),
                                                 now_ms, tokens=burst, tokens_ms=now_ms)
            self._prune(now_ms)
        sensor.last_record_ms = now_ms
        sensor.recorded_total += value
        sensor.rate.record(value, now_ms)
        bound = sensor.bound
        tokens = min(burst, sensor.tokens + bound * max(now_ms - sensor.tokens_ms, 0.0) / 1000.0) - value
        sensor.tokens, sensor.tokens_ms = tokens, now_ms
        if tokens >= 0:
            return 0
        throttle = -tokens / bound * 1000.0
        sensor.throttle_ms_total += throttle
        sensor.throttled_responses += 1
        return int(throttle)

    def burst(self, bound: float) -> float:
        """The token bucket's size: what the quota allows over (num - 1) samples (controller mutations: num)."""
        return bound * (self.burst_samples or self.window_num - 1) * self.window_size_ms / 1000.0

    def deficit_ms(self, user: str, client_id: str, now_ms: float) -> float:
        """How long until the client's bucket is back at zero (0 when it is not below, or without a quota)."""
        resolved = self.resolve(user, client_id)
        if resolved is None:
            return 0.0
        sensor = self.sensors.get((resolved.user_tag, resolved.client_tag))
        if sensor is None:
            return 0.0
        bound = sensor.bound
        tokens = min(self.burst(bound), sensor.tokens + bound * max(now_ms - sensor.tokens_ms, 0.0) / 1000.0)
        return -tokens / bound * 1000.0 if tokens < 0 else 0.0

    def max_value_in_window(self, user: str, client_id: str) -> float | None:
        """What the quota allows over one window (Kafka's getMaxValueInQuotaWindow); None without a quota."""
        resolved = self.resolve(user, client_id)
        if resolved is None:
            return None
        return resolved.bound * (self.window_num - 1) * self.window_size_ms / 1000.0

    def _prune(self, now_ms: float) -> None:
        if now_ms - self._last_prune_ms < 60_000:
            return
        self._last_prune_ms = now_ms
        for tags in [t for t, s in self.sensors.items() if now_ms - s.last_record_ms > SENSOR_EXPIRY_MS]:
            del self.sensors[tags]

    def rows(self, now_ms: float) -> Iterator[tuple[str, str, Sensor, float]]:
        """(user, client id, sensor, current rate) of every entity measured; read by the metrics scrape."""
        for (user, client_id), sensor in list(self.sensors.items()):
            yield user, client_id, sensor, sensor.rate.measure(now_ms)


def user_of(principal: str) -> str:
    """The quota user of a principal ("User:alice" -> "alice"), as Kafka's sanitized user name."""
    return principal[5:] if principal.startswith("User:") else principal


def fetch_response_bytes(response: Mapping[str, Any] | None) -> int:
    """The record bytes of a fetch response (per partition, not per record)."""
    if not response:
        return 0
    total = 0
    for topic in response.get("responses", ()):
        for p in topic.get("partitions", ()):
            records = p.get("records")
            if records is not None:
                total += len(records)
    return total


def _throttle_ms(rate: Rate, bound: float, now_ms: float) -> float:
    """Kafka's throttle time: how long the client must stay silent for ``rate`` to fall back to ``bound``. Not
    bounded by the window (as Kafka's client quotas): a request larger than the window's allowance costs its
    full time, so the long-run rate holds whatever the request sizes."""
    measured = rate.measure(now_ms)
    if measured <= bound:
        return 0.0
    return (measured - bound) / bound * rate.window_ms(now_ms)


class ConnectionQuotas:
    """``max.connection.creation.rate`` (broker-wide: the acceptor waits before accepting the next connection,
    as Kafka's Acceptor) and ``connection_creation_rate`` of ``ips`` entities (a connection above its IP's rate
    is closed at once)."""

    def __init__(self, max_rate: float, configs: QuotaConfigs, window_num: int, size_ms: int) -> None:
        self.max_rate = max_rate
        self.configs = configs
        self.window_num, self.size_ms = window_num, size_ms
        self.broker_rate: Rate | None = None
        self.per_ip: dict[str, Rate] = {}

    def accepted(self, now_ms: float) -> float:
        """Count one accepted connection; seconds the acceptor waits before the next accept."""
        if self.max_rate >= INT_MAX:
            return 0.0
        if self.broker_rate is None:
            self.broker_rate = Rate(self.window_num, self.size_ms, now_ms)
        self.broker_rate.record(1.0, now_ms)
        # Bounded by the window, so the acceptor never stalls for longer than one measurement.
        return min(_throttle_ms(self.broker_rate, self.max_rate, now_ms), self.window_num * self.size_ms) / 1000.0

    def refuse_ip(self, ip: str, now_ms: float) -> bool:
        """Count a connection from ``ip``; True when it is above its connection_creation_rate quota."""
        bound = self.configs.ip_quota(ip) if self.configs.entries else None
        if bound is None:
            return False
        rate = self.per_ip.get(ip)
        if rate is None:
            if len(self.per_ip) > 10000:
                self.per_ip.clear()  # bounded memory: a flood of addresses restarts their rates
            rate = self.per_ip[ip] = Rate(self.window_num, self.size_ms, now_ms)
        rate.record(1.0, now_ms)
        return rate.measure(now_ms) > bound


@dataclass(slots=True)
class MutationBudget:
    """One CreateTopics, CreatePartitions or DeleteTopics request under controller_mutation_rate (KIP-599): a
    strict request is refused a mutation while the client's bucket is below zero (THROTTLING_QUOTA_EXCEEDED);
    each accepted mutation takes its partitions out, possibly below zero. The response's throttle time is the
    time until the bucket is back at zero."""

    manager: ClientQuotaManager
    user: str
    client_id: str
    strict: bool
    clock: Callable[[], float]

    def refused(self) -> bool:
        return self.strict and self.manager.deficit_ms(self.user, self.client_id, self.clock() * 1000.0) > 0

    def record(self, partitions: int) -> None:
        if partitions > 0:
            self.manager.record(self.user, self.client_id, float(partitions), self.clock() * 1000.0)

    def throttle_ms(self) -> int:
        return int(self.manager.deficit_ms(self.user, self.client_id, self.clock() * 1000.0))


class BrokerQuotas:
    """The client quotas of one broker: the configs every broker holds (ZooKeeper watch or the standalone
    metadata file), the three client managers and the connection quotas. ``throttle`` is the network layer's one
    call per response, ``connection_delay`` its one call per accepted connection."""

    def __init__(self, window_num: int = 11, window_size_seconds: int = 1,
                 clock: Callable[[], float] = time.monotonic, max_connection_creation_rate: float = INT_MAX,
                 controller_window_num: int = 11, controller_window_size_seconds: int = 1) -> None:
        self.configs = QuotaConfigs()
        size_ms = window_size_seconds * 1000
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, self.configs, window_num, size_ms)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, self.configs, window_num, size_ms)
        self.request = ClientQuotaManager(REQUEST_PERCENTAGE, self.configs, window_num, size_ms)
        # KIP-599's token bucket holds quota x controller.quota.window.num x controller.quota.window.size.seconds.
        self.mutation = ClientQuotaManager(CONTROLLER_MUTATION_RATE, self.configs, controller_window_num,
                                           controller_window_size_seconds * 1000,
                                           burst_samples=controller_window_num)
        self.connections = ConnectionQuotas(max_connection_creation_rate, self.configs, window_num, size_ms)
        self.clock = clock
        # Whether a producer_byte_rate, consumer_byte_rate or request_percentage quota is set for anyone, as of
        # configs version ``_client_quotas_version``: asked for every answer (``throttle``), without three calls.
        self._client_quotas = False
        self._client_quotas_version = -1

    def _any_client_quota(self) -> bool:
        if self._client_quotas_version != self.configs.version:
            self._client_quotas_version = self.configs.version
            self._client_quotas = self.produce.enabled or self.fetch.enabled or self.request.enabled
        return self._client_quotas

    def connection_delay(self, ip: str) -> tuple[float, bool]:
        """(seconds before the next accept, whether to close this connection) for a connection from ``ip``."""
        now = self.now_ms()
        return self.connections.accepted(now), self.connections.refuse_ip(ip, now)

    def now_ms(self) -> float:
        return self.clock() * 1000.0

    # --- configs
    def apply(self, entity_type: str, name: str, configs: Mapping[str, str]) -> None:
        """One entity's stored configs changed (non-quota keys such as SCRAM credentials are ignored)."""
        entity = QuotaEntity.from_zk(entity_type, name)
        if entity is not None:
            self.configs.set(entity, parse_values(configs))

    def load(self, by_type: Mapping[str, Mapping[str, Mapping[str, str]]]) -> None:
        """Every stored entity at start: {"users": {name: configs}, "clients": ..., "ips": ...}."""
        entries: dict[QuotaEntity, dict[str, float]] = {}
        for entity_type, entities in by_type.items():
            for name, configs in entities.items():
                entity = QuotaEntity.from_zk(entity_type, name)
                if entity is not None:
                    entries[entity] = parse_values(configs)
        self.configs.replace_all(entries)

    # --- enforcement
    def mutations(self, request: Request) -> MutationBudget | None:
        """The controller_mutation_rate budget of a CreateTopics, CreatePartitions or DeleteTopics request (None:
        the client has no such quota)."""
        if not self.mutation.enabled:
            return None
        user, client_id = user_of(request.principal), request.header.client_id or ""
        if self.mutation.resolve(user, client_id) is None:
            return None
        strict = request.version >= MUTATION_STRICT_FROM.get(request.api_key, 1 << 15)
        return MutationBudget(self.mutation, user, client_id, strict, self.clock)

    def fetch_limit(self, request: Request) -> float | None:
        """The most record bytes a consumer's fetch response may carry under its quota (None: no quota)."""
        if not self.fetch.enabled:
            return None
        return self.fetch.max_value_in_window(user_of(request.principal), request.header.client_id or "")

    def pipelining_allowed(self, principal: str, client_id: str) -> bool:
        """False for a client under a producer_byte_rate or request_percentage quota (the network layer then
        answers its Produce requests one at a time, so its mute after a throttled answer holds back its next
        request); every other client keeps pipelining."""
        if not self._any_client_quota() or not (self.produce.enabled or self.request.enabled):
            return True
        user = user_of(principal)
        return self.produce.resolve(user, client_id) is None and self.request.resolve(user, client_id) is None

    def throttle(self, request: Request, local_seconds: float) -> int:
        """Record a request about to be answered; its throttle time in ms, also set in the response."""
        key = request.api_key
        if key in EXEMPT_KEYS:
            return 0
        response = request.response
        # A mutation quota's throttle time is in the response already (MutationBudget): the channel is muted too.
        mutation_ms = int(response.get("throttle_time_ms") or 0) if key in MUTATION_STRICT_FROM and response else 0
        if not (self._client_quotas if self._client_quotas_version == self.configs.version
                else self._any_client_quota()):
            return mutation_ms
        produce, fetch, req = self.produce.enabled, self.fetch.enabled, self.request.enabled
        user, client_id = user_of(request.principal), request.header.client_id or ""
        now = self.now_ms()
        throttle = 0
        if key == PRODUCE_KEY and produce:
            throttle = self.produce.record(user, client_id, len(request.frame) + 4, now)
        elif key == FETCH_KEY:
            if INT32.unpack_from(request.frame, request.body_pos)[0] >= 0:
                return 0  # a follower's fetch (replica_id): replication is not client traffic
            if fetch:
                throttle = self.fetch.record(user, client_id, fetch_response_bytes(request.response), now)
        if req:
            throttle = max(throttle, self.request.record(user, client_id, local_seconds * 100.0, now))
        if throttle > 0 and response is not None and "throttle_time_ms" in response:
            response["throttle_time_ms"] = max(int(response["throttle_time_ms"]), throttle)
        return max(throttle, mutation_ms)

    def metric_rows(self) -> Iterator[tuple[str, str, str, float, float, float, float]]:
        """(quota type, user, client id, bound, rate, throttle ms total, recorded total) per measured entity."""
        now = self.now_ms()
        for name, manager in (("produce", self.produce), ("fetch", self.fetch), ("request", self.request),
                              ("controller_mutation", self.mutation)):
            for user, client_id, sensor, rate in manager.rows(now):
                yield name, user, client_id, sensor.bound, rate, sensor.throttle_ms_total, sensor.recorded_total
