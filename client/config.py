"""Client settings by Kafka's names, shared by the producer, consumer and admin client.

Settings are accepted as a dict of Kafka names (``{"bootstrap.servers": "h:9092", "linger.ms": 5}``) and as
Pythonic keyword arguments (``bootstrap_servers="h:9092", linger_ms=5``); both spellings name the same key.
Values may be strings (as read from a properties file or a CLI ``--property``) or Python values; each is
converted to the key's type and checked, and any problem raises :class:`ConfigError` naming the key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from moldau.errors import ConfigError

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One setting: Kafka's name, value type (int, float, bool, str, list), default and allowed values."""

    name: str
    type: type
    default: Any
    choices: tuple[Any, ...] | None = None
    minimum: int | None = None
    maximum: int | None = None
    nullable: bool = False


def _k(name: str, typ: type, default: Any, **kw: Any) -> tuple[str, ConfigKey]:
    return name, ConfigKey(name, typ, default, **kw)


COMMON_KEYS: dict[str, ConfigKey] = dict([
    _k("bootstrap.servers", list, None),
    _k("client.id", str, "moldau"),
    _k("request.timeout.ms", int, 30000, minimum=0),
    _k("metadata.max.age.ms", int, 300000, minimum=0),
    _k("reconnect.backoff.ms", int, 50, minimum=0),
    _k("reconnect.backoff.max.ms", int, 1000, minimum=0),
    _k("retry.backoff.ms", int, 100, minimum=0),
    _k("socket.connection.setup.timeout.ms", int, 10000, minimum=0),
    _k("connections.max.idle.ms", int, 540000, minimum=-1),
    _k("allow.auto.create.topics", bool, True),
    _k("security.protocol", str, "PLAINTEXT", choices=("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")),
    _k("sasl.mechanism", str, "GSSAPI"),
    _k("sasl.username", str, None, nullable=True),
    _k("sasl.password", str, None, nullable=True),
    _k("ssl.ca.location", str, None, nullable=True),
    _k("ssl.certificate.location", str, None, nullable=True),
    _k("ssl.key.location", str, None, nullable=True),
    _k("ssl.key.password", str, None, nullable=True),
    _k("ssl.endpoint.identification.algorithm", str, "https", choices=("https", "none")),
    _k("client.dns.lookup", str, "use_all_dns_ips"),
])

PRODUCER_KEYS: dict[str, ConfigKey] = {**COMMON_KEYS, **dict([
    _k("acks", str, "all", choices=("all", "-1", "0", "1")),
    _k("linger.ms", int, 5, minimum=0),
    _k("batch.size", int, 16384, minimum=0),
    _k("compression.type", str, "none", choices=("none", "gzip", "snappy", "lz4", "zstd")),
    _k("enable.idempotence", bool, True),
    _k("max.in.flight.requests.per.connection", int, 5, minimum=1),
    _k("retries", int, 2147483647, minimum=0),
    _k("delivery.timeout.ms", int, 120000, minimum=0),
    _k("buffer.memory", int, 33554432, minimum=0),
    _k("max.block.ms", int, 60000, minimum=0),
    _k("max.request.size", int, 1048576, minimum=1),
    _k("partitioner", str, "murmur2_random",
       choices=("murmur2_random", "murmur2", "consistent_random", "random", "default")),
    _k("partitioner.ignore.keys", bool, False),
    _k("key.serializer", object, None, nullable=True),
    _k("value.serializer", object, None, nullable=True),
    _k("transactional.id", str, None, nullable=True),
    _k("transaction.timeout.ms", int, 60000, minimum=1),
])}

CONSUMER_KEYS: dict[str, ConfigKey] = {**COMMON_KEYS, **dict([
    _k("group.id", str, None, nullable=True),
    _k("group.instance.id", str, None, nullable=True),
    # KIP-848: "consumer" lets the broker assign (ConsumerGroupHeartbeat); "classic" is JoinGroup/SyncGroup.
    _k("group.protocol", str, "classic", choices=("classic", "consumer")),
    _k("group.remote.assignor", str, None, nullable=True),
    _k("client.rack", str, None, nullable=True),
    _k("enable.auto.commit", bool, True),
    _k("auto.commit.interval.ms", int, 5000, minimum=0),
    _k("auto.offset.reset", str, "latest", choices=("earliest", "latest", "none")),
    _k("session.timeout.ms", int, 45000, minimum=1),
    _k("heartbeat.interval.ms", int, 3000, minimum=1),
    _k("max.poll.interval.ms", int, 300000, minimum=1),
    _k("partition.assignment.strategy", list, ["range", "cooperative-sticky"]),
    _k("fetch.min.bytes", int, 1, minimum=0),
    _k("fetch.max.wait.ms", int, 500, minimum=0),
    _k("fetch.max.bytes", int, 52428800, minimum=0),
    _k("max.partition.fetch.bytes", int, 1048576, minimum=0),
    _k("max.poll.records", int, 500, minimum=1),
    _k("default.api.timeout.ms", int, 60000, minimum=0),
    _k("check.crcs", bool, True),
    _k("isolation.level", str, "read_uncommitted", choices=("read_uncommitted", "read_committed")),
    _k("exclude.internal.topics", bool, True),
    _k("key.deserializer", object, None, nullable=True),
    _k("value.deserializer", object, None, nullable=True),
])}

ADMIN_KEYS: dict[str, ConfigKey] = dict(COMMON_KEYS)


