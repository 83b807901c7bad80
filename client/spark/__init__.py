"""The ``moldau`` PySpark data source: Spark's Kafka source and sink in pure Python (docs/spark.md).

Needs the ``spark`` extra (``pip install 'moldau[spark]'``: pyspark and pyarrow). ``MoldauDataSource`` is imported
on first use, so the pure parts (``moldau.spark.options``, ``moldau.spark.planning``) import without pyspark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from moldau.spark.source import MoldauDataSource

__all__ = ["MoldauDataSource"]


def __getattr__(name: str) -> Any:
    if name == "MoldauDataSource":
        from moldau.spark.source import MoldauDataSource

        return MoldauDataSource
    raise AttributeError(f"module 'moldau.spark' has no attribute {name!r}")
