"""Listener security settings: JAAS parsing, per-listener fallbacks and the start-up errors naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from moldau.broker.config import BrokerConfig, ConfigError
from moldau.broker.security.jaas import parse_jaas
from moldau.broker.security.listener_config import listener_security, listener_value

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="a l;i\\"ce";')


def make(props: dict[str, str]) -> BrokerConfig:
    return BrokerConfig({"log.dirs": "/tmp/moldau-unit", **props})


def test_jaas_plain_users() -> None:
    entry = parse_jaas(PLAIN_JAAS)
    assert entry.module.endswith("PlainLoginModule") and entry.flag == "required"
    assert entry.options["username"] == "admin"
    assert entry.plain_users() == {"admin": "admin-secret", "alice": 'a l;i"ce'}


@pytest.mark.parametrize("text", ["", "Module required user_a=\"x\"", "Module sometimes;", "Module required =x;"])
def test_jaas_malformed(text: str) -> None:
    with pytest.raises(ValueError):
        parse_jaas(text)


def test_sasl_plaintext_listener_with_plain_users() -> None:
    cfg = make({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "security.inter.broker.protocol": "SASL_PLAINTEXT",
                "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS})
    sec = listener_security(cfg, cfg.listeners[0])
    assert sec.sasl and sec.mechanisms == ["PLAIN", "SCRAM-SHA-512"]
    assert sec.plain_users["alice"] == 'a l;i"ce' and sec.max_receive_size == 524288
    assert sec.failed_auth_delay_ms == 100


def test_per_listener_value_wins_over_global() -> None:
    cfg = make({"listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
                "sasl.enabled.mechanisms": "SCRAM-SHA-256",
                "listener.name.internal.sasl.enabled.mechanisms": "SCRAM-SHA-512",
                "listener.name.internal.sasl.server.max.receive.size": "1000",
                "listener.name.internal.connections.max.reauth.ms": "60000"})
    assert listener_value(cfg, "INTERNAL", "sasl.enabled.mechanisms") == (
        "listener.name.internal.sasl.enabled.mechanisms", ["SCRAM-SHA-512"])
    assert listener_value(cfg, "PLAINTEXT", "sasl.enabled.mechanisms") == (
        "sasl.enabled.mechanisms", ["SCRAM-SHA-256"])
    internal = listener_security(cfg, cfg.listeners[1])
    assert internal.max_receive_size == 1000 and internal.reauth_ms == 60000


@pytest.mark.parametrize(("props", "key"), [
    ({"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,X:KERBEROS"}, "listener.security.protocol.map"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "security.inter.broker.protocol": "SASL_PLAINTEXT"},
     "sasl.enabled.mechanisms"),  # Kafka's default GSSAPI is not implemented
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "security.inter.broker.protocol": "SASL_PLAINTEXT",
      "sasl.enabled.mechanisms": "PLAIN"}, "sasl.jaas.config"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "security.inter.broker.protocol": "SASL_PLAINTEXT",
      "sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": "Broken"},
     "listener.name.sasl_plaintext.plain.sasl.jaas.config"),
    ({"listeners": "SSL://127.0.0.1:0", "security.inter.broker.protocol": "SSL"}, "ssl.keystore.type"),
    ({"listeners": "SSL://127.0.0.1:0", "security.inter.broker.protocol": "SSL", "ssl.keystore.type": "PEM",
      "ssl.truststore.type": "PEM"}, "ssl.keystore.location"),
    ({"listeners": "SSL://127.0.0.1:0", "security.inter.broker.protocol": "SSL", "ssl.keystore.type": "PEM",
      "ssl.truststore.type": "PEM", "listener.name.ssl.ssl.keystore.location": "/nonexistent.pem"},
     "listener.name.ssl.ssl.keystore.location"),
    ({"listener.name.plaintext.ssl.no.such.thing": "1"}, "listener.name.plaintext.ssl.no.such.thing"),
    ({"listener.name.plaintext.ssl.client.auth": "maybe"}, "listener.name.plaintext.ssl.client.auth"),
    ({"ssl.client.auth": "sometimes"}, "ssl.client.auth"),
])
def test_bad_settings_name_the_key(props: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        make(props)
    assert info.value.key == key, str(info.value)


def test_unreadable_pem_names_the_keystore(tmp_path: Path) -> None:
    pem = tmp_path / "broker.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
    with pytest.raises(ConfigError) as info:
        make({"listeners": "SSL://127.0.0.1:0", "security.inter.broker.protocol": "SSL",
              "ssl.keystore.type": "PEM", "ssl.truststore.type": "PEM", "ssl.keystore.location": str(pem)})
    assert info.value.key == "ssl.keystore.location"


def test_client_auth_without_truststore(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        make({"listeners": "SSL://127.0.0.1:0", "security.inter.broker.protocol": "SSL",
              "ssl.keystore.type": "PEM", "ssl.truststore.type": "PEM", "ssl.keystore.location": __file__,
              "ssl.client.auth": "required"})
    assert info.value.key == "ssl.truststore.location"
