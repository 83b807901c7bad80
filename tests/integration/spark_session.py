"""One local Spark for the whole test session (the moldau data source's tests).

local[2], no UI, driver bound to 127.0.0.1, workers on this venv's Python. spark_plugin/ goes on the workers'
PYTHONPATH so PySpark's scan for top-level ``pyspark_*`` modules finds ``pyspark_moldau`` as it does in a regular
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


def spark_env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    plugin = str(REPO_ROOT / "spark_plugin")
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
