"""``MoldauDataSource``: the ``moldau`` format for Spark's Python Data Source API (PySpark >= 4.2).

``spark.dataSource.register(MoldauDataSource)`` or, with the package installed, nothing at all: PySpark finds
top-level ``pyspark_*`` modules' ``DefaultSource`` (``pyspark_moldau``). Then ``spark.read.format("moldau")``,
``readStream``, ``write`` and ``writeStream`` take the options of Spark's Kafka source (docs/spark.md).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from moldau.spark import options as opts
from moldau.spark.reader import MoldauBatchReader, MoldauStreamReader
from moldau.spark.rows import schema_ddl
from moldau.spark.writer import WriteResult, check_columns, write_arrow

log = logging.getLogger("moldau.spark")


class RowsWritten(WriterCommitMessage):
    def __init__(self, result: WriteResult) -> None:
        self.rows = result.rows


def _total(messages: list[WriterCommitMessage | None]) -> int:
    return sum(m.rows for m in messages if isinstance(m, RowsWritten))


class MoldauBatchWriter(DataSourceArrowWriter):
    """Rows arrive as Arrow record batches (DataSourceArrowWriter), not pickled Rows."""

    def __init__(self, options: opts.SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return RowsWritten(write_arrow(self.options, iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        log.info("moldau sink wrote %d rows", _total(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        # Records already acknowledged stay in the topic: the sink is at least once, as Spark's Kafka sink.
        log.warning("moldau write aborted after %d acknowledged rows", _total(messages))


class MoldauStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: opts.SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return RowsWritten(write_arrow(self.options, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.info("moldau sink batch %d wrote %d rows", batchId, _total(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("moldau sink batch %d aborted after %d acknowledged rows", batchId, _total(messages))


class MoldauDataSource(DataSource):
    """Reads and writes Kafka-protocol topics with the schema and options of Spark's Kafka source."""

    @classmethod
    def name(cls) -> str:
        return "moldau"

    def schema(self) -> str:
        include = str(self.options.get("includeHeaders", "false")).strip().lower() == "true"
        return schema_ddl(include)

    def reader(self, schema: StructType) -> DataSourceReader:
        return MoldauBatchReader(opts.parse(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return MoldauStreamReader(opts.parse(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        sink = opts.parse_sink(self.options)
        check_columns(schema.fieldNames(), sink)
        return MoldauBatchWriter(sink)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        sink = opts.parse_sink(self.options)
        check_columns(schema.fieldNames(), sink)
        return MoldauStreamWriter(sink)
