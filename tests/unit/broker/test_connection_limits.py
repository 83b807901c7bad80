"""Connection-limit settings: Kafka's overrides format, validation naming the key, and the limits they produce."""

from __future__ import annotations

import pytest

from moldau.broker.config import BrokerConfig, ConfigError, parse_ip_overrides
from moldau.broker.network import UNLIMITED, ConnectionLimits


def test_overrides_parse_kafkas_format() -> None:
    assert parse_ip_overrides("") == {}
    assert parse_ip_overrides("127.0.0.1:5, 10.0.0.2:0") == {"127.0.0.1": 5, "10.0.0.2": 0}
    assert parse_ip_overrides("[::1]:7,::2:3") == {"::1": 7, "::2": 3}


@pytest.mark.parametrize("bad", ["127.0.0.1", "host:", ":5", "host:-1", "host:many"])
def test_bad_overrides_name_the_key(bad: str) -> None:
    with pytest.raises(ConfigError, match="max.connections.per.ip.overrides"):
        BrokerConfig({"max.connections.per.ip.overrides": bad})


def test_limits_from_config() -> None:
    default = ConnectionLimits.from_config(BrokerConfig({}))
    assert default.max_idle_ms == 600000 and default.limit_for("10.1.1.1") == 2**31 - 1
    assert default.partial_bytes_budget == 268435456
    cfg = BrokerConfig({"max.connections": "10", "max.connections.per.ip": "2",
                        "max.connections.per.ip.overrides": "127.0.0.1:4,localhost:6",
                        "connections.max.idle.ms": "-1", "moldau.socket.partial.requests.max.bytes": "1024"})
    limits = ConnectionLimits.from_config(cfg)
    assert limits.max_connections == 10 and limits.max_idle_ms == -1 and limits.partial_bytes_budget == 1024
    assert limits.limit_for("10.1.1.1") == 2
    assert limits.limit_for("127.0.0.1") == 6  # localhost resolves to 127.0.0.1; the later entry wins
    assert ConnectionLimits().limit_for("x") == UNLIMITED


@pytest.mark.parametrize("key,value", [("connections.max.idle.ms", "-2"),
                                       ("moldau.socket.partial.requests.max.bytes", "0")])
def test_out_of_range_limits_name_the_key(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        BrokerConfig({key: value})
