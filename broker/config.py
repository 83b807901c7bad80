"""Broker and topic configuration: every setting declared once, with Kafka's name, type and default.

The declarations (`BROKER_SETTINGS`, `TOPIC_SETTINGS`) drive parsing, validation, `describe_*` and the
generated `docs/configuration.md` (`python -m moldau.broker.config --markdown`). Keys that are not declared are
logged and ignored, as Kafka does, so a Kafka `server.properties` loads unchanged.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from moldau.storage.config import LogConfig

log = logging.getLogger(__name__)

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
_BOUNDS = {"int": (-(2**31), INT_MAX), "long": (-(2**63), LONG_MAX)}
_INT_RE = re.compile(r"[+-]?[0-9]+")
_DOUBLE_RE = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
TYPES = ("int", "long", "double", "boolean", "string", "list", "password")
# DescribeConfigs ConfigType codes (KIP-569).
CONFIG_TYPE_CODES = {"boolean": 1, "string": 2, "int": 3, "long": 5, "double": 6, "list": 7, "password": 9}
# DescribeConfigs ConfigSource codes.
SOURCE_TOPIC, SOURCE_STATIC_BROKER, SOURCE_DEFAULT = 1, 4, 5


class ConfigError(Exception):
    """A configuration problem; the message always names the key."""

    def __init__(self, key: str, reason: str, value: object = None, *, has_value: bool = True) -> None:
        self.key, self.reason, self.value = key, reason, value
        if has_value:
            super().__init__(f"Invalid value {_show(value)} for configuration {key}: {reason}")
        else:
            super().__init__(f"Invalid configuration {key}: {reason}")


def _show(value: object) -> str:
    if isinstance(value, str):
        return f"'{value}'"
    if isinstance(value, list):
        return "'" + ",".join(str(v) for v in value) + "'"
    return "null" if value is None else f"'{value}'"


class Password:
    """A secret value; its repr never shows the secret (config dumps and logs stay clean)."""

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "[hidden]"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Password) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)


# --- validators


@dataclass(frozen=True, slots=True)
class Range:
    """Numbers in [min, max]; either bound may be open."""

    min: float | None = None
    max: float | None = None

    def __call__(self, value: Any) -> str | None:
        if self.min is not None and value < self.min:
            return f"must be at least {_num(self.min)}"
        if self.max is not None and value > self.max:
            return f"must be no more than {_num(self.max)}"
        return None

    def describe(self) -> str:
        if self.max is None:
            return f"[{_num(self.min)},...]"
        if self.min is None:
            return f"[...,{_num(self.max)}]"
        return f"[{_num(self.min)},...,{_num(self.max)}]"


def _num(x: float | None) -> str:
    return str(int(x)) if isinstance(x, float) and x.is_integer() else str(x)


@dataclass(frozen=True, slots=True)
class OneOf:
    """One of the given strings; for list settings, every item must be one of them."""

    choices: tuple[str, ...]

    def __call__(self, value: Any) -> str | None:
        for item in value if isinstance(value, list) else [value]:
            if item not in self.choices:
                return f"must be one of {', '.join(self.choices)}"
        return None

    def describe(self) -> str:
        return "[" + ", ".join(self.choices) + "]"


@dataclass(frozen=True, slots=True)
class ListenerSyntax:
    """A comma-separated list of `NAME://host:port` (empty host = all interfaces, `[v6addr]` for IPv6)."""

    def __call__(self, value: Any) -> str | None:
        try:
            parse_endpoints(value)
        except ValueError as e:
            return str(e)
        return None

    def describe(self) -> str:
        return "NAME://host:port[,NAME://host:port...]"


@dataclass(frozen=True, slots=True)
class ThrottledReplicas:
    """Kafka's throttled replica lists: empty, ``*``, or ``partition:broker`` pairs."""

    def __call__(self, value: Any) -> str | None:
        items = list(value)
        if items == ["*"] or not items:
            return None
        for item in items:
            partition, sep, broker = item.partition(":")
            if not (sep and partition.strip().isdigit() and broker.strip().isdigit()):
                return "must be * or a list of partitionId:brokerId pairs"
        return None

    def describe(self) -> str:
        return "[partitionId]:[brokerId],[partitionId]:[brokerId],... or *"


class IpOverrides:
    """Kafka's `max.connections.per.ip.overrides`: comma-separated `host:limit` pairs (host name or IP)."""

    def __call__(self, value: Any) -> str | None:
        try:
            parse_ip_overrides(value)
        except ValueError as e:
            return str(e)
        return None

    def describe(self) -> str:
        return "host:n[,host:n...]"


def parse_ip_overrides(text: str) -> dict[str, int]:
    """`"host:n,host2:m"` -> {host: n}; IPv6 literals keep their colons (the limit follows the last one)."""
    out: dict[str, int] = {}
    for item in (i.strip() for i in (text or "").split(",")):
        if not item:
            continue
        host, sep, limit = item.rpartition(":")
        if not sep or not host.strip() or not _INT_RE.fullmatch(limit.strip()) or int(limit) < 0:
            raise ValueError(f"expected host:limit with a limit >= 0, got {item!r}")
        out[host.strip().strip("[]")] = int(limit)
    return out


@dataclass(frozen=True, slots=True)
class PrincipalRules:
    """Kafka's ``ssl.principal.mapping.rules``: DEFAULT and RULE:regex/replacement/[LU] rules, comma-separated."""

    def __call__(self, value: Any) -> str | None:
        from moldau.broker.security.principal_mapping import parse_rules

        try:
            parse_rules(value)
        except ValueError as e:
            return str(e)
        return None

    def describe(self) -> str:
        return "DEFAULT or RULE:regex/replacement/[L|U], comma-separated"


Validator = Range | OneOf | ListenerSyntax | IpOverrides | PrincipalRules | ThrottledReplicas
PORT = Range(-1, 65535)


# --- settings


@dataclass(frozen=True, slots=True)
class Setting:
    """One declared setting. `default` is the typed value (None = null). `fallback` (topic settings only)
    names the broker setting that supplies the value when the topic does not override it."""

    name: str
    type: str
    default: Any
    doc: str
    validator: Validator | None = None
    importance: str = "medium"
    fallback: str | None = None

    def parse(self, raw: str) -> Any:
        """Turn the text of a .properties value into the typed, validated value (raises ConfigError)."""
        t = self.type
        s = raw.strip()
        value: Any
        if t in ("int", "long"):
            if not _INT_RE.fullmatch(s):
                raise ConfigError(self.name, "not a number", raw)
            value = int(s)
            lo, hi = _BOUNDS[t]
            if not lo <= value <= hi:
                raise ConfigError(self.name, f"out of range for a {t}", raw)
        elif t == "double":
            if not _DOUBLE_RE.fullmatch(s):
                raise ConfigError(self.name, "not a number", raw)
            value = float(s)
        elif t == "boolean":
            if s.lower() not in ("true", "false"):
                raise ConfigError(self.name, "expected true or false", raw)
            value = s.lower() == "true"
        elif t == "list":
            value = [item.strip() for item in s.split(",") if item.strip()]
        elif t == "password":
            value = Password(raw)
        else:
            value = s
        self.check(value)
        return value

    def check(self, value: Any) -> None:
        if self.validator is not None and value is not None:
            reason = self.validator(value)
            if reason:
                raise ConfigError(self.name, reason, value)

    def format(self, value: Any) -> str | None:
        """The Kafka-style text of a typed value (None stays None; secrets are never shown)."""
        if value is None:
            return None
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, list):
            return ",".join(value)
        return str(value)


def _s(name: str, type_: str, default: Any, doc: str, validator: Validator | None = None,
       importance: str = "medium") -> Setting:
    return Setting(name, type_, default, doc, validator, importance)


