"""Batch and streaming readers of the ``moldau`` data source.

Planning (driver) resolves offsets through ListOffsets; every Spark input partition is one contiguous offset
range of one topic-partition, and ``read()`` is a pure function of that range: the same range always yields the
same records (or fails with failOnDataLoss), which is what makes a replayed micro-batch exact.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from moldau.cluster import Cluster
from moldau.config import ClientConfig
from moldau.fetcher import TopicPartition
from moldau.spark import access
from moldau.spark.options import SourceOptions
from moldau.spark.planning import OffsetRange, Offsets, from_json, rate_limit, split, to_json
from moldau.spark.rows import arrow_schema, to_arrow, to_tuples

log = logging.getLogger("moldau.spark")


class RangePartition(InputPartition):
    """One Spark input partition: [start, end) of one topic-partition."""

    def __init__(self, r: OffsetRange) -> None:
        super().__init__(r)
        self.range = r


def read_range(options: SourceOptions, r: OffsetRange, *, arrow: bool = True) -> Iterator[Any]:
    """Arrow record batches of the range, one per fetched chunk (runs on an executor); ``arrow=False`` yields
    plain tuples instead (slower: bench/spark_read.py measures both)."""
    config = access.source_config(options.client_config)
    schema = arrow_schema(options.include_headers)
    loop = asyncio.new_event_loop()
    cluster = Cluster(config)
    try:
        loop.run_until_complete(cluster.start())
        chunks = access.read_range(cluster, config, TopicPartition(r.topic, r.partition), r.start, r.end,
                                   fail_on_data_loss=options.fail_on_data_loss)
        while True:
            try:
                records = loop.run_until_complete(anext(chunks))
            except StopAsyncIteration:
                break
            if arrow:
                yield to_arrow(records, options.include_headers, schema)
            else:
                yield from to_tuples(records, options.include_headers)
    finally:
        loop.run_until_complete(cluster.close())
        loop.close()


class MoldauBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        opts = self.options

        async def plan(cluster: Cluster, config: ClientConfig) -> list[OffsetRange]:
            tps = await access.partitions(cluster, opts.subscription)
            start = await access.resolve(cluster, config, opts.starting, tps, option="startingOffsets",
                                         strategy=opts.timestamp_strategy)
            end = await access.resolve(cluster, config, opts.ending, tps, option="endingOffsets")
            out = []
            for tp in tps:
                if end[tp] < start[tp]:
                    raise ValueError(f"{tp.topic}-{tp.partition}: the ending offset {end[tp]} is before the "
                                     f"starting offset {start[tp]}")
                out.append(OffsetRange(tp.topic, tp.partition, start[tp], end[tp]))
            return out

        ranges = access.run(opts.client_config, plan)
        return [RangePartition(r) for r in split(ranges, opts.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, RangePartition)
        return read_range(self.options, partition.range)


class MoldauStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are Spark's Kafka JSON, {"topic": {"0": next_offset}}.

    The start is resolved once per reader (``initialOffset``), and the first ``latestOffset`` after resolving it
    answers the start unchanged: batch 0 is then an empty batch whose end, written to the checkpoint's
    ``offsets/0`` before any data is read, pins where the query starts. Spark calls ``initialOffset`` again when it
    (re)plans batch 0 and after a restart; a second resolution of ``latest`` may differ, so ranges whose end lies
    before their start are read as empty (they are replays of that pinned batch 0), never as data loss.
    """

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._initial: dict[str, dict[str, int]] | None = None
        self._pin = False
        self._latest: dict[str, dict[str, int]] | None = None
        self._target: Offsets | None = None  # Trigger.AvailableNow's end
        self._group_offsets: dict | None = None  # last offsets committed to commitOffsetsToGroup

    def _latest_offsets(self) -> Offsets:
        opts = self.options

        async def latest(cluster: Cluster, config: ClientConfig) -> Offsets:
            tps = await access.partitions(cluster, opts.subscription)
            return await access.resolve(cluster, config, access.OffsetSpec("latest"), tps, option="latest")

        return access.run(opts.client_config, latest)

    def initialOffset(self) -> dict:
        if self._initial is None:
            opts = self.options

            async def initial(cluster: Cluster, config: ClientConfig) -> Offsets:
                tps = await access.partitions(cluster, opts.subscription)
                return await access.resolve(cluster, config, opts.starting, tps, option="startingOffsets",
                                            strategy=opts.timestamp_strategy)

            self._initial = to_json(access.run(opts.client_config, initial))
            self._pin = True
            log.info("moldau source starts at %s", self._initial)
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.options.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest_offsets()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        self._commit_to_group(start)
        latest = self._latest_offsets()
        self._latest = to_json(latest)
        if self._pin:
            self._pin = False
            return start  # batch 0 is empty: offsets/0 records the resolved start before any data is read
        begin = from_json(start)
        if self._target is not None:
            # AvailableNow: nothing past the target; partitions that appeared since are read up to now.
            latest = {tp: min(off, self._target.get(tp, off)) for tp, off in latest.items()}
        end = {tp: max(off, begin.get(tp, 0)) if tp in begin and off < begin[tp] else off
               for tp, off in latest.items()}
        for tp, off in begin.items():
            end.setdefault(tp, off)  # a partition that disappeared keeps its offset (reported when read)
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(begin, end, limit.max_rows)
        return to_json(end)

    def reportLatestOffset(self) -> dict | None:
        return self._latest

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, stop = from_json(start), from_json(end)
        ranges = []
        for tp, off in stop.items():
            first = begin.get(tp, 0)  # a partition new since the last batch is read from its beginning
            if off < first:
                if start != self._initial:
                    access.data_loss(self.options.fail_on_data_loss,
                                     f"{tp.topic}-{tp.partition}: offset went backwards from {first} to {off}")
                continue
            ranges.append(OffsetRange(tp.topic, tp.partition, first, off))
        return [RangePartition(r) for r in split(ranges, self.options.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, RangePartition)
        return read_range(self.options, partition.range)

    def commit(self, end: dict) -> None:
        self._commit_to_group(end)

    def _commit_to_group(self, offsets: dict) -> None:
        """commitOffsetsToGroup: Spark calls ``commit(end)`` of a batch only when it plans the next batch with
        data, so the group would lag one batch behind. The engine runs micro-batches one after another and asks
        ``latestOffset(start)`` only once the batch ending at ``start`` is in the commit log; committing ``start``
        there shows the group at the end of every completed batch without waiting for new data."""
        group = self.options.commit_group
        if group and offsets and offsets != self._group_offsets:
            access.commit_to_group(self.options.client_config, group, from_json(offsets))
            self._group_offsets = offsets
