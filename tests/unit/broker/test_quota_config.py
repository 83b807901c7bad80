"""Quota entities, their ZooKeeper names and Kafka's precedence order (broker/quota_config.py)."""

from __future__ import annotations

import pytest

from moldau.broker.controller.zk_configs import change_notification, parse_change_notification
from moldau.broker.quota_config import (
    DEFAULT,
    QuotaConfigs,
    QuotaEntity,
    QuotaError,
    Resolved,
    validate_ops,
)

P = "producer_byte_rate"


@pytest.mark.parametrize(("components", "zk"), [
    ([("user", "alice")], ("users", "alice")),
    ([("user", None)], ("users", DEFAULT)),
    ([("client-id", "app")], ("clients", "app")),
    ([("user", "alice"), ("client-id", "app")], ("users", "alice/clients/app")),
    ([("client-id", None), ("user", None)], ("users", f"{DEFAULT}/clients/{DEFAULT}")),
    ([("user", "CN=a b,O=x*")], ("users", "CN%3Da%20b%2CO%3Dx%2A")),  # Kafka's Sanitizer
    ([("ip", "10.0.0.1")], ("ips", "10.0.0.1")),
])
def test_entities_map_to_kafkas_znodes_and_back(components: list[tuple[str, str | None]],
                                                zk: tuple[str, str]) -> None:
    entity = QuotaEntity.from_components(components)
    assert entity.zk_entity() == zk
    assert QuotaEntity.from_zk(*zk) == entity
    # The notification names the entity path; every broker parses it back to (type, name).
    assert parse_change_notification("/n", change_notification(*zk)) == zk


@pytest.mark.parametrize("components", [
    [], [("user", "a"), ("user", "b")], [("group", "g")], [("ip", "1.2.3.4"), ("user", "a")], [("user", "")],
])
def test_bad_entities_are_refused(components: list[tuple[str, str | None]]) -> None:
    with pytest.raises(QuotaError):
        QuotaEntity.from_components(components)


def test_ops_are_validated_per_entity_type() -> None:
    user = QuotaEntity(user="alice")
    validate_ops(user, [(P, 1024.0), ("request_percentage", 12.5), ("consumer_byte_rate", None)])
    for ops in ([("connection_creation_rate", 5.0)], [("retention.ms", 1.0)], [(P, -1.0)], [(P, 1.5)]):
        with pytest.raises(QuotaError):
            validate_ops(user, ops)
    validate_ops(QuotaEntity(ip=DEFAULT), [("connection_creation_rate", 5.0)])
    with pytest.raises(QuotaError):
        validate_ops(QuotaEntity(ip=DEFAULT), [(P, 5.0)])


def test_most_specific_entity_wins_in_kafkas_order() -> None:
    configs = QuotaConfigs()
    order = [QuotaEntity("alice", "app"), QuotaEntity("alice", DEFAULT), QuotaEntity("alice"),
             QuotaEntity(DEFAULT, "app"), QuotaEntity(DEFAULT, DEFAULT), QuotaEntity(DEFAULT),
             QuotaEntity(None, "app"), QuotaEntity(None, DEFAULT)]
    for rank, entity in enumerate(order):
        configs.set(entity, {P: float(rank + 1)})
    expected_tags = [("alice", "app"), ("alice", "app"), ("alice", ""), ("alice", "app"), ("alice", "app"),
                     ("alice", ""), ("", "app"), ("", "app")]
    for rank, entity in enumerate(order):  # remove the winners one by one: the next in line takes over
        assert configs.resolve(P, "alice", "app") == Resolved(float(rank + 1), *expected_tags[rank])
        configs.set(entity, {})
    assert configs.resolve(P, "alice", "app") is None
    assert not configs.has(P)


def test_another_key_or_client_falls_through() -> None:
    configs = QuotaConfigs()
    configs.set(QuotaEntity("alice"), {"consumer_byte_rate": 10.0})
    configs.set(QuotaEntity(None, DEFAULT), {P: 99.0})
    assert configs.resolve(P, "alice", "x") == Resolved(99.0, "", "x")  # alice sets no producer quota
    assert configs.resolve("consumer_byte_rate", "alice", "x") == Resolved(10.0, "alice", "")
    assert configs.resolve("consumer_byte_rate", "bob", "x") is None
