"""Fixtures for the connection tests: a real Moldau broker process (tests/integration/harness.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.harness import BrokerProcess


def _run(workdir: Path) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(workdir)
    try:
        broker.start()
        yield broker
    finally:
        try:
            broker.stop()
        finally:
            broker.kill()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker shared by a test module (tests use their own topic names)."""
    yield from _run(tmp_path_factory.mktemp("client-broker"))


@pytest.fixture
def fresh_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker of the test's own, for tests that kill it."""
    yield from _run(tmp_path / "broker")
