"""ClientConfig: Kafka names and pythonic kwargs, conversion from strings, errors naming the key."""

from __future__ import annotations

import pytest

from moldau.config import ClientConfig, admin_config, consumer_config, parse_host_port, producer_config
from moldau.errors import ConfigError


def test_kafka_names_and_kwargs_are_the_same_key() -> None:
    a = producer_config({"bootstrap.servers": "h1:9092,h2:9093", "linger.ms": "7"})
    b = producer_config(bootstrap_servers=["h1:9092", "h2:9093"], linger_ms=7)
    assert a["linger.ms"] == b["linger_ms"] == 7
    assert a.bootstrap_servers == b.bootstrap_servers == [("h1", 9092), ("h2", 9093)]


def test_defaults_follow_kafka() -> None:
    c = producer_config(bootstrap_servers="h:1")
    assert c["acks"] == "all" and c["enable.idempotence"] is True and c["batch.size"] == 16384
    assert c["buffer.memory"] == 33554432 and c["delivery.timeout.ms"] == 120000
    assert c["max.in.flight.requests.per.connection"] == 5 and c["compression.type"] == "none"
    assert consumer_config(bootstrap_servers="h:1")["auto.offset.reset"] == "latest"


@pytest.mark.parametrize(("values", "key"), [
    ({"linger.ms": "soon"}, "linger.ms"),
    ({"linger.ms": -1}, "linger.ms"),
    ({"compression.type": "brotli"}, "compression.type"),
    ({"enable.idempotence": "maybe"}, "enable.idempotence"),
    ({"acks": "2"}, "acks"),
    ({"lingerms": 1}, "lingerms"),
    ({"bootstrap.servers": "nohost"}, "bootstrap.servers"),
    ({"bootstrap.servers": "h:notaport"}, "bootstrap.servers"),
])
def test_bad_values_name_the_key(values: dict[str, object], key: str) -> None:
    merged = {"bootstrap.servers": "h:9092", **values}
    with pytest.raises(ConfigError) as info:
        producer_config(merged)
    assert info.value.key == key
    assert str(info.value).startswith(f"{key}: ")


def test_bootstrap_required_and_bool_strings() -> None:
    with pytest.raises(ConfigError, match="bootstrap.servers"):
        admin_config()
    c = producer_config({"bootstrap.servers": "h:1", "enable.idempotence": "false", "acks": 1})
    assert c["enable.idempotence"] is False and c["acks"] == "1"
    assert "enable.idempotence" in c.explicit and "linger.ms" not in c.explicit


def test_consumer_keys_are_not_producer_keys() -> None:
    with pytest.raises(ConfigError, match="group.id"):
        producer_config(bootstrap_servers="h:1", group_id="g")
    assert consumer_config(bootstrap_servers="h:1", group_id="g")["group.id"] == "g"


def test_host_port_parsing() -> None:
    assert parse_host_port("[::1]:9092") == ("::1", 9092)
    with pytest.raises(ConfigError, match="out of range"):
        parse_host_port("h:70000")


def test_set_validates() -> None:
    c = ClientConfig(bootstrap_servers="h:1")
    c.set("client_id", "me")
    assert c["client.id"] == "me"
    with pytest.raises(ConfigError):
        c.set("request.timeout.ms", "x")
