"""How the suite is spread over pytest-xdist workers (scripts/test.sh runs it with ``-n``).

Tests that start processes share them through module- and session-scoped fixtures (a 3-broker cluster per
module, one Spark session, one private dockerd), so a module runs whole on one worker: its fixtures start once,
and two workers never start the same module's cluster (or two dockerds on the one image cache). The Spark
modules share one scope, so a single worker holds the single Spark JVM.

This is xdist's ``loadscope`` with our own scopes (the ``pytest_xdist_make_scheduler`` hook). Not ``loadgroup``
with ``xdist_group`` markers: xdist 3.8 marks a group by rewriting ``item._nodeid``, which pytest 9.2 no longer
reads, so the groups silently did not form (two workers ran test_compose.py and the second found the first's
dockerd lock).
"""

from __future__ import annotations

from typing import Any

import pytest


def scope_of(nodeid: str) -> str:
    """The work unit a test belongs to: its module, or "spark" for every Spark module."""
    module = nodeid.split("::", 1)[0]
    return "spark" if module.startswith("tests/integration/test_spark_") else module


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return ModuleScheduling(config, log)
