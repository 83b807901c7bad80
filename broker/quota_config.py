"""Client quota configs: entities, their ZooKeeper names, validation and Kafka's precedence order. No I/O.

Kafka keeps client quotas as entity configs in ZooKeeper (KIP-55): ``/config/users/<user>``,
``/config/clients/<client-id>``, ``/config/users/<user>/clients/<client-id>`` and ``/config/ips/<ip>``, with
``<default>`` standing for an entity type's default; names are sanitized (URL-encoded) as Kafka's ``Sanitizer``
does. A change notification names the entity path (``users/alice/clients/app``). The standalone broker keeps
the same paths in its metadata file.

The quota of a (user, client-id) pair is the first entity in Kafka's precedence order that sets the key
(DefaultQuotaCallback), and the matched entity decides which clients share one rate: a ``users/alice`` quota is
shared by every client id of alice, a ``clients/<default>`` quota applies to each client id on its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import quote, unquote

USER, CLIENT_ID, IP = "user", "client-id", "ip"
DEFAULT = "<default>"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

# Key -> (entity types it applies to, integral value); Kafka's QuotaConfigs.
CLIENT_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE, CONTROLLER_MUTATION_RATE)
INTEGRAL_KEYS = frozenset({PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, CONNECTION_CREATION_RATE})

# ZooKeeper entity types of quota configs (under /config).
ZK_ENTITY_TYPES = ("users", "clients", "ips")


class QuotaError(Exception):
    """An invalid entity or quota op; ``invalid_config`` selects INVALID_CONFIG over INVALID_REQUEST."""

    def __init__(self, message: str, invalid_config: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.invalid_config = invalid_config


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize: URL-encoding, with '*' encoded too (and ' ' as %20, never '+')."""
    return quote(name, safe="").replace("*", "%2A")


def desanitize(name: str) -> str:
    return unquote(name)


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    """One quota entity: each part is None (not part of it), DEFAULT, or a name."""

    user: str | None = None
    client_id: str | None = None
    ip: str | None = None

    @classmethod
    def from_components(cls, components: Iterable[tuple[str, str | None]]) -> QuotaEntity:
        """From the protocol's (entity_type, entity_name) pairs, a null name meaning the default."""
        seen: dict[str, str] = {}
        for etype, name in components:
            if etype not in (USER, CLIENT_ID, IP):
                raise QuotaError(f"Unexpected entity type: {etype}")
            if etype in seen:
                raise QuotaError(f"Duplicate entity type: {etype}")
            if name == "":
                raise QuotaError(f"Empty {etype} name; use a null name for the default")
            seen[etype] = DEFAULT if name is None else name
        entity = cls(seen.get(USER), seen.get(CLIENT_ID), seen.get(IP))
        if not seen:
            raise QuotaError("Invalid empty client quota entity")
        if entity.ip is not None and (entity.user is not None or entity.client_id is not None):
            raise QuotaError("Invalid quota entity combination: ip cannot be combined with user or client-id")
        return entity

    def components(self) -> list[tuple[str, str | None]]:
        out: list[tuple[str, str | None]] = []
        for etype, name in ((USER, self.user), (CLIENT_ID, self.client_id), (IP, self.ip)):
            if name is not None:
                out.append((etype, None if name == DEFAULT else name))
        return out

    def zk_entity(self) -> tuple[str, str]:
        """(entity type, name) under /config, e.g. ("users", "alice/clients/app")."""
        if self.ip is not None:
            return "ips", self._zk_name(self.ip)
        if self.user is not None and self.client_id is not None:
            return "users", f"{self._zk_name(self.user)}/clients/{self._zk_name(self.client_id)}"
        if self.user is not None:
            return "users", self._zk_name(self.user)
        assert self.client_id is not None
        return "clients", self._zk_name(self.client_id)

    @staticmethod
    def _zk_name(name: str) -> str:
        return name if name == DEFAULT else sanitize(name)

    @classmethod
    def from_zk(cls, entity_type: str, name: str) -> QuotaEntity | None:
        """The inverse of zk_entity; None for a path that is no quota entity."""
        def part(raw: str) -> str:
            return raw if raw == DEFAULT else desanitize(raw)

        if entity_type == "ips" and name and "/" not in name:
            return cls(ip=part(name))
        if entity_type == "clients" and name and "/" not in name:
            return cls(client_id=part(name))
        if entity_type == "users" and name:
            user, sep, rest = name.partition("/clients/")
            if not sep:
                return cls(user=part(user)) if "/" not in user else None
            if user and rest and "/" not in rest:
                return cls(user=part(user), client_id=part(rest))
        return None


