"""Kafka's JSON for dynamic configs in ZooKeeper and the config change notifications (pure functions)."""

from __future__ import annotations

import json

import pytest

from moldau.broker.config import BrokerConfig, ConfigError
from moldau.broker.controller.zk_configs import (
    change_notification,
    entity_config,
    entity_path,
    parse_change_notification,
    parse_entity_config,
    sequence_of,
)
from moldau.broker.controller.zk_data import MalformedZnode
from moldau.broker.dynamic_config import DEFAULT_ENTITY, DynamicBrokerConfig, apply_incremental, topic_setting


def test_znode_formats_are_kafkas() -> None:
    assert entity_path("brokers", DEFAULT_ENTITY) == "/config/brokers/<default>"
    assert json.loads(entity_config({"retention.ms": "5"})) == {"version": 1, "config": {"retention.ms": "5"}}
    assert json.loads(change_notification("topics", "t")) == {"version": 2, "entity_path": "topics/t"}
    assert parse_entity_config("/p", entity_config({"a": "1"})) == {"a": "1"}
    assert parse_change_notification("/p", change_notification("brokers", "<default>")) == ("brokers", "<default>")
    # Kafka's version 1 notifications (written by older tools) are read too.
    assert parse_change_notification("/p", b'{"version":1,"entity_type":"topics","entity_name":"t"}') == (
        "topics", "t")
    assert sequence_of("config_change_0000000042") == 42 and sequence_of("other") == -1


@pytest.mark.parametrize("raw", [b"nope", b'{"version":2,"entity_path":"groups/x"}', b'{"version":3}'])
def test_malformed_notifications_raise(raw: bytes) -> None:
    with pytest.raises(MalformedZnode):
        parse_change_notification("/config/changes/config_change_1", raw)


def test_incremental_list_ops_and_errors() -> None:
    ops = [("cleanup.policy", 2, "compact"), ("cleanup.policy", 3, "delete")]
    assert apply_incremental({}, ops, topic_setting, lambda _n: "delete") == {"cleanup.policy": "compact"}
    with pytest.raises(ConfigError, match="retention.ms"):
        apply_incremental({}, [("retention.ms", 2, "1")], topic_setting, lambda _n: None)
    with pytest.raises(ConfigError, match="nope"):
        apply_incremental({}, [("nope", 0, "1")], topic_setting, lambda _n: None)


def test_dynamic_layers_and_a_bad_layer_is_ignored() -> None:
    dyn = DynamicBrokerConfig(BrokerConfig({"broker.id": "1", "log.dirs": "/tmp/x", "log.retention.hours": "5"}), 1)
    seen: list[int] = []
    dyn.listeners.append(lambda c: seen.append(c.retention_ms))
    assert dyn.update({"log.retention.ms": "1000"}, {})
    assert dyn.current.retention_ms == 1000 and seen == [1000]
    assert dyn.update(None, {"log.retention.ms": "2000"})
    assert dyn.log_config().retention_ms == 2000
    assert not dyn.update(None, {"log.segment.bytes": "1"})  # below its minimum: refused, old config kept
    assert dyn.current.get("log.segment.bytes") == 1073741824 and seen == [1000, 2000]
    assert dyn.update(None, {"num.io.threads": "2"})  # not dynamic: ignored (a znode written by another tool)
    assert dyn.current.get("num.io.threads") == 8
