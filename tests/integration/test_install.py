"""A plain `pip install` of the wheel, as a user gets it: one `moldau` package, the console tools work without
the test extra, and nothing generic (`client`, `broker`, `protocol`, `storage`) lands in site-packages."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
TOOLS = ["moldau-server", "moldau-console-producer", "moldau-console-consumer", "moldau-topics",
         "moldau-consumer-groups", "moldau-dump-log", "moldau-producer-perf-test", "moldau-consumer-perf-test",
         "moldau-verify"]
TOOLS.append("moldau-configs")  # topic and broker configs (docs/admin.md)
TOOLS += ["moldau-leader-election", "moldau-delete-records", "moldau-log-dirs", "moldau-reassign-partitions"]
TOOLS += ["moldau-scram", "moldau-acls"]  # security (docs/security.md)
TOOLS.append("moldau-transactions")  # docs/transactions.md


def run(cmd: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    # No PYTHONPATH from this session (the Spark fixture sets one): the fresh venv must see only what it installed.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                          env=env)


def test_a_plain_install_has_one_moldau_package_and_working_tools(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    built = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels),
                 str(REPO)], tmp_path)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = wheels.glob("moldau-*.whl")
    tops = {name.split("/", 1)[0] for name in zipfile.ZipFile(wheel).namelist()}
    # Besides the package, one module: PySpark registers top-level `pyspark_*` modules' DefaultSource (docs/spark.md).
    assert {t for t in tops if not t.endswith(".dist-info")} == {"moldau", "pyspark_moldau.py"}, tops
    # moldau.testing, the pytest plugin (docs/testing.md), ships and is registered for pytest to load.
    with zipfile.ZipFile(wheel) as whl:
        assert "moldau/testing/__init__.py" in whl.namelist()
        (entry_points,) = [n for n in whl.namelist() if n.endswith(".dist-info/entry_points.txt")]
        assert "[pytest11]\nmoldau.testing = moldau.testing\n" in whl.read(entry_points).decode()

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    installed = run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)], tmp_path)
    assert installed.returncode == 0, installed.stderr[-2000:]

    ok = run([str(py), "-c", "import moldau, moldau.aio; from moldau import Producer, Consumer, AdminClient; "
                              "import moldau.broker.server, moldau.storage.log"], tmp_path)
    assert ok.returncode == 0, ok.stderr
    # PySpark's scan (pyspark/sql/worker/lookup_data_sources.py) walks pkgutil.iter_modules() for `pyspark_*`.
    scan = run([str(py), "-c", "import pkgutil; print(sorted(m.name for m in pkgutil.iter_modules() "
                               "if m.name.startswith('pyspark_')))"], tmp_path)
    assert scan.stdout.strip() == "['pyspark_moldau']", scan.stdout + scan.stderr
    for generic in ("client", "broker", "protocol", "storage"):
        absent = run([str(py), "-c", f"import {generic}"], tmp_path)
        assert absent.returncode != 0 and "ModuleNotFoundError" in absent.stderr, generic
    for tool in TOOLS:
        helped = run([str(env_dir / "bin" / tool), "--help"], tmp_path, timeout=60)
        assert helped.returncode == 0, (tool, helped.stderr[-1000:])
    # moldau-verify launches ZooKeeper and a broker from the installed package (no repository checkout around).
    checked = run([str(env_dir / "bin" / "moldau-verify"), "--launch", "1", "--duration", "3", "--rate", "50",
                   "--json"], tmp_path, timeout=240)
    assert checked.returncode == 0, (checked.stdout[-2000:], checked.stderr[-2000:])
    assert '"lost": 0' in checked.stdout