H, L = "high", "low"
AT_LEAST_0, AT_LEAST_1 = Range(0), Range(1)
TIMESTAMP_TYPES = OneOf(("CreateTime", "LogAppendTime"))
CLEANUP_POLICIES = OneOf(("compact", "delete"))
COMPRESSION_TYPES = OneOf(("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"))
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"

BROKER_SETTINGS: tuple[Setting, ...] = (
    # --- general
    _s("broker.id", "int", -1, "The id of this broker; unique in the cluster. -1 asks ZooKeeper for a "
       "generated id above reserved.broker.max.id.", importance=H),
    _s("broker.id.generation.enable", "boolean", True, "Allow a generated broker id when broker.id is -1."),
    _s("reserved.broker.max.id", "int", 1000, "Largest broker.id that may be configured; generated ids start "
       "above it.", AT_LEAST_0),
    _s("broker.rack", "string", None, "Rack (or availability zone) of this broker, used for rack-aware "
       "replica assignment."),
    _s("message.max.bytes", "int", 1048588, "Largest record batch the broker accepts (after compression); "
       "max.message.bytes per topic.", AT_LEAST_0, H),
    _s("num.network.threads", "int", 3, "Accepted for compatibility: network I/O runs as coroutines on the "
       "event loop, so this does not change concurrency.", AT_LEAST_1, H),
    _s("num.io.threads", "int", 8, "Worker coroutines taking requests off the request queue. Each runs a "
       "handler's synchronous part to the end on the one event loop and a waiting handler holds none, so this "
       "bounds no concurrency (queued.max.requests and one request in flight per connection do).",
       AT_LEAST_1, H),
    _s("background.threads", "int", 10, "Accepted for compatibility; background tasks are event-loop tasks.",
       AT_LEAST_1, H),
    _s("queued.max.requests", "int", 500, "Capacity of the request queue; a full queue stops reading from "
       "sockets.", AT_LEAST_1, H),
    _s("queued.max.request.bytes", "long", -1, "Bytes of queued requests allowed before reading stops; -1 = "
       "no limit."),
    _s("request.timeout.ms", "int", 30000, "Timeout of requests this broker sends to other brokers.",
       importance=H),
    # --- socket server
    _s("listeners", "string", "PLAINTEXT://127.0.0.1:9092", "Comma-separated NAME://host:port to listen on; "
       "an empty host binds all interfaces, port 0 picks a free port. The name's security protocol comes from "
       "listener.security.protocol.map (see docs/security.md).", ListenerSyntax(), H),
    _s("advertised.listeners", "string", None, "Endpoints published to clients and other brokers; null = the "
       "same as listeners. Names must appear in listeners.", ListenerSyntax(), H),
    _s("listener.security.protocol.map", "string", DEFAULT_PROTOCOL_MAP, "Listener name to security "
       "protocol, as NAME:PROTOCOL pairs.", importance=L),
    _s("inter.broker.listener.name", "string", None, "Listener used between brokers; null = the first "
       "listener whose protocol is security.inter.broker.protocol."),
    _s("security.inter.broker.protocol", "string", "PLAINTEXT", "Security protocol between brokers.",
       OneOf(("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"))),
    _s("socket.send.buffer.bytes", "int", 102400, "SO_SNDBUF of client sockets; -1 = the OS default.",
       importance=H),
    _s("socket.receive.buffer.bytes", "int", 102400, "SO_RCVBUF of client sockets; -1 = the OS default.",
       importance=H),
    _s("socket.request.max.bytes", "int", 104857600, "Largest request frame accepted; larger ones close the "
       "connection.", AT_LEAST_1, H),
    _s("connections.max.idle.ms", "long", 600000, "Close connections that have neither read nor written for "
       "longer than this (a request in progress keeps its connection); -1 = never.", Range(-1)),
    _s("max.connections", "int", INT_MAX, "Most client connections the broker holds (all listeners); further "
       "ones are closed right after accept and counted in moldau_connections_rejected_total.", AT_LEAST_0),
    _s("max.connections.per.ip", "int", INT_MAX, "Most connections from one IP address; further ones are "
       "closed right after accept.", AT_LEAST_0),
    _s("max.connections.per.ip.overrides", "string", "", "Per-host exceptions to max.connections.per.ip, as "
       "host:n pairs separated by commas (host names are resolved at start-up).", IpOverrides()),
    _s("max.connection.creation.rate", "int", INT_MAX, "Most new connections per second the broker accepts "
       "(all listeners), measured over quota.window.num x quota.window.size.seconds; above it the acceptor "
       "waits before accepting the next one.", AT_LEAST_0),
    # --- client quotas (docs/quotas.md)
    _s("quota.window.num", "int", 11, "Samples kept for client quota rates (byte rates, request percentage, "
       "connection creation rate).", AT_LEAST_1),
    _s("quota.window.size.seconds", "int", 1, "Length of one client quota sample.", AT_LEAST_1),
    _s("controller.quota.window.num", "int", 11, "Samples of the controller mutation quota "
       "(controller_mutation_rate, KIP-599): its token bucket holds quota x this x "
       "controller.quota.window.size.seconds partition mutations.", AT_LEAST_1),
    _s("controller.quota.window.size.seconds", "int", 1, "Length of one controller mutation quota sample.",
       AT_LEAST_1),
    _s("moldau.socket.partial.requests.max.bytes", "long", 268435456, "Moldau's own bound on the memory "
       "held by partially received request frames, summed over all connections. When a new chunk takes "
       "the total above it, the connection holding the largest partial frame is closed (slow-loris "
       "protection). Keep it at least socket.request.max.bytes, or a request that large can never "
       "complete.", AT_LEAST_1),
    # --- log basics
    _s("log.dir", "string", "/tmp/kafka-logs", "Data directory, used when log.dirs is not set.",
       importance=H),
    _s("log.dirs", "list", None, "Comma-separated data directories; null = log.dir.", importance=H),
    _s("num.partitions", "int", 1, "Partitions of an auto-created topic, or of CreateTopics with -1.",
       AT_LEAST_1),
    _s("default.replication.factor", "int", 1, "Replication factor of auto-created topics.", AT_LEAST_1),
    _s("auto.create.topics.enable", "boolean", True, "Create a topic when a client asks for its metadata or "
       "produces to it.", importance=H),
    _s("delete.topic.enable", "boolean", True, "Allow DeleteTopics; when false, the request fails.",
       importance=H),
    _s("min.insync.replicas", "int", 1, "With acks=all, the fewest in-sync replicas for a write to succeed.",
       AT_LEAST_1, H),
    _s("compression.type", "string", "producer", "Compression of stored batches; producer keeps the "
       "producer's codec.", COMPRESSION_TYPES, H),
    _s("num.recovery.threads.per.data.dir", "int", 1, "Threads per log dir that open and recover its logs at "
       "start-up.", AT_LEAST_1, H),
    # --- segments and indexes
    _s("log.segment.bytes", "int", 1073741824, "Size at which a segment file is rolled.", Range(14), H),
    _s("log.roll.ms", "long", None, "Age at which a segment is rolled even if not full; null = "
       "log.roll.hours.", importance=H),
    _s("log.roll.hours", "int", 168, "Segment roll age in hours; log.roll.ms takes precedence.", AT_LEAST_1,
       H),
    _s("log.roll.jitter.ms", "long", None, "Largest random jitter subtracted from the roll age; null = "
       "log.roll.jitter.hours.", importance=H),
    _s("log.roll.jitter.hours", "int", 0, "Roll jitter in hours; log.roll.jitter.ms takes precedence.",
       AT_LEAST_0, H),
    _s("log.index.interval.bytes", "int", 4096, "Bytes appended between two offset-index entries.",
       AT_LEAST_0),
    _s("log.index.size.max.bytes", "int", 10485760, "Largest offset/time index file; a full index rolls the "
       "segment.", Range(4)),
    _s("log.preallocate", "boolean", False, "Preallocate segment files."),
    _s("log.segment.delete.delay.ms", "long", 60000, "Delay between unlinking a segment from the log and "
       "deleting its files.", AT_LEAST_0, H),
    # --- retention
    _s("log.retention.ms", "long", None, "Time to keep a segment; -1 = no time limit. Precedence: "
       "log.retention.ms, then log.retention.minutes, then log.retention.hours.", importance=H),
    _s("log.retention.minutes", "int", None, "Retention in minutes, used when log.retention.ms is not set.",
       importance=H),
    _s("log.retention.hours", "int", 168, "Retention in hours, used when neither log.retention.ms nor "
       "log.retention.minutes is set.", importance=H),
    _s("log.retention.bytes", "long", -1, "Largest size of a partition's log before old segments are "
       "deleted; -1 = no size limit.", importance=H),
    _s("log.retention.check.interval.ms", "long", 300000, "How often retention is enforced.", AT_LEAST_1),
    _s("log.cleanup.policy", "list", ["delete"], "Default cleanup policy of segments beyond retention.",
       CLEANUP_POLICIES),
    _s("log.cleaner.enable", "boolean", True, "Run the log cleaner for compacted topics."),
    _s("log.cleaner.threads", "int", 1, "Log cleaner tasks.", AT_LEAST_0),
    _s("log.cleaner.backoff.ms", "long", 15000, "Sleep of the cleaner when there is nothing to clean.",
       AT_LEAST_0),
    _s("log.cleaner.min.cleanable.ratio", "double", 0.5, "Dirty/total ratio above which a log is compacted.",
       Range(0, 1)),
    _s("log.cleaner.delete.retention.ms", "long", 86400000, "How long tombstones are kept in compacted "
       "topics.", AT_LEAST_0),
    _s("log.cleaner.min.compaction.lag.ms", "long", 0, "Least age of a record before it may be compacted.",
       AT_LEAST_0),
    _s("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX, "Greatest time a record stays uncompacted.",
       AT_LEAST_1),
    _s("log.cleaner.dedupe.buffer.size", "long", 134217728, "Memory for the cleaner's key map.", AT_LEAST_0),
    _s("log.cleaner.io.max.bytes.per.second", "double", 1.7976931348623157e308,
       "I/O the cleaner may read plus write per second (all cleaner threads together).", AT_LEAST_0),
    _s("log.cleaner.nice", "int", 10, "Moldau: niceness added to each cleaner process, so that compaction "
       "yields the CPU to request handling (0 = the broker's own priority).", Range(0, 19)),
    # --- flushing and checkpoints
    _s("log.flush.interval.messages", "long", LONG_MAX, "fsync a partition's log after this many messages.",
       AT_LEAST_1, H),
    _s("log.flush.interval.ms", "long", None, "fsync a partition's log when its oldest unflushed message is "
       "this old; null = log.flush.scheduler.interval.ms.", importance=H),
    _s("log.flush.scheduler.interval.ms", "long", LONG_MAX, "How often the flusher checks whether a log is "
       "due.", importance=H),
    _s("log.flush.offset.checkpoint.interval.ms", "int", 60000, "How often the recovery-point checkpoint is "
       "written.", AT_LEAST_0, H),
    _s("log.flush.start.offset.checkpoint.interval.ms", "int", 60000, "How often the log-start-offset "
       "checkpoint is written.", AT_LEAST_0, H),
    # --- message timestamps
    _s("log.message.timestamp.type", "string", "CreateTime", "Whether stored timestamps are the producer's "
       "(CreateTime) or the broker's append time (LogAppendTime).", TIMESTAMP_TYPES),
    _s("log.message.timestamp.difference.max.ms", "long", LONG_MAX, "Largest allowed difference between a "
       "CreateTime timestamp and the broker clock.", AT_LEAST_0),
    # --- ZooKeeper
    _s("zookeeper.connect", "string", None, "ZooKeeper connection string host:port[,host:port...][/chroot]; "
       "null = standalone mode (metadata in a file in the first log dir).", importance=H),
    _s("zookeeper.session.timeout.ms", "int", 18000, "ZooKeeper session timeout.", AT_LEAST_1, H),
    _s("zookeeper.connection.timeout.ms", "int", None, "Time allowed to connect to ZooKeeper; null = "
       "zookeeper.session.timeout.ms.", importance=H),
    _s("zookeeper.max.in.flight.requests", "int", 10, "Unacknowledged ZooKeeper requests allowed.",
       AT_LEAST_1, H),
    _s("zookeeper.set.acl", "boolean", False, "Create znodes with secure ACLs.", importance=H),
    # --- replication and leadership
    _s("replica.lag.time.max.ms", "long", 30000, "A follower that has not caught up for this long leaves the "
       "ISR.", AT_LEAST_1, H),
    _s("replica.socket.timeout.ms", "int", 30000, "Socket timeout of follower fetch requests.", importance=H),
    _s("replica.socket.receive.buffer.bytes", "int", 65536, "SO_RCVBUF of follower fetch connections.",
       importance=H),
    _s("replica.fetch.max.bytes", "int", 1048576, "Bytes a follower asks for per partition.", AT_LEAST_0),
    _s("replica.fetch.response.max.bytes", "int", 10485760, "Bytes a follower asks for per fetch.",
       AT_LEAST_0),
    _s("replica.fetch.min.bytes", "int", 1, "Bytes a follower fetch waits for.", importance=H),
    _s("replica.fetch.wait.max.ms", "int", 500, "Longest a follower fetch waits in the leader's purgatory; "
       "at most replica.lag.time.max.ms.", AT_LEAST_0, H),
    _s("replica.fetch.backoff.ms", "int", 1000, "Sleep of a fetcher after a fetch error; the wait of a partition "
       "answered with an error before it is fetched again (a leader that has not applied its LeaderAndIsr yet: "
       "50 ms, doubling up to this).", AT_LEAST_0),
    _s("leader.replication.throttled.rate", "long", LONG_MAX, "Bytes/s a leader sends to the throttled replicas "
       "(leader.replication.throttled.replicas) that are not in sync (reassignments; docs/quotas.md).", AT_LEAST_0),
    _s("follower.replication.throttled.rate", "long", LONG_MAX, "Bytes/s a follower fetches for its throttled "
       "replicas (follower.replication.throttled.replicas) that are not in sync.", AT_LEAST_0),
    _s("replication.quota.window.num", "int", 11, "Samples kept for the replication throttle rates.", AT_LEAST_1),
    _s("replication.quota.window.size.seconds", "int", 1, "Length of one replication throttle sample.",
       AT_LEAST_1),
    _s("num.replica.fetchers", "int", 1, "Fetcher tasks per source broker.", AT_LEAST_1, H),
    _s("replica.high.watermark.checkpoint.interval.ms", "long", 5000, "How often high watermarks are "
       "checkpointed.", AT_LEAST_1, H),
    _s("unclean.leader.election.enable", "boolean", False, "Allow an out-of-sync replica to become leader "
       "(may lose data).", importance=H),
    _s("auto.leader.rebalance.enable", "boolean", True, "Move leadership back to preferred replicas "
       "periodically.", importance=H),
    _s("leader.imbalance.check.interval.seconds", "long", 300, "How often the controller checks leader "
       "balance.", AT_LEAST_1, H),
    _s("leader.imbalance.per.broker.percentage", "int", 10, "Share of a broker's partitions not led by their "
       "preferred leader that triggers a rebalance.", Range(0, 100), H),
    _s("controller.socket.timeout.ms", "int", 30000, "Socket timeout of controller-to-broker requests."),
    _s("controlled.shutdown.enable", "boolean", True, "Move leadership away before shutting down."),
    _s("controlled.shutdown.max.retries", "int", 3, "Attempts at a controlled shutdown.", AT_LEAST_0),
    _s("controlled.shutdown.retry.backoff.ms", "long", 5000, "Wait between controlled shutdown attempts.",
       AT_LEAST_0),
    # --- purgatories and fetch
    _s("fetch.max.bytes", "int", 57671680, "Most bytes returned by one fetch request.", Range(1024)),
    _s("fetch.purgatory.purge.interval.requests", "int", 1000, "Accepted for compatibility: completed "
       "delayed operations leave their watch lists at once, so no purge pass is needed."),
    _s("producer.purgatory.purge.interval.requests", "int", 1000, "Accepted for compatibility (see "
       "fetch.purgatory.purge.interval.requests)."),
    _s("max.incremental.fetch.session.cache.slots", "int", 1000, "Incremental fetch sessions kept (KIP-227), "
       "followers' and consumers'; with all taken, a follower's new session may replace the least recently used "
       "consumer's. 0 turns sessions off.", AT_LEAST_0),
    # --- group coordinator and offsets
    _s("group.initial.rebalance.delay.ms", "int", 3000, "Delay of the first rebalance of an empty group, to "
       "let more members join.", AT_LEAST_0),
    _s("group.min.session.timeout.ms", "int", 6000, "Smallest session timeout a member may ask for."),
    _s("group.max.session.timeout.ms", "int", 1800000, "Largest session timeout a member may ask for."),
    _s("group.max.size", "int", INT_MAX, "Most members in one consumer group.", AT_LEAST_1),
    # --- the consumer group protocol (KIP-848), Kafka 4.0's names and defaults
    _s("group.coordinator.rebalance.protocols", "list", ["classic", "consumer"], "Group protocols the coordinator "
       "serves: classic (JoinGroup/SyncGroup) and consumer (KIP-848's ConsumerGroupHeartbeat).",
       OneOf(("classic", "consumer"))),
    _s("group.consumer.assignors", "list", ["org.apache.kafka.coordinator.group.assignor.UniformAssignor",
                                            "org.apache.kafka.coordinator.group.assignor.RangeAssignor"],
       "Server-side assignors of consumer groups (class or short names uniform, range); the first is the "
       "default.", OneOf(("uniform", "range", "org.apache.kafka.coordinator.group.assignor.UniformAssignor",
                          "org.apache.kafka.coordinator.group.assignor.RangeAssignor"))),
    _s("group.consumer.session.timeout.ms", "int", 45000, "A consumer group member without a heartbeat for this "
       "long is removed and its partitions move.", AT_LEAST_1),
    _s("group.consumer.min.session.timeout.ms", "int", 45000, "Smallest allowed "
       "group.consumer.session.timeout.ms.", AT_LEAST_1),
    _s("group.consumer.max.session.timeout.ms", "int", 60000, "Largest allowed "
       "group.consumer.session.timeout.ms.", AT_LEAST_1),
    _s("group.consumer.heartbeat.interval.ms", "int", 5000, "How often consumer group members heartbeat.",
       AT_LEAST_1),
    _s("group.consumer.min.heartbeat.interval.ms", "int", 5000, "Smallest allowed "
       "group.consumer.heartbeat.interval.ms.", AT_LEAST_1),
    _s("group.consumer.max.heartbeat.interval.ms", "int", 15000, "Largest allowed "
       "group.consumer.heartbeat.interval.ms.", AT_LEAST_1),
    _s("group.consumer.max.size", "int", INT_MAX, "Most members in one consumer group.", AT_LEAST_1),
    _s("offsets.topic.num.partitions", "int", 50, "Partitions of __consumer_offsets (fixed once created).",
       AT_LEAST_1, H),
    _s("offsets.topic.replication.factor", "int", 3, "Replication factor of __consumer_offsets, capped at the "
       "number of live brokers when the topic is created (on the first FindCoordinator).", Range(1, 32767), H),
    _s("offsets.topic.segment.bytes", "int", 104857600, "Segment size of __consumer_offsets.", AT_LEAST_1, H),
    _s("offsets.load.buffer.size", "int", 5242880, "Batch size when loading offsets into the cache.",
       AT_LEAST_1, H),
    _s("offsets.retention.minutes", "int", 10080, "Committed offsets of an empty group are dropped after "
       "this.", AT_LEAST_1, H),
    _s("offsets.retention.check.interval.ms", "long", 600000, "How often stale offsets are looked for.",
       AT_LEAST_1, H),
    _s("offsets.commit.timeout.ms", "int", 5000, "Longest an offset commit waits for replication.",
       AT_LEAST_1, H),
    _s("offset.metadata.max.bytes", "int", 4096, "Largest metadata string stored with a committed offset.",
       importance=H),
    # --- transactions and idempotence
    _s("transactional.id.expiration.ms", "int", 604800000, "A transactional id without updates for this long "
       "expires.", AT_LEAST_1, H),
    _s("transaction.max.timeout.ms", "int", 900000, "Largest transaction timeout a producer may ask for.",
       AT_LEAST_1, H),
    _s("transaction.state.log.num.partitions", "int", 50, "Partitions of __transaction_state.", AT_LEAST_1,
       H),
    _s("transaction.state.log.replication.factor", "int", 3, "Replication factor of __transaction_state.",
       Range(1, 32767), H),
    _s("transaction.state.log.min.isr", "int", 2, "min.insync.replicas of __transaction_state.", AT_LEAST_1,
       H),
    _s("transaction.state.log.segment.bytes", "int", 104857600, "Segment size of __transaction_state.",
       AT_LEAST_1, H),
    _s("transaction.state.log.load.buffer.size", "int", 5242880, "Batch size when loading transaction state "
       "into the cache.", AT_LEAST_1, L),
    _s("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10000, "How often the "
       "transaction coordinator looks for transactions open longer than their timeout (and aborts them).",
       AT_LEAST_1, L),
    _s("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3600000, "How often the "
       "transaction coordinator removes transactional ids idle for transactional.id.expiration.ms.",
       AT_LEAST_1, L),
    _s("producer.id.expiration.ms", "int", 86400000, "A producer id's sequence state is dropped this long "
       "after its last write.", AT_LEAST_1, L),
    # --- TLS (PEM files only; per listener as listener.name.<name>.ssl.*, these are the fallback)
    _s("ssl.keystore.type", "string", "JKS", "Format of ssl.keystore.location; Moldau reads only PEM (a file "
       "with the certificate chain and the private key).", OneOf(("JKS", "PKCS12", "PEM"))),
    _s("ssl.keystore.location", "string", None, "PEM file with this broker's certificate chain and private "
       "key; required on SSL and SASL_SSL listeners."),
    _s("ssl.keystore.password", "password", None, "Accepted for compatibility; a PEM key's password is "
       "ssl.key.password."),
    _s("ssl.key.password", "password", None, "Password of the (encrypted) private key in the PEM keystore."),
    _s("ssl.truststore.type", "string", "JKS", "Format of ssl.truststore.location; Moldau reads only PEM.",
       OneOf(("JKS", "PKCS12", "PEM"))),
    _s("ssl.truststore.location", "string", None, "PEM file of the CA certificates that client certificates "
       "(and, between brokers, broker certificates) are checked against."),
    _s("ssl.truststore.password", "password", None, "Accepted for compatibility; PEM truststores have none."),
    _s("ssl.client.auth", "string", "none", "Whether a TLS client must present a certificate.",
       OneOf(("none", "requested", "required"))),
    _s("ssl.enabled.protocols", "list", ["TLSv1.2", "TLSv1.3"], "TLS versions accepted.",
       importance=H),
    _s("ssl.cipher.suites", "list", [], "OpenSSL cipher names allowed for TLSv1.2 (empty = OpenSSL's "
       "defaults); TLSv1.3 suites are not configurable in Python's ssl."),
    _s("ssl.endpoint.identification.algorithm", "string", "https", "How a broker checks another broker's "
       "certificate when it connects to it: https = the host name must match; empty = not checked."),
    _s("ssl.principal.mapping.rules", "string", "DEFAULT", "KIP-371: how an SSL client certificate's subject "
       "(its RFC 2253 name) becomes the principal's name, e.g. RULE:^CN=(.*?),OU=eng.*$/$1/L makes "
       "CN=Alice,OU=eng,O=Example User:alice. The first rule whose regex matches the whole subject wins; "
       "DEFAULT keeps the subject; a certificate no rule matches is refused (docs/security.md).",
       PrincipalRules()),
    # --- SASL
    _s("sasl.enabled.mechanisms", "list", ["GSSAPI"], "SASL mechanisms served on SASL listeners; Moldau "
       "implements PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512.", importance=H),
    _s("sasl.mechanism.inter.broker.protocol", "string", "GSSAPI", "SASL mechanism brokers use with each "
       "other."),
    _s("sasl.jaas.config", "password", None, "JAAS login context: PlainLoginModule with user_<name>=\"pw\" "
       "entries for PLAIN, username/password for the broker's own inter-broker login. Per listener and "
       "mechanism as listener.name.<name>.<mechanism>.sasl.jaas.config."),
    _s("sasl.server.max.receive.size", "int", 524288, "Largest frame accepted before a connection has "
       "authenticated; larger ones close it before any buffer is allocated.", AT_LEAST_1),
    _s("connections.max.reauth.ms", "long", 0, "KIP-368: a SASL session lasts this long; the client must "
       "re-authenticate on the same connection before it ends (SaslAuthenticate v1+ tells it when), else its "
       "next request closes the connection. 0 = sessions do not expire.", AT_LEAST_0),
    _s("connection.failed.authentication.delay.ms", "int", 100, "A failed authentication is answered (and "
       "its connection closed) after this delay, to slow down password guessing.", AT_LEAST_0, L),
    # --- ACLs (docs/security.md "ACLs")
    _s("authorizer.class.name", "string", "", "Authorizer checked on every request: "
       "kafka.security.authorizer.AclAuthorizer (Kafka's name) or moldau.acl (the same); ACLs live in "
       "ZooKeeper (standalone: acls.json in the first log dir). Empty = no authorization.",
       OneOf(("", "kafka.security.authorizer.AclAuthorizer", "kafka.security.auth.SimpleAclAuthorizer",
              "moldau.acl"))),
    _s("super.users", "string", "", "Principals allowed everything, separated by ';' (User:admin;User:broker).",
       importance=L),
    _s("allow.everyone.if.no.acl.found", "boolean", False, "A resource no ACL matches is open to everyone "
       "(else only super users may use it).", importance=L),
    # --- tiered storage (KIP-405, docs/tiered-storage.md)
    _s("remote.log.storage.system.enable", "boolean", False, "Tiered storage on this broker: topics with "
       "remote.storage.enable=true copy rolled segments to remote storage and read them back.", importance=H),
    _s("remote.log.storage.manager.class.name", "string", None, "The remote storage manager: an entry point "
       "of the moldau.remote_storage_managers group (filesystem) or a dotted path package.module.Class. "
       "Properties prefixed rsm.config. configure it (rsm.config.dir for filesystem)."),
    _s("remote.log.manager.task.interval.ms", "long", 30000, "How often a leader copies rolled segments to "
       "remote storage and enforces local and remote retention.", AT_LEAST_1),
    _s("remote.log.reader.threads", "int", 10, "Threads that read remote segments for fetches.", AT_LEAST_1),
    _s("remote.log.manager.copy.max.bytes.per.second", "long", LONG_MAX, "Bound on the bytes per second "
       "copied to remote storage by this broker.", AT_LEAST_1),
    _s("remote.log.manager.fetch.max.bytes.per.second", "long", LONG_MAX, "Bound on the bytes per second "
       "read from remote storage by this broker.", AT_LEAST_1),
    _s("remote.fetch.max.wait.ms", "int", 500, "Longest a fetch waits for a remote read before it answers "
       "with what it has.", AT_LEAST_1),
    _s("log.local.retention.ms", "long", -2, "Default local.retention.ms: -2 = retention.ms.", Range(-2)),
    _s("log.local.retention.bytes", "long", -2, "Default local.retention.bytes: -2 = retention.bytes.",
       Range(-2)),
    _s("rlmm.config.remote.log.metadata.topic.num.partitions", "int", 50, "Partitions of "
       "__remote_log_metadata.", AT_LEAST_1),
    _s("rlmm.config.remote.log.metadata.topic.replication.factor", "int", 3, "Replication factor of "
       "__remote_log_metadata (created once that many brokers are registered; 1 on a standalone broker).",
       AT_LEAST_1),
    # --- Moldau's own
    _s("metrics.port", "int", -1, "Port of the Prometheus /metrics endpoint; -1 = disabled, 0 = a free port "
       "(logged at start-up).", PORT),
    _s("metrics.host", "string", "127.0.0.1", "Address the /metrics endpoint binds to."),
    _s("moldau.event.loop", "string", "uvloop", "Event loop implementation.", OneOf(("uvloop", "asyncio"))),
)


