"""Tiered-storage settings: broker and topic declarations, and Kafka's refusal rules."""

from __future__ import annotations

import pytest

from moldau.broker.config import BrokerConfig, ConfigError
from moldau.broker.remote_log_config import validate_remote_storage

TIERED = {"remote.log.storage.system.enable": "true", "remote.log.storage.manager.class.name": "filesystem",
          "rsm.config.dir": "/tmp/x"}


def test_broker_defaults_are_kafkas() -> None:
    cfg = BrokerConfig({})
    assert cfg.get("remote.log.storage.system.enable") is False
    assert cfg.get("remote.log.manager.task.interval.ms") == 30000
    assert cfg.get("remote.log.reader.threads") == 10
    assert cfg.get("remote.log.manager.copy.max.bytes.per.second") == 2**63 - 1
    assert cfg.get("remote.log.manager.fetch.max.bytes.per.second") == 2**63 - 1
    topic = cfg.topic_config({})
    assert topic["remote.storage.enable"] is False
    assert topic["local.retention.ms"] == -2 and topic["local.retention.bytes"] == -2
    log_cfg = cfg.log_config({"remote.storage.enable": "true", "retention.bytes": "1000",
                              "local.retention.bytes": "100"})
    assert log_cfg.remote_storage_enable and log_cfg.effective_local_retention_bytes == 100
    assert log_cfg.effective_local_retention_ms == log_cfg.retention_ms


def test_system_enable_needs_a_manager() -> None:
    with pytest.raises(ConfigError, match="remote.log.storage.manager.class.name"):
        BrokerConfig({"remote.log.storage.system.enable": "true"})
    BrokerConfig(TIERED)  # rsm.config.* keys are the manager's, not unknown


def test_broker_level_local_retention_is_the_topic_fallback() -> None:
    cfg = BrokerConfig({**TIERED, "log.local.retention.ms": "5000"})
    assert cfg.topic_config({})["local.retention.ms"] == 5000


@pytest.mark.parametrize(("broker", "overrides", "previous", "key", "message"), [
    ({}, {"remote.storage.enable": "true"}, None, "remote.storage.enable", "disabled in the broker"),
    (TIERED, {"remote.storage.enable": "true", "cleanup.policy": "compact"}, None, "cleanup.policy",
     "compacted"),
    (TIERED, {"remote.storage.enable": "true", "cleanup.policy": "compact,delete"}, None, "cleanup.policy",
     "compacted"),
    (TIERED, {"remote.storage.enable": "true", "retention.bytes": "100", "local.retention.bytes": "200"}, None,
     "local.retention.bytes", "must not be more than retention.bytes"),
    (TIERED, {"remote.storage.enable": "true", "retention.bytes": "100", "local.retention.bytes": "-1"}, None,
     "local.retention.bytes", "must not be -1"),
    (TIERED, {"remote.storage.enable": "true", "retention.ms": "1000", "local.retention.ms": "2000"}, None,
     "local.retention.ms", "must not be more than retention.ms"),
    (TIERED, {}, {"remote.storage.enable": "true"}, "remote.storage.enable", "Disabling remote storage"),
    (TIERED, {"remote.storage.enable": "false"}, {"remote.storage.enable": "true"}, "remote.storage.enable",
     "Disabling"),
])
def test_refusals(broker: dict[str, str], overrides: dict[str, str], previous: dict[str, str] | None,
                  key: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        validate_remote_storage(BrokerConfig(broker), "t", overrides, previous)
    assert info.value.key == key


def test_internal_topics_are_never_tiered() -> None:
    with pytest.raises(ConfigError, match="Internal topic"):
        validate_remote_storage(BrokerConfig(TIERED), "__consumer_offsets", {"remote.storage.enable": "true"})


@pytest.mark.parametrize("overrides", [
    {"remote.storage.enable": "true"},
    {"remote.storage.enable": "true", "retention.ms": "-1", "local.retention.ms": "-1"},
    {"remote.storage.enable": "true", "retention.bytes": "1000", "local.retention.bytes": "1000"},
    {"remote.storage.enable": "true", "retention.ms": "1000", "local.retention.ms": "-2"},
    {"cleanup.policy": "compact"},
])
def test_accepted(overrides: dict[str, str]) -> None:
    validate_remote_storage(BrokerConfig(TIERED), "t", overrides, {"remote.storage.enable": "false"})
    if "remote.storage.enable" not in overrides:
        validate_remote_storage(BrokerConfig({}), "t", overrides)
