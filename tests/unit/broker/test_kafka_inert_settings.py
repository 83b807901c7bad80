"""Kafka 3.9 settings Moldau does not implement are known: a Kafka server.properties loads without a warning for
them, AlterConfigs accepts the ones Kafka updates dynamically (and refuses read-only ones as Kafka does), topic
configs accept them, DescribeConfigs shows them with Kafka's default and a doc saying they have no effect."""

from __future__ import annotations

import pytest

from moldau.broker.config import SETTINGS, TOPIC, BrokerConfig, ConfigError, parse_topic_configs
from moldau.broker.dynamic_config import DynamicBrokerConfig, validate_broker_configs
from moldau.broker.kafka_inert_settings import BROKER_ROWS, TOPIC_ROWS


def test_every_row_is_known_once_with_kafkas_default() -> None:
    names = [r[0] for r in BROKER_ROWS]
    assert len(names) == len(set(names))
    for name, _type, default, _mode, _area in BROKER_ROWS:
        assert SETTINGS[name].default == default or "no effect" not in SETTINGS[name].doc, name
    for name, *_ in TOPIC_ROWS:
        assert name in TOPIC


def test_a_kafka_server_properties_with_kerberos_and_kraft_settings_loads() -> None:
    c = BrokerConfig({"sasl.kerberos.service.name": "kafka", "sasl.kerberos.min.time.before.relogin": "30000",
                      "process.roles": "broker,controller", "node.id": "1", "group.share.max.size": "300"})
    assert c.get("sasl.kerberos.min.time.before.relogin") == 30000 and c.get("process.roles") == ["broker",
                                                                                               "controller"]
    with pytest.raises(ConfigError, match="sasl.kerberos.min.time.before.relogin"):
        BrokerConfig({"sasl.kerberos.min.time.before.relogin": "soon"})  # typed as in Kafka


def test_alter_configs_accepts_what_kafka_updates_dynamically() -> None:
    validate_broker_configs({"sasl.kerberos.min.time.before.relogin": "30000", "compression.gzip.level": "5"})
    with pytest.raises(ConfigError, match="process.roles.*dynamically"):
        validate_broker_configs({"process.roles": "broker"})  # read-only in Kafka too


def test_topic_configs_and_describe() -> None:
    assert parse_topic_configs({"remote.log.copy.disable": "false", "local.retention.ms": "1000"}) == {
        "remote.log.copy.disable": False, "local.retention.ms": 1000}
    dyn = DynamicBrokerConfig(BrokerConfig({"broker.id": "1"}), 1)
    topic = {d.name: d for d in dyn.describe_topic({"leader.replication.throttled.replicas": "0:1"})}
    assert topic["leader.replication.throttled.replicas"].value == "0:1"
    assert topic["remote.log.copy.disable"].value == "false" and "no effect" in topic["remote.log.copy.disable"].doc
    # Tiered storage's own settings are implemented (docs/tiered-storage.md), not inert.
    assert topic["local.retention.ms"].value == "-2" and "no effect" not in topic["local.retention.ms"].doc
    broker = {d.name: d for d in dyn.describe_broker()}
    relogin = broker["sasl.kerberos.min.time.before.relogin"]
    assert relogin.value == "60000" and not relogin.read_only and "Kerberos" in relogin.doc
    assert broker["process.roles"].read_only


def test_a_setting_moldau_implements_is_not_listed_as_inert() -> None:
    """A name declared in the real table shadows its inert row silently; the row must go when the feature lands
    (else the inert list keeps saying "no effect" about a setting that has one)."""
    from moldau.broker.config import INERT_BROKER_SETTINGS, INERT_TOPIC_SETTINGS

    inert_broker = {s.name for s in INERT_BROKER_SETTINGS}
    inert_topic = {s.name for s in INERT_TOPIC_SETTINGS}
    assert [r[0] for r in BROKER_ROWS if r[0] not in inert_broker] == []
    assert [r[0] for r in TOPIC_ROWS if r[0] not in inert_topic] == []