def _t(name: str, type_: str, default: Any, fallback: str | None, doc: str,
       validator: Validator | None = None) -> Setting:
    return Setting(name, type_, default, doc, validator, "medium", fallback)


TOPIC_SETTINGS: tuple[Setting, ...] = (
    _t("cleanup.policy", "list", ["delete"], "log.cleanup.policy", "delete and/or compact.",
       CLEANUP_POLICIES),
    _t("compression.type", "string", "producer", "compression.type", "Compression of stored batches.",
       COMPRESSION_TYPES),
    _t("delete.retention.ms", "long", 86400000, "log.cleaner.delete.retention.ms", "How long tombstones are "
       "kept in a compacted topic.", AT_LEAST_0),
    _t("file.delete.delay.ms", "long", 60000, "log.segment.delete.delay.ms", "Delay before a deleted "
       "segment's files are removed.", AT_LEAST_0),
    _t("flush.messages", "long", LONG_MAX, "log.flush.interval.messages", "fsync after this many messages.",
       AT_LEAST_1),
    _t("flush.ms", "long", LONG_MAX, "log.flush.interval.ms", "fsync when the oldest unflushed message is "
       "this old.", AT_LEAST_0),
    _t("index.interval.bytes", "int", 4096, "log.index.interval.bytes", "Bytes between offset-index entries.",
       AT_LEAST_0),
    _t("local.retention.bytes", "long", -2, "log.local.retention.bytes", "With remote.storage.enable: the "
       "largest local size of the partition before copied segments are deleted locally; -2 = retention.bytes.",
       Range(-2)),
    _t("local.retention.ms", "long", -2, "log.local.retention.ms", "With remote.storage.enable: how long a "
       "copied segment stays on local disk; -2 = retention.ms.", Range(-2)),
    _t("max.message.bytes", "int", 1048588, "message.max.bytes", "Largest record batch accepted.",
       AT_LEAST_0),
    _t("max.compaction.lag.ms", "long", LONG_MAX, "log.cleaner.max.compaction.lag.ms",
       "Greatest time a record stays uncompacted.", AT_LEAST_1),
    _t("message.timestamp.difference.max.ms", "long", LONG_MAX, "log.message.timestamp.difference.max.ms",
       "Largest CreateTime difference from the broker clock.", AT_LEAST_0),
    _t("message.timestamp.type", "string", "CreateTime", "log.message.timestamp.type",
       "CreateTime or LogAppendTime.", TIMESTAMP_TYPES),
    _t("min.cleanable.dirty.ratio", "double", 0.5, "log.cleaner.min.cleanable.ratio", "Dirty ratio above "
       "which the log is compacted.", Range(0, 1)),
    _t("min.compaction.lag.ms", "long", 0, "log.cleaner.min.compaction.lag.ms",
       "Least age before compaction.", AT_LEAST_0),
    _t("min.insync.replicas", "int", 1, "min.insync.replicas", "Fewest in-sync replicas for an acks=all "
       "write.", AT_LEAST_1),
    _t("preallocate", "boolean", False, "log.preallocate", "Preallocate segment files."),
    _t("remote.storage.enable", "boolean", False, None, "Tier this topic: copy rolled segments to remote "
       "storage (needs remote.log.storage.system.enable); retention.ms/bytes then bound the whole log."),
    _t("retention.bytes", "long", -1, "log.retention.bytes", "Largest partition size before old segments are "
       "deleted; -1 = no limit."),
    _t("retention.ms", "long", 604800000, "log.retention.ms", "Time to keep a segment; -1 = no limit. "
       "Default: log.retention.ms, else log.retention.minutes, else log.retention.hours.", Range(-1)),
    _t("segment.bytes", "int", 1073741824, "log.segment.bytes", "Segment size.", Range(14)),
    _t("segment.index.bytes", "int", 10485760, "log.index.size.max.bytes", "Largest index file.", Range(4)),
    _t("segment.jitter.ms", "long", 0, "log.roll.jitter.ms", "Largest roll jitter. Default: "
       "log.roll.jitter.ms, else log.roll.jitter.hours.", AT_LEAST_0),
    _t("segment.ms", "long", 604800000, "log.roll.ms", "Segment roll age. Default: log.roll.ms, else "
       "log.roll.hours.", AT_LEAST_1),
    _t("unclean.leader.election.enable", "boolean", False, "unclean.leader.election.enable", "Allow an "
       "out-of-sync replica to become leader."),
    # Replication throttles (KIP-73): no broker setting behind them.
    _t("leader.replication.throttled.replicas", "list", [], None, "Replicas (partition:broker pairs, or *) whose "
       "replication the leader throttles to leader.replication.throttled.rate while they are not in sync.",
       ThrottledReplicas()),
    _t("follower.replication.throttled.replicas", "list", [], None, "Replicas (partition:broker pairs, or *) "
       "whose fetching the follower throttles to follower.replication.throttled.rate while they are not in sync.",
       ThrottledReplicas()),
)