_ALIASES = {"sasl.mechanisms": "sasl.mechanism"}  # librdkafka accepts both spellings


def kafka_name(key: str) -> str:
    """``linger_ms`` -> ``linger.ms`` (Kafka names pass through unchanged)."""
    name = key.replace("_", ".")
    return _ALIASES.get(name, name)


def _convert(spec: ConfigKey, value: Any) -> Any:
    if value is None:
        if spec.nullable or spec.default is None:
            return None
        raise ConfigError(spec.name, "must not be null")
    if spec.type is object:
        return value
    if spec.type is bool:
        value = _to_bool(spec, value)
    elif spec.type is int:
        value = _to_int(spec, value)
    elif spec.type is list:
        value = _to_list(spec, value)
    elif spec.type is str:
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)  # acks=1 / acks=-1 as numbers
        if not isinstance(value, str):
            raise ConfigError(spec.name, f"expected a string, got {value!r}")
    if spec.choices is not None and value not in spec.choices:
        raise ConfigError(spec.name, f"invalid value {value!r}; expected one of {', '.join(map(str, spec.choices))}")
    return value


def _to_bool(spec: ConfigKey, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ConfigError(spec.name, f"expected true or false, got {value!r}")


def _to_int(spec: ConfigKey, value: Any) -> int:
    if isinstance(value, bool):
        raise ConfigError(spec.name, f"expected an integer, got {value!r}")
    try:
        number = int(value.strip()) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        raise ConfigError(spec.name, f"expected an integer, got {value!r}") from None
    if isinstance(value, float) and value != number:
        raise ConfigError(spec.name, f"expected an integer, got {value!r}")
    if spec.minimum is not None and number < spec.minimum:
        raise ConfigError(spec.name, f"{number} is below the minimum {spec.minimum}")
    if spec.maximum is not None and number > spec.maximum:
        raise ConfigError(spec.name, f"{number} is above the maximum {spec.maximum}")
    return number


def _to_list(spec: ConfigKey, value: Any) -> list[str]:
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",")]
    elif isinstance(value, Iterable):
        items = [str(v).strip() for v in value]
    else:
        raise ConfigError(spec.name, f"expected a comma-separated list, got {value!r}")
    return [v for v in items if v]


def parse_host_port(text: str, key: str = "bootstrap.servers") -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` too) -> (host, port); a missing port is an error naming ``key``."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host:
        raise ConfigError(key, f"{text!r} is not host:port")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        number = int(port)
    except ValueError:
        raise ConfigError(key, f"{text!r}: port {port!r} is not a number") from None
    if not 0 < number < 65536:
        raise ConfigError(key, f"{text!r}: port {number} is out of range")
    return host, number


class ClientConfig:
    """Validated settings; read with ``config["linger.ms"]`` or ``config.get("linger_ms")``."""

    def __init__(self, values: Mapping[str, Any] | None = None, *,
                 keys: Mapping[str, ConfigKey] = COMMON_KEYS, require_bootstrap: bool = True,
                 **kwargs: Any) -> None:
        self.keys = keys
        merged: dict[str, Any] = {}
        for source in (values or {}, kwargs):
            for raw_key, value in source.items():
                name = raw_key if raw_key in keys else kafka_name(raw_key)
                if name not in keys:
                    raise ConfigError(raw_key, "unknown configuration key")
                merged[name] = value
        self._values = {name: _convert(spec, merged.get(name, spec.default)) for name, spec in keys.items()}
        self.explicit = frozenset(merged)  # what the user set, for defaults that depend on other keys
        if require_bootstrap and not self._values.get("bootstrap.servers"):
            raise ConfigError("bootstrap.servers", "is required (host:port[,host:port...])")
        self.bootstrap_servers = [parse_host_port(s) for s in self._values.get("bootstrap.servers") or []]
        self._check_relations()

    def _check_relations(self) -> None:
        v = self._values
        if "security.protocol" in v:
            from moldau.security import security_from_config

            self.security = security_from_config(v)
        if "reconnect.backoff.max.ms" in v and v["reconnect.backoff.max.ms"] < v["reconnect.backoff.ms"]:
            v["reconnect.backoff.max.ms"] = v["reconnect.backoff.ms"]  # Kafka: max is raised to the base

    def __getitem__(self, key: str) -> Any:
        name = key if key in self._values else kafka_name(key)
        return self._values[name]

    def get(self, key: str, default: Any = None) -> Any:
        name = key if key in self._values else kafka_name(key)
        return self._values.get(name, default)

    def set(self, key: str, value: Any) -> None:
        """Sets one key after construction (validated like the constructor does)."""
        name = key if key in self.keys else kafka_name(key)
        if name not in self.keys:
            raise ConfigError(key, "unknown configuration key")
        self._values[name] = _convert(self.keys[name], value)

    def as_dict(self) -> dict[str, Any]:
        return dict(self._values)

    def __repr__(self) -> str:
        return f"ClientConfig({self._values!r})"


def producer_config(values: Mapping[str, Any] | None = None, **kwargs: Any) -> ClientConfig:
    return ClientConfig(values, keys=PRODUCER_KEYS, **kwargs)


def consumer_config(values: Mapping[str, Any] | None = None, **kwargs: Any) -> ClientConfig:
    return ClientConfig(values, keys=CONSUMER_KEYS, **kwargs)


def admin_config(values: Mapping[str, Any] | None = None, **kwargs: Any) -> ClientConfig:
    return ClientConfig(values, keys=ADMIN_KEYS, **kwargs)

