"""``moldau.testing``: pytest fixtures that run real Kafka-protocol brokers for any project's tests (docs/testing.md).

Installed with Moldau and registered through the ``pytest11`` entry point, so its fixtures are there without a
conftest line. Registering costs the import of this module (stdlib and pytest only); a fixture starts nothing
until a test asks for it. ``-p no:moldau.testing`` switches the plugin off; with plugin autoloading disabled
(``PYTEST_DISABLE_PLUGIN_AUTOLOAD``), ``pytest_plugins = ["moldau.testing"]`` in the root conftest turns it on.

Fixtures:

* ``moldau_broker``           a fresh single broker (no ZooKeeper) per test: ~0.1 s after the first
* ``moldau_broker_session``   one single broker shared by the whole session
* ``moldau_cluster``          ZooKeeper + 3 brokers per test (``@pytest.mark.moldau_cluster(brokers=5)``)
* ``moldau_cluster_session``  one 3-broker cluster shared by the whole session

``broker_fixture(scope="module")`` and ``cluster_fixture(brokers=3, scope="module")`` make fixtures of any scope
and settings, e.g. one broker per test module. Every fixture tears its brokers (and ZooKeeper) down when its
scope ends, whether the test passed, failed or raised; on an interrupted run the brokers, being threads of the
test process, end with it, and ZooKeeper is killed by the kernel when the process dies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal

import pytest

if TYPE_CHECKING:
    from moldau.testing.cluster import MoldauBroker, MoldauCluster

__all__ = ["MoldauBroker", "MoldauCluster", "broker_fixture", "cluster_fixture"]

Scope = Literal["session", "package", "module", "class", "function"]


def __getattr__(name: str) -> Any:
    # PEP 562: the broker modules load when a fixture (or a user) first needs them, not when pytest loads the plugin.
    if name in ("MoldauBroker", "MoldauCluster"):
        from moldau.testing import cluster

        return getattr(cluster, name)
    raise AttributeError(f"module 'moldau.testing' has no attribute {name!r}")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "moldau_broker(overrides={...}): settings of the moldau_broker fixture")
    config.addinivalue_line(
        "markers", "moldau_cluster(brokers=3, overrides={...}): size and settings of the moldau_cluster fixture")


def _marker_kwargs(request: pytest.FixtureRequest, name: str) -> dict[str, Any]:
    marker = request.node.get_closest_marker(name)
    return dict(marker.kwargs) if marker is not None else {}


def _broker(tmp: pytest.TempPathFactory, overrides: Mapping[str, str] | None) -> Iterator[MoldauBroker]:
    from moldau.testing.cluster import MoldauBroker

    broker = MoldauBroker(tmp.mktemp("moldau-broker"), overrides)
    try:
        yield broker.start()
    finally:
        broker.stop()


def _cluster(tmp: pytest.TempPathFactory, brokers: int, overrides: Mapping[str, str] | None) \
        -> Iterator[MoldauCluster]:
    from moldau.testing.cluster import MoldauCluster

    cluster = MoldauCluster(brokers, tmp.mktemp("moldau-cluster"), overrides)
    try:
        yield cluster.start()  # start() stops what it started when it fails
    finally:
        cluster.stop()


def broker_fixture(scope: Scope = "module", overrides: Mapping[str, str] | None = None) \
        -> Callable[..., Iterator[MoldauBroker]]:
    """A fixture of a single broker with the given scope and broker settings; assign it to a name in a conftest
    or test module (``order_broker = broker_fixture(scope="module")``) and request it by that name."""

    @pytest.fixture(scope=scope)
    def fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MoldauBroker]:
        yield from _broker(tmp_path_factory, overrides)

    return fixture


def cluster_fixture(brokers: int = 3, scope: Scope = "module", overrides: Mapping[str, str] | None = None) \
        -> Callable[..., Iterator[MoldauCluster]]:
    """A fixture of a ZooKeeper cluster of `brokers` brokers with the given scope and settings (see
    broker_fixture)."""

    @pytest.fixture(scope=scope)
    def fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MoldauCluster]:
        yield from _cluster(tmp_path_factory, brokers, overrides)

    return fixture


@pytest.fixture
def moldau_broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) \
        -> Iterator[MoldauBroker]:
    """A single broker of this test's own: ``.bootstrap_servers``, ``.create_topic()``. Settings:
    ``@pytest.mark.moldau_broker(overrides={"num.partitions": "3"})``."""
    yield from _broker(tmp_path_factory, _marker_kwargs(request, "moldau_broker").get("overrides"))


moldau_broker_session = broker_fixture(scope="session")  # one broker for the session (unique topic names)


@pytest.fixture
def moldau_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) \
        -> Iterator[MoldauCluster]:
    """ZooKeeper and three brokers of this test's own; ``@pytest.mark.moldau_cluster(brokers=5, overrides={...})``
    changes size and settings."""
    kwargs = _marker_kwargs(request, "moldau_cluster")
    yield from _cluster(tmp_path_factory, int(kwargs.get("brokers", 3)), kwargs.get("overrides"))


moldau_cluster_session = cluster_fixture(scope="session")  # one 3-broker cluster for the session
