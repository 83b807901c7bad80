"""Fixtures that run real broker processes.

* `broker`         one broker for the whole session (most tests; each test uses its own topic names)
* `fresh_broker`   a new broker in the test's tmp dir (restart / kill -9 / file-tampering tests)
* `broker_factory` start brokers with extra --override settings; all are cleaned up after the test
* `topic`          a unique topic name for the test

When a test fails, the tail of the stderr of every broker it used is added to the failure report.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .harness import BrokerProcess, kill_all


def pytest_configure(config: pytest.Config) -> None:
    # kafka-python 3.0 loads its protocol schemas with importlib.resources' legacy API: noise, not our problem.
    config.addinivalue_line("filterwarnings", "ignore:read_text is deprecated:DeprecationWarning")
    config.addinivalue_line("filterwarnings", "ignore:open_text is deprecated:DeprecationWarning")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report = yield
    if report.failed:
        for broker in getattr(item, "_moldau_brokers", []):
            report.sections.append(
                (f"broker {broker.broker_id} on {broker.bootstrap}: stderr tail", broker.stderr_tail())
            )
    return report


def _remember(request: pytest.FixtureRequest, broker: BrokerProcess) -> None:
    brokers = getattr(request.node, "_moldau_brokers", None)
    if brokers is None:
        brokers = []
        request.node._moldau_brokers = brokers
    brokers.append(broker)


@pytest.fixture(scope="session", autouse=True)
def _kill_leftover_brokers() -> Iterator[None]:
    yield
    kill_all()


@pytest.fixture(scope="session")
def _session_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path_factory.mktemp("session-broker"))
    try:
        broker.start()
        yield broker
    finally:
        try:
            broker.stop()
        finally:
            broker.kill()


@pytest.fixture
def broker(request: pytest.FixtureRequest, _session_broker: BrokerProcess) -> BrokerProcess:
    """The shared broker. Fails (does not restart it) if an earlier test left it dead."""
    _remember(request, _session_broker)
    assert _session_broker.is_running(), (
        f"the session broker is no longer running:\n{_session_broker.stderr_tail()}"
    )
    return _session_broker


@pytest.fixture
def broker_factory(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[..., BrokerProcess]]:
    started: list[BrokerProcess] = []

    def make(overrides: dict[str, str] | None = None, start: bool = True) -> BrokerProcess:
        broker = BrokerProcess(tmp_path / f"broker{len(started)}", overrides=dict(overrides or {}))
        started.append(broker)
        _remember(request, broker)
        if start:
            broker.start()
        return broker

    yield make
    for broker in started:
        try:
            if broker.is_running():
                broker.stop()
        except TimeoutError:
            pass
        finally:
            broker.kill()


@pytest.fixture
def fresh_broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory()


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name unique to this test (legal Kafka characters only)."""
    base = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name)[:150]
    return f"{base}-{uuid.uuid4().hex[:8]}"
