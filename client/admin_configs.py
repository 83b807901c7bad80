"""The AdminClient's config methods: describe_configs, alter_configs, incremental_alter_configs.

Resources are ``ConfigResource("topic", name)`` or ``ConfigResource("broker", "1")`` (``"broker", ""`` is the
cluster-wide broker default). A broker resource goes to that broker (only it knows its static config); the rest go
to any broker, which writes ZooKeeper and notifies every broker, as in Kafka's ZooKeeper mode.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from moldau.cluster import Cluster
from moldau.connection import BrokerConnection
from moldau.errors import KafkaError
from moldau.protocol.messages.configs import ALTER_CONFIGS, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS
from moldau.protocol.schema import P, Sendable

if TYPE_CHECKING:  # the message shapes are for mypy only: zero cost at run time
    from moldau.protocol.typed import (
        AlterConfigsRequest,
        AlterConfigsResponse,
        DescribeConfigsResponseResultsConfigs,
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResponse,
    )

RESOURCE_TYPES = {"topic": 2, "broker": 4, "broker_logger": 8}
SOURCES = {1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
           4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG", -1: "UNKNOWN"}
OPERATIONS = {"SET": 0, "DELETE": 1, "APPEND": 2, "SUBTRACT": 3}


@dataclass(frozen=True, slots=True)
class ConfigResource:
    type: str  # "topic" | "broker" | "broker_logger"
    name: str

    def __post_init__(self) -> None:
        if self.type not in RESOURCE_TYPES:
            raise ValueError(f"unknown config resource type {self.type!r}; expected one of {sorted(RESOURCE_TYPES)}")


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: str


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: str  # one of SOURCES' names
    is_sensitive: bool = False
    read_only: bool = False
    synonyms: list[ConfigSynonym] = field(default_factory=list)
    documentation: str | None = None

    @property
    def is_default(self) -> bool:
        return self.source == "DEFAULT_CONFIG"


@dataclass(frozen=True, slots=True)
class AlterConfigOp:
    name: str
    op: str = "SET"  # SET | DELETE | APPEND | SUBTRACT
    value: str | None = None

    def __post_init__(self) -> None:
        if self.op not in OPERATIONS:
            raise ValueError(f"unknown config operation {self.op!r} for {self.name}; expected one of "
                             f"{sorted(OPERATIONS)}")


def _entry(c: DescribeConfigsResponseResultsConfigs, version: int) -> ConfigEntry:
    source = SOURCES.get(c["config_source"], "UNKNOWN") if version >= 1 else (
        "DEFAULT_CONFIG" if c["is_default"] else "UNKNOWN")
    return ConfigEntry(c["name"], c["value"], source, bool(c["is_sensitive"]), bool(c["read_only"]),
                       [ConfigSynonym(s["name"], s["value"], SOURCES.get(s["source"], "UNKNOWN"))
                        for s in c["synonyms"]], c["documentation"])


class ConfigsAdmin:
    """Mixed into ``AdminClient`` (client/admin.py), which provides ``_cluster``."""

    _cluster: Cluster

    async def _config_conn(self, resource: ConfigResource) -> BrokerConnection:
        if resource.type in ("broker", "broker_logger") and resource.name.isdigit():
            if int(resource.name) not in self._cluster.brokers:
                await self._cluster.refresh_metadata(None, allow_auto_create=False)
            return await self._cluster.connection(int(resource.name))
        return await self._cluster.any_connection()

    async def describe_configs(self, resources: Iterable[ConfigResource], *, keys: Iterable[str] | None = None,
                               include_synonyms: bool = True, include_documentation: bool = False,
                               raise_errors: bool = True) -> dict[ConfigResource, list[ConfigEntry] | KafkaError]:
        """Each resource's configs (only ``keys`` if given); a KafkaError for a failed resource."""
        wanted = None if keys is None else list(keys)
        out: dict[ConfigResource, list[ConfigEntry] | KafkaError] = {}
        for resource in resources:
            conn = await self._config_conn(resource)
            version = conn.version_for(DESCRIBE_CONFIGS)
            response = await conn.send(DESCRIBE_CONFIGS, {
                "resources": [{"resource_type": RESOURCE_TYPES[resource.type], "resource_name": resource.name,
                               "configuration_keys": wanted}],
                "include_synonyms": include_synonyms, "include_documentation": include_documentation})
            result = response["results"][0]
            if result["error_code"]:
                error = KafkaError(result["error_code"], result["error_message"])
                if raise_errors:
                    raise error
                out[resource] = error
            else:
                out[resource] = [_entry(c, version) for c in result["configs"]]
        return out

    async def alter_configs(self, configs: Mapping[ConfigResource, Mapping[str, str]], *, validate_only: bool = False,
                            raise_errors: bool = True) -> dict[ConfigResource, KafkaError | None]:
        """Replace each resource's whole set of dynamic overrides (AlterConfigs)."""
        out: dict[ConfigResource, KafkaError | None] = {}
        for resource, values in configs.items():
            body: AlterConfigsRequest = {
                "resources": [{"resource_type": RESOURCE_TYPES[resource.type], "resource_name": resource.name,
                               "configs": [{"name": k, "value": str(v)} for k, v in values.items()]}],
                "validate_only": validate_only}
            out[resource] = await self._send_alter(resource, raise_errors, ALTER_CONFIGS, body)
        return out

    async def incremental_alter_configs(self, ops: Mapping[ConfigResource, Iterable[AlterConfigOp]], *,
                                        validate_only: bool = False, raise_errors: bool = True
                                        ) -> dict[ConfigResource, KafkaError | None]:
        """SET / DELETE / APPEND / SUBTRACT single keys of each resource (IncrementalAlterConfigs)."""
        out: dict[ConfigResource, KafkaError | None] = {}
        for resource, resource_ops in ops.items():
            incremental: IncrementalAlterConfigsRequest = {
                "resources": [{"resource_type": RESOURCE_TYPES[resource.type], "resource_name": resource.name,
                               "configs": [{"name": o.name, "config_operation": OPERATIONS[o.op], "value": o.value}
                                           for o in resource_ops]}],
                "validate_only": validate_only}
            out[resource] = await self._send_alter(resource, raise_errors, INCREMENTAL_ALTER_CONFIGS, incremental)
        return out

    async def _send_alter(self, resource: ConfigResource, raise_errors: bool,
                          api: Sendable[P, AlterConfigsResponse | IncrementalAlterConfigsResponse],
                          *args: P.args, **kwargs: P.kwargs) -> KafkaError | None:
        """AlterConfigs or IncrementalAlterConfigs (their responses have the same shape) for one resource."""
        conn = await self._config_conn(resource)
        result = (await conn.send(api, *args, **kwargs))["responses"][0]
        if not result["error_code"]:
            return None
        error = KafkaError(result["error_code"], result["error_message"])
        if raise_errors:
            raise error
        return error
