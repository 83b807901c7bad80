"""The suite's own xdist scheduling (tests/conftest.py) takes effect: a module runs whole on one worker.

Its first form (xdist_group markers) silently did nothing under pytest 9.2 and two workers started the same
module's dockerd; this runs a real pytest with two workers and looks at where each test ran."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from .harness import REPO_ROOT

pytestmark = pytest.mark.integration

MODULES = ["tests/unit/test_suite_layout.py", "tests/unit/test_spark_options.py", "tests/unit/test_packaging.py"]


def test_each_module_runs_on_one_worker() -> None:
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "-v", *MODULES],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    ran = re.findall(r"^\[(gw\d+)\] \[\s*\d+%\] PASSED (tests/\S+?\.py)::", done.stdout, re.M)
    workers: dict[str, set[str]] = {}
    for worker, module in ran:
        workers.setdefault(module, set()).add(worker)
    assert set(workers) == set(MODULES), done.stdout[-3000:]
    assert all(len(w) == 1 for w in workers.values()), workers
    assert len(ran) >= 12, ran  # enough tests that plain load scheduling would have split a module
