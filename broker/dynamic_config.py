"""Dynamic configuration: the broker's current config (static file + dynamic overrides) and config descriptions.

Kafka keeps dynamic broker configs in ZooKeeper under ``/config/brokers/<default>`` (cluster-wide) and
``/config/brokers/<id>`` (one broker); per-broker beats default beats the static file. ``DynamicBrokerConfig``
holds the three layers and the effective ``BrokerConfig`` built from them; components that used to copy a value
at start read ``current`` (or register a listener that is called after every change).

The describe functions build DescribeConfigs entries with Kafka's sources and synonyms: a topic setting's
synonyms are the topic override and then its broker fallback at each broker layer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from moldau.broker.config import (
    CONFIG_TYPE_CODES,
    SETTINGS,
    TOPIC,
    TOPIC_SETTINGS,
    BrokerConfig,
    ConfigError,
    Setting,
    parse_topic_configs,
)
from moldau.broker.kafka_inert_settings import DYNAMIC_NAMES as INERT_DYNAMIC_NAMES

log = logging.getLogger("moldau.dynamic_config")

DEFAULT_ENTITY = "<default>"  # Kafka's ZooKeeper name of the cluster-wide broker entity

# DescribeConfigs config sources.
DYNAMIC_TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

# Broker settings Kafka lets change without a restart (DynamicBrokerConfig): the defaults of the topic settings
# (DynamicLogConfig) and the log cleaner's settings, as far as Moldau declares them.
DYNAMIC_BROKER_KEYS: frozenset[str] = frozenset(
    ({s.fallback for s in TOPIC_SETTINGS if s.fallback}
     | {"log.retention.minutes", "log.retention.hours", "log.roll.hours", "log.roll.jitter.hours",
        "log.cleaner.threads", "log.cleaner.backoff.ms", "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.max.bytes.per.second", "leader.replication.throttled.rate",
        "follower.replication.throttled.rate"} | INERT_DYNAMIC_NAMES) & set(SETTINGS))


@dataclass(frozen=True, slots=True)
class Described:
    """One DescribeConfigs entry before it is shaped for a version."""

    name: str
    value: str | None
    source: int
    read_only: bool
    sensitive: bool
    type_code: int
    doc: str
    synonyms: list[tuple[str, str | None, int]] = field(default_factory=list)


def validate_broker_configs(configs: Mapping[str, str]) -> None:
    """Raise ConfigError naming the key if a dynamic broker config is unknown, not dynamic or malformed."""
    for key, raw in configs.items():
        setting = SETTINGS.get(key)
        if setting is None:
            raise ConfigError(key, "unknown broker configuration", has_value=False)
        if key not in DYNAMIC_BROKER_KEYS:
            raise ConfigError(key, "cannot be updated dynamically (restart the broker with a new "
                              "server.properties)", has_value=False)
        setting.parse(raw)


class DynamicBrokerConfig:
    """The static config plus the dynamic default and per-broker layers; ``current`` is the effective config."""

    def __init__(self, static: BrokerConfig, broker_id: int) -> None:
        self.static = static
        self.broker_id = broker_id
        self.default: dict[str, str] = {}
        self.per_broker: dict[str, str] = {}
        self.current = static
        self.listeners: list[Callable[[BrokerConfig], None]] = []

    def get(self, name: str) -> Any:
        return self.current.get(name)

    def log_config(self, topic_overrides: Mapping[str, str] | None = None) -> Any:
        return self.current.log_config(topic_overrides)

    def update(self, default: Mapping[str, str] | None = None, per_broker: Mapping[str, str] | None = None) -> bool:
        """Replace the given layers; a layer that would make the config invalid is refused (logged, kept)."""
        new_default = dict(self.default if default is None else default)
        new_broker = dict(self.per_broker if per_broker is None else per_broker)
        usable = {}
        for layer in (new_default, new_broker):
            for key, value in layer.items():
                if key in DYNAMIC_BROKER_KEYS:
                    usable[key] = value
                else:
                    log.warning("ignoring dynamic broker config %s: not dynamically updatable", key)
        try:
            merged = BrokerConfig({**self.static.originals, **usable})
        except ConfigError as exc:
            log.error("ignoring a dynamic broker config update: %s", exc)
            return False
        self.default, self.per_broker, self.current = new_default, new_broker, merged
        for listener in self.listeners:
            try:
                listener(merged)
            except Exception:
                log.exception("a dynamic config listener failed")
        return True

    # --- describe

    def _broker_layers(self, name: str) -> list[tuple[str, str | None, int]]:
        """(name, value, source) of a broker setting at every layer where it is set, strongest first, ending
        with the declared default."""
        setting = SETTINGS[name]
        out: list[tuple[str, str | None, int]] = []
        secret = setting.type == "password"
        for layer, source in ((self.per_broker, DYNAMIC_BROKER_CONFIG), (self.default, DYNAMIC_DEFAULT_BROKER_CONFIG),
                              (self.static.originals, STATIC_BROKER_CONFIG)):
            if name in layer:
                out.append((name, None if secret else layer[name], source))
        if setting.default is not None or not out:
            out.append((name, None if secret else setting.format(setting.default), DEFAULT_CONFIG))
        return out

    def describe_broker(self) -> list[Described]:
        out = []
        for s in SETTINGS.values():
            layers = self._broker_layers(s.name)
            secret = s.type == "password"
            value = None if secret else s.format(self.current.get(s.name))
            out.append(Described(s.name, value, layers[0][2], s.name not in DYNAMIC_BROKER_KEYS, secret,
                                 CONFIG_TYPE_CODES[s.type], s.doc, layers))
        return out

    def describe_broker_default(self, default: Mapping[str, str] | None = None) -> list[Described]:
        """The cluster-wide dynamic broker configs (resource name ""), as stored (``default``) or as applied."""
        out = []
        for key, value in sorted((self.default if default is None else default).items()):
            s = SETTINGS.get(key)
            if s is None:
                continue
            secret = s.type == "password"
            shown = None if secret else value
            out.append(Described(key, shown, DYNAMIC_DEFAULT_BROKER_CONFIG, False, secret, CONFIG_TYPE_CODES[s.type],
                                 s.doc, [(key, shown, DYNAMIC_DEFAULT_BROKER_CONFIG)]))
        return out

    def describe_topic(self, overrides: Mapping[str, str]) -> list[Described]:
        effective = self.current.topic_config(overrides)
        out = []
        for s in TOPIC_SETTINGS:
            synonyms: list[tuple[str, str | None, int]] = []
            if s.name in overrides:
                synonyms.append((s.name, overrides[s.name], DYNAMIC_TOPIC_CONFIG))
            synonyms += self._topic_fallback_layers(s)
            out.append(Described(s.name, s.format(effective[s.name]), synonyms[0][2], False, False,
                                 CONFIG_TYPE_CODES[s.type], s.doc, synonyms))
        return out

    def _topic_fallback_layers(self, s: Setting) -> list[tuple[str, str | None, int]]:
        if s.fallback is None:  # no broker setting behind it (replication throttle lists, kafka_inert_settings.py)
            return [(s.name, s.format(s.default), DEFAULT_CONFIG)]
        names = [s.fallback]
        # retention.ms and segment.ms fall back through several broker keys (ms, then minutes/hours).
        names += {"retention.ms": ["log.retention.minutes", "log.retention.hours"],
                  "segment.ms": ["log.roll.hours"], "segment.jitter.ms": ["log.roll.jitter.hours"]}.get(s.name, [])
        layers: list[tuple[str, str | None, int]] = []
        for name in names:
            found = self._broker_layers(name)
            layers += [x for x in found if x[2] != DEFAULT_CONFIG]
        last = self._broker_layers(names[-1])[-1]
        if last[2] == DEFAULT_CONFIG:
            layers.append(last)
        if not layers:  # a fallback without a declared default (null): the topic setting's own default
            layers.append((s.fallback, s.format(s.default), DEFAULT_CONFIG))
        layers.sort(key=lambda x: x[2])
        return layers


def apply_incremental(current: Mapping[str, str], ops: list[tuple[str, int, str | None]],
                      lookup: Callable[[str], Setting | None],
                      default_value: Callable[[str], str | None]) -> dict[str, str]:
    """IncrementalAlterConfigs on a set of overrides: SET(0), DELETE(1), APPEND(2), SUBTRACT(3); the last two only
    for list settings, starting from the current effective value. Raises ConfigError naming the key."""
    out = dict(current)
    for name, op, value in ops:
        setting = lookup(name)
        if setting is None:
            raise ConfigError(name, "unknown configuration", has_value=False)
        if op == 0:
            if value is None:
                raise ConfigError(name, "a SET needs a value", has_value=False)
            out[name] = value
        elif op == 1:
            out.pop(name, None)
        elif op in (2, 3):
            if setting.type != "list":
                verb = "append" if op == 2 else "subtract"
                raise ConfigError(name, f"Config value {verb} is not allowed for config key: {name}",
                                  has_value=False)
            base = out.get(name, default_value(name))
            items = [x.strip() for x in (base or "").split(",") if x.strip()]
            given = [x.strip() for x in (value or "").split(",") if x.strip()]
            if op == 2:
                items += [x for x in given if x not in items]
            else:
                items = [x for x in items if x not in given]
            out[name] = ",".join(items)
        else:
            raise ValueError(f"unknown config operation {op} for {name}")
    return out


def topic_setting(name: str) -> Setting | None:
    return TOPIC.get(name)


def broker_setting(name: str) -> Setting | None:
    return SETTINGS.get(name)


def validate_topic_overrides(configs: Mapping[str, str]) -> None:
    parse_topic_configs(configs)
