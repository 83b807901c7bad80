"""MOLDAU_<SETTING> environment variables -> broker settings (the container image's entry point)."""

from __future__ import annotations

import pytest

from moldau.broker.config import BrokerConfig
from moldau.broker.env_config import EnvConfigError, server_command, setting_name, settings_from_env


@pytest.mark.parametrize(("variable", "setting"), [
    ("MOLDAU_BROKER_ID", "broker.id"),
    ("MOLDAU_ZOOKEEPER_CONNECT", "zookeeper.connect"),
    ("MOLDAU_LOG_RETENTION_MS", "log.retention.ms"),
    ("MOLDAU_ADVERTISED_LISTENERS", "advertised.listeners"),
    ("MOLDAU_LISTENER_SECURITY_PROTOCOL_MAP", "listener.security.protocol.map"),
    ("MOLDAU_A__B", "a_b"),
    ("MOLDAU_A___B_C", "a-b.c"),
])
def test_names_map_as_the_kafka_images_do(variable: str, setting: str) -> None:
    assert setting_name(variable) == setting


def test_environment_becomes_overrides_that_the_broker_accepts() -> None:
    env = {"MOLDAU_BROKER_ID": "2", "MOLDAU_ZOOKEEPER_CONNECT": "zookeeper:2181",
           "MOLDAU_LISTENERS": "INTERNAL://:19092,EXTERNAL://:9093",
           "MOLDAU_ADVERTISED_LISTENERS": "INTERNAL://broker-2:19092,EXTERNAL://localhost:9093",
           "MOLDAU_LISTENER_SECURITY_PROTOCOL_MAP": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
           "MOLDAU_INTER_BROKER_LISTENER_NAME": "INTERNAL", "MOLDAU_LOG_RETENTION_MS": "60000",
           "PATH": "/usr/bin", "KAFKA_BROKER_ID": "9", "MOLDAU_VENV": ".venv"}
    settings = settings_from_env(env)
    assert settings["broker.id"] == "2" and settings["log.retention.ms"] == "60000"
    assert "path" not in settings and len(settings) == 7  # other prefixes and reserved names are not settings
    config = BrokerConfig.from_sources(None, [f"{k}={v}" for k, v in settings.items()])
    assert config.broker_id == 2
    assert config.get("inter.broker.listener.name") == "INTERNAL"


def test_unknown_setting_names_the_variable() -> None:
    with pytest.raises(EnvConfigError, match="MOLDAU_BROKER_IDD: 'broker.idd' is not a broker setting"):
        settings_from_env({"MOLDAU_BROKER_IDD": "1"})


def test_command_order_file_then_environment_then_arguments() -> None:
    env = {"MOLDAU_BROKER_ID": "3", "MOLDAU_CONFIG_FILE": "/cfg/a.properties"}
    assert server_command(env, []) == ["moldau-server", "/cfg/a.properties", "--override", "broker.id=3"]
    assert server_command(env, ["/b.properties", "--override", "broker.id=4"]) == [
        "moldau-server", "/b.properties", "--override", "broker.id=3", "--override", "broker.id=4"]
    assert server_command({}, [])[1] == "/etc/moldau/server.properties"