# --- Kafka 3.9 settings Moldau does not implement (broker/kafka_inert_settings.py): accepted, validated by type,
# described and documented as having no effect. Appended after the declarations above; a name declared above wins.
def _inert_settings() -> tuple[tuple[Setting, ...], tuple[Setting, ...]]:
    from moldau.broker import kafka_inert_settings as inert

    declared = {s.name for s in BROKER_SETTINGS}
    broker = tuple(Setting(name, inert.moldau_type(t), default, inert.doc(area), importance="low")
                   for name, t, default, _mode, area in inert.BROKER_ROWS if name not in declared)
    declared_topics = {s.name for s in TOPIC_SETTINGS}
    topic = tuple(Setting(name, inert.moldau_type(t), default, inert.doc(area), None, "medium", fallback)
                  for name, t, default, fallback, area in inert.TOPIC_ROWS if name not in declared_topics)
    return broker, topic


INERT_BROKER_SETTINGS, INERT_TOPIC_SETTINGS = _inert_settings()
BROKER_SETTINGS = BROKER_SETTINGS + INERT_BROKER_SETTINGS
TOPIC_SETTINGS = TOPIC_SETTINGS + INERT_TOPIC_SETTINGS

SETTINGS: dict[str, Setting] = {s.name: s for s in BROKER_SETTINGS}
TOPIC: dict[str, Setting] = {s.name: s for s in TOPIC_SETTINGS}

