"""One local Spark for the whole test session (the moldau data source's tests).

local[2], no UI, driver bound to 127.0.0.1, workers on this venv's Python. spark_plugin/pyspark_moldau.py goes on
the workers' PYTHONPATH so PySpark's scan for top-level ``pyspark_*`` modules finds ``pyspark_moldau`` as it does in a regular
(non-editable) install: the tests use ``format("moldau")`` with no register() call.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# No package-relative imports: spark_stream_driver.py, run as a script, imports this module too.
REPO_ROOT = Path(__file__).resolve().parents[2]

SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.streaming.noDataMicroBatches.enabled": "false",
}


def _plugin_dir() -> str:
    """A folder holding only pyspark_moldau.py. Not spark_plugin/ itself: the editable install writes
    moldau.egg-info there, and on PYTHONPATH that stale metadata makes pip (and importlib.metadata) believe
    moldau is installed in every child process, e.g. the plain-install test's fresh venv."""
    folder = REPO_ROOT / "build" / "spark-pythonpath"
    link = folder / "pyspark_moldau.py"
    folder.mkdir(parents=True, exist_ok=True)
    if not link.exists():
        try:
            link.symlink_to(REPO_ROOT / "spark_plugin" / "pyspark_moldau.py")
        except FileExistsError:  # made by a concurrent process (the restart test's driver)
            pass
    return str(folder)


def spark_env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    plugin = _plugin_dir()
    return {"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
            "PYTHONPATH": plugin if not path else f"{plugin}{os.pathsep}{path}"}


@pytest.fixture(scope="session", name="spark")
def spark_session() -> Iterator[Any]:
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:
        pytest.skip(f"pyspark cannot be imported ({exc}); install the spark extra: pip install -e '.[test,spark]'")
    os.environ.update(spark_env())
    builder = SparkSession.builder.master("local[2]").appName("moldau-tests")
    for key, value in SPARK_CONF.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
