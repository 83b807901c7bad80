"""Advertised = served: ApiVersions offers exactly the APIs with a route, and every route has a declaration."""

from __future__ import annotations

from moldau.broker.apis import ADVERTISED, ADVERTISED_VERSIONS, ROUTES
from moldau.broker.network import supported_api_versions
from moldau.protocol.api import REGISTRY, TRANSACTION_APIS, ApiKey

# Kafka's ZooKeeper-mode brokers advertise these controller -> broker (and broker -> controller) APIs too.
INTER_BROKER = {ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA, ApiKey.CONTROLLED_SHUTDOWN}


def test_every_route_has_a_declaration() -> None:
    undeclared = sorted(set(ROUTES) - set(REGISTRY))
    assert not undeclared, f"routed but not declared in protocol/api.py REGISTRY: {undeclared}"


def test_every_registered_api_has_a_handler() -> None:
    # The transaction APIs are declared at once for the two halves of issue 19 and routed one by one; the network
    # layer answers an unrouted one with UNSUPPORTED_VERSION and ApiVersions does not offer it.
    unserved = sorted(ApiKey(k).name for k in set(REGISTRY) - set(ROUTES) - TRANSACTION_APIS)
    assert not unserved, f"declared in REGISTRY but no handler in broker/apis ROUTES: {unserved}"


def test_api_versions_advertises_exactly_the_routes() -> None:
    assert ADVERTISED == frozenset(ROUTES)
    assert INTER_BROKER <= ADVERTISED
    advertised = {e["api_key"]: (e["min_version"], e["max_version"]) for e in ADVERTISED_VERSIONS}
    assert advertised == {k: REGISTRY[k].versions for k in ROUTES}
    # The v0 fallback answer of the network layer (unsupported ApiVersions version) says the same.
    assert supported_api_versions() == ADVERTISED_VERSIONS
    assert [e["api_key"] for e in ADVERTISED_VERSIONS] == sorted(advertised)