# storage.LogConfig field <- topic setting.
LOG_CONFIG_FIELDS = {
    "segment_bytes": "segment.bytes", "segment_ms": "segment.ms", "segment_jitter_ms": "segment.jitter.ms",
    "retention_ms": "retention.ms", "retention_bytes": "retention.bytes",
    "index_interval_bytes": "index.interval.bytes", "segment_index_bytes": "segment.index.bytes",
    "flush_interval_messages": "flush.messages", "flush_interval_ms": "flush.ms",
    "max_message_bytes": "max.message.bytes", "message_timestamp_type": "message.timestamp.type",
    "file_delete_delay_ms": "file.delete.delay.ms",
    "delete_retention_ms": "delete.retention.ms", "min_compaction_lag_ms": "min.compaction.lag.ms",
    "min_cleanable_dirty_ratio": "min.cleanable.dirty.ratio", "max_compaction_lag_ms": "max.compaction.lag.ms",
    "remote_storage_enable": "remote.storage.enable", "local_retention_ms": "local.retention.ms",
    "local_retention_bytes": "local.retention.bytes",
}


# --- .properties


def load_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read a Java .properties file (UTF-8, falling back to ISO-8859-1 like Java's loader)."""
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return parse_properties(text)


_WS = " \t\f"


def parse_properties(text: str) -> dict[str, str]:
    """Parse .properties text: `#`/`!` comments, `key=value`, `key: value`, `key value`, trailing-backslash
    continuations, and the escapes \\t \\n \\r \\f \\uXXXX (any other escaped character stands for itself)."""
    props: dict[str, str] = {}
    lines = re.split(r"\r\n|\r|\n", text)
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(_WS)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line):
            line = line[:-1]
            if i >= len(lines):
                break
            line += lines[i].lstrip(_WS)
            i += 1
        raw_key, raw_value = _split_key_value(line)
        key = _unescape(raw_key, raw_key)
        props[key] = _unescape(raw_value, key)
    return props


