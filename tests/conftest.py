"""How the suite is spread over pytest-xdist workers (scripts/test.sh runs it with ``-n 2`` by default).

Tests that start processes share them through module- and session-scoped fixtures (a 3-broker cluster per
module, one Spark session, one private dockerd), so a module runs whole on one worker: its fixtures start once,
and two workers never start the same module's cluster (or two dockerds on the one image cache). The Spark
modules share one scope, so a single worker holds the single Spark JVM.

Work goes out in two lanes. The first worker (gw0) runs the *cluster lane*: every module of tests/integration
and of examples/ (the sample applications' tests, on moldau.testing's brokers) that starts brokers, one after
another, as a serial run would. The other workers run the *side lane*: the unit tier (no process at all,
tests/unit/conftest.py), tests/ops (the docker-compose run, which mostly waits on image builds), the
wheel-install test and the single-broker integration modules of ``SIDE_INTEGRATION``, beside it. The modules
that run kafka-python group members (``KAFKA_PYTHON_GROUPS``) go first on gw0 while the other worker is still in
the side lane, so no other cluster runs beside them: under that load kafka-python 3.0.12 sometimes never applies
a SyncGroup answer (README, "Running tests"), which failed a group test in about 1 of 3 runs when integration
modules ran on three workers. The two modules that build the project's wheel (``pip wheel .`` builds in the
source tree) are one work unit, so they never build at the same time. gw0 takes side-lane work once its own lane
is empty; a side worker whose lane is empty takes cluster-lane units from the far end of the queue
(``pick_scope``), so both workers end at about the same time.

This is xdist's ``loadscope`` with our own scopes and lanes (the ``pytest_xdist_make_scheduler`` hook). Not
``loadgroup`` with ``xdist_group`` markers: xdist 3.8 marks a group by rewriting ``item._nodeid``, which pytest 9.2
no longer reads, so the groups silently did not form (two workers ran test_compose.py and the second found the
first's dockerd lock).
"""

from __future__ import annotations

from typing import Any

import pytest

# The modules that build the project's wheel: one work unit, so they never build at the same time.
WHEEL_BUILDERS = ("tests/integration/test_install.py", "tests/ops/test_compose.py")


def scope_of(nodeid: str) -> str:
    """The work unit a test belongs to: its module, "spark" for every Spark module, "wheel" for the modules
    that build the project's wheel."""
    module = nodeid.split("::", 1)[0]
    if module in WHEEL_BUILDERS:
        return "wheel"
    return "spark" if module.startswith("tests/integration/test_spark_") else module


# Integration modules that run beside the cluster lane: their brokers are single (or, in test_quotas, a cluster
# whose test uses no consumer group) and none of them runs kafka-python group members, whose SyncGroup race under
# load is why cluster modules run one at a time. Moved here to keep the suite under 20 minutes (2026-11-26: the
# cluster lane alone had grown to ~23 min with the transaction, tiered-storage and quota tests).
SIDE_INTEGRATION = (
    "tests/integration/test_broker_cli.py", "tests/integration/test_connection_limits.py",
    "tests/integration/test_hostile_input.py", "tests/integration/test_quotas.py",
    "tests/integration/test_s3_storage.py", "tests/integration/test_security_hostile.py",
    "tests/integration/test_tiered_storage.py", "tests/integration/test_transactions_log.py",
    "tests/integration/test_transactions_worker_kill.py", "tests/integration/test_verify_txn.py",
)


def lane_of(scope: str) -> str:
    """ "cluster" for work units that start brokers (one at a time, on the first worker), else "side". The
    examples' tests (examples/*/tests, through moldau.testing's fixtures) start brokers too; SIDE_INTEGRATION's
    modules run in the side lane."""
    if scope in SIDE_INTEGRATION:
        return "side"
    return "cluster" if scope == "spark" or scope.startswith(("tests/integration/", "examples/")) else "side"


# Modules whose tests run kafka-python group members: they run on the first worker, before its other cluster
# units, so that no cluster-lane module of the other worker runs beside them (kafka-python 3.0.12's SyncGroup race).
KAFKA_PYTHON_GROUPS = ("tests/integration/test_groups.py", "tests/integration/test_consumer_protocol.py")


def pick_scope(worker: str, scopes: list[str]) -> str | None:
    """The work unit a worker takes next from the pending ones, or None.

    The first worker takes the kafka-python group modules first, then the cluster lane in collection order, then
    side-lane units. The others take side-lane units in collection order; once their lane is empty they help
    with the cluster lane from its far end, never taking a kafka-python group module. So the two lanes end
    together instead of one worker idling for minutes while the other runs the cluster lane alone (2026-11-26:
    the cluster lane was ~1,300 s of a 1,394 s run)."""
    if worker in ("gw0", ""):
        for scope in scopes:
            if scope in KAFKA_PYTHON_GROUPS:
                return scope
        for lane in ("cluster", "side"):
            for scope in scopes:
                if lane_of(scope) == lane:
                    return scope
        return None
    for scope in scopes:
        if lane_of(scope) == "side":
            return scope
    if any(scope in KAFKA_PYTHON_GROUPS for scope in scopes):
        return None  # the first worker has not started them yet: nothing of the cluster lane may run beside them
    for scope in reversed(scopes):
        if lane_of(scope) == "cluster":
            return scope
    return None


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling

    class LaneScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            scope = pick_scope(node.gateway.id, list(self.workqueue))
            if scope is None:
                return  # nothing for this worker's lane now; it is shut down once the queue is empty
            work_unit = self.workqueue.pop(scope)
            self.assigned_work.setdefault(node, {})[scope] = work_unit
            collection = self.registered_collections[node]
            node.send_runtest_some([collection.index(nodeid) for nodeid, done in work_unit.items() if not done])
            if not self.workqueue:
                # Every unit is handed out: tell every worker to stop once it has run what it holds (a side
                # worker whose lane ran dry holds nothing and would otherwise wait for work forever).
                for other in self.nodes:
                    if not other.shutting_down:
                        other.shutdown()

    return LaneScheduling(config, log)
