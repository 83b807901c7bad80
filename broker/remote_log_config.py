"""Kafka's refusal rules for tiered topic settings (LogConfig.validate in Kafka 3.9), checked on CreateTopics and
on (Incremental)AlterConfigs of a topic, where the broker's settings and the topic's previous overrides are known.
"""

from __future__ import annotations

from collections.abc import Mapping

from moldau.broker.config import BrokerConfig, ConfigError

INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state", "__remote_log_metadata")


def validate_remote_storage(broker: BrokerConfig, topic: str, overrides: Mapping[str, str | None],
                            previous: Mapping[str, str] | None = None) -> None:
    """Raises ConfigError (naming the key) when the topic's effective settings break a tiered-storage rule:
    remote storage needs the broker's remote.log.storage.system.enable, cannot be combined with compaction,
    cannot be turned off again, and local retention must not exceed the total retention."""
    effective = broker.topic_config({k: v for k, v in overrides.items() if v is not None})
    remote = bool(effective["remote.storage.enable"])
    if previous is not None and not remote:
        was = broker.topic_config(previous)["remote.storage.enable"]
        if was:
            raise ConfigError("remote.storage.enable", "Disabling remote storage feature on the topic level is "
                              "not supported.", "false")
    if not remote:
        return
    if not broker.get("remote.log.storage.system.enable"):
        raise ConfigError("remote.storage.enable", "Tiered Storage functionality is disabled in the broker. "
                          "Topic cannot be configured with remote log storage.", "true")
    if topic in INTERNAL_TOPICS:
        raise ConfigError("remote.storage.enable", f"Internal topic {topic} cannot use remote storage.", "true")
    if "compact" in effective["cleanup.policy"]:
        raise ConfigError("cleanup.policy", "Remote log storage is unsupported for the compacted topics",
                          effective["cleanup.policy"])
    for total_key, local_key in (("retention.bytes", "local.retention.bytes"), ("retention.ms", "local.retention.ms")):
        total, local = effective[total_key], effective[local_key]
        if total > -1 and local != -2:
            if local == -1:
                raise ConfigError(local_key, f"Value must not be -1 as {total_key} value is set as {total}.",
                                  local)
            if local > total:
                raise ConfigError(local_key, f"Value must not be more than {total_key} property value: {total}",
                                  local)