def _continues(line: str) -> bool:
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


def _split_key_value(line: str) -> tuple[str, str]:
    n, pos = len(line), 0
    while pos < n:
        c = line[pos]
        if c == "\\":
            pos += 2
            continue
        if c in "=:" or c in _WS:
            break
        pos += 1
    key = line[:pos]
    pos = min(pos, n)
    separated = pos < n and line[pos] in "=:"
    if separated:
        pos += 1
    while pos < n and line[pos] in _WS:
        pos += 1
    if not separated and pos < n and line[pos] in "=:":
        pos += 1
        while pos < n and line[pos] in _WS:
            pos += 1
    return key, line[pos:]


_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(s: str, key: str) -> str:
    if "\\" not in s:
        return s
    out: list[str] = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        if i + 1 >= n:  # a lone trailing backslash (continuation at end of file)
            break
        e = s[i + 1]
        if e == "u":
            digits = s[i + 2:i + 6]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise ConfigError(key, "malformed \\uXXXX escape in the properties file", has_value=False)
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_SIMPLE_ESCAPES.get(e, e))
            i += 2
    return "".join(out)


# --- listeners


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One listener: `name` is upper-case, `host` "" means all interfaces, port 0 means pick a free port."""

    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


_ENDPOINT_RE = re.compile(r"([A-Za-z0-9_.-]+)://(\[[0-9A-Fa-f:.%]+\]|[^:/\[\]]*):(-?[0-9]+)")


def parse_endpoints(text: str, protocol_map: Mapping[str, str] | None = None) -> list[Endpoint]:
    """Parse `NAME://host:port,...`; raises ValueError with the reason. Listener names must be unique."""
    endpoints: list[Endpoint] = []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        m = _ENDPOINT_RE.fullmatch(item)
        if m is None:
            raise ValueError(f"'{item}' is not of the form NAME://host:port")
        name, host, port = m.group(1).upper(), m.group(2).strip("[]"), int(m.group(3))
        if not 0 <= port <= 65535:
            raise ValueError(f"port {port} of listener {name} is not in 0-65535")
        if any(e.name == name for e in endpoints):
            raise ValueError(f"listener name {name} appears more than once")
        proto = "PLAINTEXT"
        if protocol_map is not None:
            if name not in protocol_map:
                raise ValueError(f"no security protocol for listener {name} "
                                 "in listener.security.protocol.map")
            proto = protocol_map[name]
        endpoints.append(Endpoint(name, host, port, proto))
    return endpoints


def parse_protocol_map(text: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        name, sep, proto = item.partition(":")
        if not sep or not name.strip() or not proto.strip():
            raise ConfigError("listener.security.protocol.map", f"'{item}' is not NAME:PROTOCOL", text)
        result[name.strip().upper()] = proto.strip().upper()
    return result


# --- BrokerConfig


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One row of a DescribeConfigs answer."""

    name: str
    value: str | None
    source: int
    sensitive: bool
    type_code: int
    doc: str


