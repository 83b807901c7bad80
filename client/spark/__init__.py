"""The ``moldau`` PySpark data source: Spark's Kafka source and sink in pure Python (docs/spark.md).

Needs the ``spark`` extra (``pip install 'moldau[spark]'``: pyspark and pyarrow).
"""

from moldau.spark.source import MoldauDataSource

__all__ = ["MoldauDataSource"]
