"""How the suite is spread over pytest-xdist workers (scripts/test.sh runs it with ``-n`` and ``--dist loadgroup``).

Tests that start processes share them through module- and session-scoped fixtures (a 3-broker cluster per
module, one Spark session), so each such module runs whole on one worker: its fixtures start once, not once per
worker that happens to get one of its tests. The Spark modules share one group, so one worker holds the single
Spark JVM. Unit tests that start nothing are handed out one by one and fill the gaps at the end.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
PROCESS_TIERS = (TESTS / "integration", TESTS / "ops")


def xdist_group_of(item: pytest.Item) -> str | None:
    """The group an item runs in, or None when it may go to any worker on its own."""
    path = item.path.resolve()
    starts_processes = any(tier in path.parents for tier in PROCESS_TIERS)
    if not starts_processes and item.get_closest_marker("integration") is None:
        return None
    module = path.stem
    return "spark" if "spark" in module else module


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which turns the marker into the node id's "@group"
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        group = xdist_group_of(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