HOUR_MS, MINUTE_MS = 3_600_000, 60_000


class BrokerConfig:
    """The parsed, validated broker configuration. `get(name)` returns typed values; derived settings
    (retention, roll, flush, listeners, log dirs) have properties that apply Kafka's precedence rules."""

    __slots__ = ("values", "originals", "_listeners", "_advertised", "_protocol_map")

    def __init__(self, props: Mapping[str, str] | None = None) -> None:
        self.originals: dict[str, str] = dict(props or {})
        self.values: dict[str, Any] = {}
        for s in BROKER_SETTINGS:
            raw = self.originals.get(s.name)
            self.values[s.name] = s.default if raw is None else s.parse(raw)
        unknown = sorted(k for k in self.originals if k not in SETTINGS and not k.startswith(("listener.name.", "rsm.config.")))
        for key in unknown:
            log.warning("[broker %s] unknown configuration %r was supplied and is ignored",
                        self.broker_id, key)
        self._protocol_map = parse_protocol_map(self.values["listener.security.protocol.map"])
        for name, proto in self._protocol_map.items():
            if proto not in SECURITY_PROTOCOLS:
                raise ConfigError("listener.security.protocol.map", f"listener {name}: unknown security "
                                  f"protocol {proto} (one of {', '.join(SECURITY_PROTOCOLS)})",
                                  self.values["listener.security.protocol.map"])
        self._listeners = self._endpoints("listeners", self.values["listeners"])
        adv = self.values["advertised.listeners"]
        self._advertised = self._listeners if adv is None else self._endpoints("advertised.listeners", adv)
        self._validate()

    @classmethod
    def from_sources(cls, path: str | os.PathLike[str] | None, overrides: Sequence[str] = ()) -> BrokerConfig:
        """Load `path` (if any), then apply `key=value` overrides, which win over the file."""
        props = load_properties(path) if path is not None else {}
        for item in overrides:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ConfigError(key.strip() or item, "an override must be key=value", item)
            props[key.strip()] = value
        return cls(props)

    def get(self, name: str) -> Any:
        if name not in self.values:
            raise KeyError(f"unknown configuration {name}")
        return self.values[name]

    def __repr__(self) -> str:
        return f"BrokerConfig(broker.id={self.values['broker.id']}, listeners={self.values['listeners']!r})"

    def _endpoints(self, key: str, text: str) -> list[Endpoint]:
        try:
            endpoints = parse_endpoints(text, self._protocol_map)
        except ValueError as e:
            raise ConfigError(key, str(e), text) from None
        if not endpoints:
            raise ConfigError(key, "at least one listener is required", text)
        return endpoints

    def _validate(self) -> None:
        v = self.values
        if v["broker.id.generation.enable"]:
            if not -1 <= v["broker.id"] <= v["reserved.broker.max.id"]:
                raise ConfigError("broker.id", "must be -1 (generated) or between 0 and "
                                  "reserved.broker.max.id", v["broker.id"])
        elif v["broker.id"] < 0:
            raise ConfigError("broker.id", "must be at least 0 when broker.id.generation.enable is false",
                              v["broker.id"])
        if self.retention_ms == 0:
            key = next(k for k in ("log.retention.ms", "log.retention.minutes", "log.retention.hours")
                       if v[k] is not None)
            raise ConfigError(key, "retention must be unlimited (-1) or at least 1 ms", v[key])
        names = {e.name for e in self._listeners}
        for ep in self._advertised:
            if ep.name not in names:
                raise ConfigError("advertised.listeners", f"listener {ep.name} is not in listeners",
                                  v["advertised.listeners"])
            if v["advertised.listeners"] is not None and ep.host in ("0.0.0.0", "::"):
                raise ConfigError("advertised.listeners", "cannot advertise the meta-address " + ep.host,
                                  v["advertised.listeners"])
        ib = v["inter.broker.listener.name"]
        if ib is not None and ib.upper() not in names:
            raise ConfigError("inter.broker.listener.name", "not a listener name", ib)
        if ib is None and not any(e.security_protocol == v["security.inter.broker.protocol"]
                                  for e in self._advertised):
            raise ConfigError("security.inter.broker.protocol", "no listener uses this protocol",
                              v["security.inter.broker.protocol"])
        from moldau.broker.security.listener_config import validate_listener_security

        validate_listener_security(self)
        if v["replica.fetch.wait.max.ms"] > v["replica.lag.time.max.ms"]:
            raise ConfigError("replica.fetch.wait.max.ms", "must not exceed replica.lag.time.max.ms",
                              v["replica.fetch.wait.max.ms"])
        if v["group.min.session.timeout.ms"] > v["group.max.session.timeout.ms"]:
            raise ConfigError("group.min.session.timeout.ms", "must not exceed group.max.session.timeout.ms",
                              v["group.min.session.timeout.ms"])
        for name, low, high in (("group.consumer.session.timeout.ms", "group.consumer.min.session.timeout.ms",
                                 "group.consumer.max.session.timeout.ms"),
                                ("group.consumer.heartbeat.interval.ms", "group.consumer.min.heartbeat.interval.ms",
                                 "group.consumer.max.heartbeat.interval.ms")):
            if not v[low] <= v[name] <= v[high]:
                raise ConfigError(name, f"must be between {low} ({v[low]}) and {high} ({v[high]})", v[name])
        if v["group.consumer.heartbeat.interval.ms"] >= v["group.consumer.session.timeout.ms"]:
            raise ConfigError("group.consumer.heartbeat.interval.ms", "must be less than "
                              "group.consumer.session.timeout.ms", v["group.consumer.heartbeat.interval.ms"])
        seen: dict[str, Path] = {}
        for d in self.log_dirs:
            norm = os.path.normpath(os.path.abspath(d))
            if norm in seen:
                raise ConfigError("log.dirs", f"duplicate log directory {d}", [str(p) for p in self.log_dirs])
            seen[norm] = d
        if not self.log_dirs:
            raise ConfigError("log.dirs", "at least one log directory is required", v["log.dirs"])
        if v["remote.log.storage.system.enable"] and not v["remote.log.storage.manager.class.name"]:
            raise ConfigError("remote.log.storage.manager.class.name", "required when "
                              "remote.log.storage.system.enable is true", None)

    # --- typed accessors for the hot settings

    @property
    def broker_id(self) -> int:
        return int(self.values["broker.id"])

    @property
    def broker_rack(self) -> str | None:
        rack: str | None = self.values["broker.rack"]
        return rack

    @property
    def listeners(self) -> list[Endpoint]:
        return list(self._listeners)

    @property
    def advertised_listeners(self) -> list[Endpoint]:
        """advertised.listeners, or listeners when it is null. A port 0 / empty host must be replaced by the
        server with the bound port / a reachable host before it is published."""
        return list(self._advertised)

    @property
    def inter_broker_listener_name(self) -> str:
        ib = self.values["inter.broker.listener.name"]
        if ib is not None:
            return str(ib).upper()
        proto = self.values["security.inter.broker.protocol"]
        return next(e.name for e in self._advertised if e.security_protocol == proto)

    @property
    def log_dirs(self) -> list[Path]:
        dirs = self.values["log.dirs"]
        if dirs is None:
            dirs = [d.strip() for d in self.values["log.dir"].split(",") if d.strip()]
        return [Path(d) for d in dirs]

    @property
    def retention_ms(self) -> int:
        """log.retention.ms, else .minutes, else .hours; any negative result means unlimited (-1)."""
        v = self.values
        if v["log.retention.ms"] is not None:
            ms = v["log.retention.ms"]
        elif v["log.retention.minutes"] is not None:
            ms = v["log.retention.minutes"] * MINUTE_MS
        else:
            ms = v["log.retention.hours"] * HOUR_MS
        return -1 if ms < 0 else int(ms)

    @property
    def roll_ms(self) -> int:
        ms = self.values["log.roll.ms"]
        return int(ms) if ms is not None else int(self.values["log.roll.hours"]) * HOUR_MS

    @property
    def roll_jitter_ms(self) -> int:
        ms = self.values["log.roll.jitter.ms"]
        return int(ms) if ms is not None else int(self.values["log.roll.jitter.hours"]) * HOUR_MS

    @property
    def flush_interval_ms(self) -> int:
        ms = self.values["log.flush.interval.ms"]
        return int(ms) if ms is not None else int(self.values["log.flush.scheduler.interval.ms"])

    @property
    def zookeeper_connection_timeout_ms(self) -> int:
        ms = self.values["zookeeper.connection.timeout.ms"]
        return int(ms) if ms is not None else int(self.values["zookeeper.session.timeout.ms"])

    @property
    def offsets_retention_ms(self) -> int:
        return int(self.values["offsets.retention.minutes"]) * MINUTE_MS

    # --- topic-level configuration

    def topic_default(self, name: str) -> Any:
        """The broker-derived value of a topic setting (what a topic without an override gets)."""
        if name == "retention.ms":
            return self.retention_ms
        if name == "segment.ms":
            return self.roll_ms
        if name == "segment.jitter.ms":
            return self.roll_jitter_ms
        if name == "flush.ms":
            return self.flush_interval_ms
        fallback = TOPIC[name].fallback
        if fallback is None:  # a Kafka topic setting without a broker default (kafka_inert_settings.py)
            return TOPIC[name].default
        return self.values[fallback]

    def topic_config(self, topic_overrides: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Every topic setting's effective typed value: the override if given, else the broker's value."""
        parsed = parse_topic_configs(topic_overrides or {})
        return {s.name: parsed[s.name] if s.name in parsed else self.topic_default(s.name)
                for s in TOPIC_SETTINGS}

    def log_config(self, topic_overrides: Mapping[str, str] | None = None) -> LogConfig:
        """Build the storage layer's LogConfig for a topic with these overrides (raises ConfigError)."""
        from moldau.storage.config import LogConfig

        effective = self.topic_config(topic_overrides)
        fields = {field: effective[name] for field, name in LOG_CONFIG_FIELDS.items()}
        return LogConfig(cleanup_policy=",".join(effective["cleanup.policy"]), **fields)

    def describe_broker(self) -> list[ConfigEntry]:
        out = []
        for s in BROKER_SETTINGS:
            source = SOURCE_STATIC_BROKER if s.name in self.originals else SOURCE_DEFAULT
            secret = s.type == "password"
            out.append(ConfigEntry(s.name, None if secret else s.format(self.values[s.name]), source, secret,
                                   CONFIG_TYPE_CODES[s.type], s.doc))
        return out

    def describe_topic(self, topic_overrides: Mapping[str, str] | None = None) -> list[ConfigEntry]:
        overrides = topic_overrides or {}
        effective = self.topic_config(overrides)
        out = []
        for s in TOPIC_SETTINGS:
            if s.name in overrides:
                source = SOURCE_TOPIC
            elif s.fallback in self.originals:
                source = SOURCE_STATIC_BROKER
            else:
                source = SOURCE_DEFAULT
            out.append(ConfigEntry(s.name, s.format(effective[s.name]), source, False,
                                   CONFIG_TYPE_CODES[s.type], s.doc))
        return out


def parse_topic_configs(configs: Mapping[str, str | None]) -> dict[str, Any]:
    """Parse and validate topic-level overrides; unknown names and bad values raise ConfigError naming the
    key. A None value (an AlterConfigs "delete") is skipped."""
    out: dict[str, Any] = {}
    for key, raw in configs.items():
        setting = TOPIC.get(key)
        if setting is None:
            raise ConfigError(key, "unknown topic configuration", has_value=False)
        if raw is not None:
            out[key] = setting.parse(raw)
    return out


def validate_topic_configs(configs: Mapping[str, str | None]) -> None:
    """Raise ConfigError (naming the key in its message and `.key`) if a topic override is bad or unknown."""
    parse_topic_configs(configs)


# --- docs


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def _default_text(s: Setting) -> str:
    value = s.format(s.default)
    return "null" if value is None else ('""' if value == "" else _md(value))


def render_markdown() -> str:
    """docs/configuration.md, generated from the declarations."""
    lines = [
        "# Moldau configuration",
        "",
        "<!-- Generated by `python -m moldau.broker.config --markdown` from broker/config.py; do not edit. -->",
        "",
        "Settings use Kafka's names, types and defaults. Put them in a Java `.properties` file passed to",
        "`moldau-server`, or override one with `--override key=value` (overrides win over the file).",
        "Unknown keys are logged and ignored. Lists are comma-separated; `null` means not set.",
        "Every Kafka 3.9 broker and topic setting is known: the ones Moldau does not implement (Kerberos, KRaft,",
        "tiered storage, quotas, ...) are accepted from files and AlterConfigs (where Kafka allows a dynamic",
        "update), type-checked and described, and listed below as having no effect.",
        "",
        "## Broker settings",
        "",
        "| Name | Type | Default | Valid values | Importance | Description |",
        "|---|---|---|---|---|---|",
    ]
    for s in BROKER_SETTINGS:
        valid = _md(s.validator.describe()) if s.validator else ""
        cells = [f"`{s.name}`", s.type, _default_text(s), valid, s.importance, _md(s.doc)]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Topic settings",
        "",
        "Set per topic with CreateTopics or AlterConfigs. A topic without an override takes the value of the",
        "broker setting in the *Broker setting* column; the *Default* column is that setting's own default.",
        "",
        "| Name | Type | Default | Valid values | Broker setting | Description |",
        "|---|---|---|---|---|---|",
    ]
    for s in TOPIC_SETTINGS:
        valid = _md(s.validator.describe()) if s.validator else ""
        cells = [f"`{s.name}`", s.type, _default_text(s), valid, f"`{s.fallback}`" if s.fallback else "",
                 _md(s.doc)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args != ["--markdown"]:
        sys.stderr.write("usage: python -m moldau.broker.config --markdown\n")
        return 2
    sys.stdout.write(render_markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
