"""PySpark's entry point for the ``moldau`` format: PySpark registers the ``DefaultSource`` of every top-level
``pyspark_*`` module it finds, so ``spark.read.format("moldau")`` works without ``spark.dataSource.register``."""

from moldau.spark import MoldauDataSource as DefaultSource

__all__ = ["DefaultSource"]