def validate_ops(entity: QuotaEntity, ops: Iterable[tuple[str, float | None]]) -> None:
    """Raise QuotaError for a key that does not apply to the entity or a bad value (None = remove)."""
    allowed = (CONNECTION_CREATION_RATE,) if entity.ip is not None else CLIENT_KEYS
    for key, value in ops:
        if key not in allowed:
            raise QuotaError(f"Invalid configuration key {key}" if key not in CLIENT_KEYS + (CONNECTION_CREATION_RATE,)
                             else f"Configuration key {key} does not apply to this entity")
        if value is None:
            continue
        if value <= 0:
            raise QuotaError(f"Invalid value {value} for {key}: it must be positive", invalid_config=True)
        if key in INTEGRAL_KEYS and value != int(value):
            raise QuotaError(f"Invalid value {value} for {key}: it must be an integer", invalid_config=True)


def format_value(key: str, value: float) -> str:
    """The text stored in ZooKeeper: integral keys as integers (Kafka stores "1048576")."""
    return str(int(value)) if key in INTEGRAL_KEYS else repr(float(value))


def parse_values(configs: Mapping[str, str]) -> dict[str, float]:
    """The numeric quotas of an entity's stored config; unparsable or unknown entries are dropped."""
    out: dict[str, float] = {}
    for key, text in configs.items():
        if key in CLIENT_KEYS or key == CONNECTION_CREATION_RATE:
            try:
                out[key] = float(text)
            except ValueError:
                continue
    return out


@dataclass(frozen=True, slots=True)
class Resolved:
    """A client's quota for one key and the (user, client-id) tags of the rate it is measured with."""

    bound: float
    user_tag: str
    client_tag: str


@dataclass(slots=True)
class QuotaConfigs:
    """Every quota entity's values; ``version`` moves on each change so resolutions can be cached."""

    entries: dict[QuotaEntity, dict[str, float]] = field(default_factory=dict)
    version: int = 0

    def set(self, entity: QuotaEntity, values: Mapping[str, float]) -> None:
        if values:
            self.entries[entity] = dict(values)
        else:
            self.entries.pop(entity, None)
        self.version += 1

    def replace_all(self, entries: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        self.entries = {e: dict(v) for e, v in entries.items() if v}
        self.version += 1

    def has(self, key: str) -> bool:
        return any(key in v for v in self.entries.values())

    def resolve(self, key: str, user: str, client_id: str) -> Resolved | None:
        """Kafka's precedence order, most specific first; None when no entity sets the key."""
        e = self.entries
        for u, c, tags in (
            (user, client_id, (user, client_id)),
            (user, DEFAULT, (user, client_id)),
            (user, None, (user, "")),
            (DEFAULT, client_id, (user, client_id)),
            (DEFAULT, DEFAULT, (user, client_id)),
            (DEFAULT, None, (user, "")),
            (None, client_id, ("", client_id)),
            (None, DEFAULT, ("", client_id)),
        ):
            values = e.get(QuotaEntity(u, c))
            if values is not None and key in values:
                return Resolved(values[key], *tags)
        return None

    def ip_quota(self, ip: str) -> float | None:
        for name in (ip, DEFAULT):
            values = self.entries.get(QuotaEntity(ip=name))
            if values is not None and CONNECTION_CREATION_RATE in values:
                return values[CONNECTION_CREATION_RATE]
        return None
