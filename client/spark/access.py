"""What the data source asks the cluster: partitions of a subscription, offsets, and one partition's range.

Everything here runs on Moldau's asyncio client (Cluster + Fetch/ListOffsets, records decoded by
``moldau.fetcher.decode_partition``); the Spark classes call it through :func:`run`, one short-lived client per
call (the driver asks once per micro-batch, an executor once per input partition).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import TypeVar

from moldau.cluster import Cluster
from moldau.config import ClientConfig, consumer_config
from moldau.errors import KafkaConnectionError, KafkaError, RequestTimeoutError
from moldau.fetcher import ConsumerRecord, Fetcher, PartitionState, TopicPartition, decode_fetched
from moldau.protocol.errors import ErrorCode
from moldau.spark.options import EARLIEST, LATEST, OffsetSpec, SourceOptionError, Subscription

log = logging.getLogger("moldau.spark")

T = TypeVar("T")
Offsets = dict[TopicPartition, int]


class DataLossError(RuntimeError):
    """Offsets the query needs are gone (retention, DeleteRecords, a truncated log) and failOnDataLoss=true."""


def source_config(kafka: Mapping[str, str]) -> ClientConfig:
    # Reading is by offset range, never by group: no group.id, no auto-commit.
    return consumer_config({**kafka, "enable.auto.commit": "false"})


def run(kafka: Mapping[str, str], fn: Callable[[Cluster, ClientConfig], Awaitable[T]]) -> T:
    """Runs ``fn(cluster, config)`` on a fresh event loop with a started Cluster, closing it afterwards."""
    config = source_config(kafka)

    async def main() -> T:
        cluster = Cluster(config)
        await cluster.start()
        try:
            return await fn(cluster, config)
        finally:
            await cluster.close()

    return asyncio.run(main())


async def partitions(cluster: Cluster, sub: Subscription) -> list[TopicPartition]:
    """The subscription's partitions right now, sorted (topics that do not exist contribute none)."""
    if sub.assign is not None:
        return sorted(TopicPartition(t, p) for t, ps in sub.assign.items() for p in ps)
    if sub.pattern is not None:
        await cluster.refresh_metadata(None, allow_auto_create=False)
        regex = re.compile(sub.pattern)
        names = [n for n, info in cluster.topics.items() if not info.is_internal and regex.fullmatch(n)]
    else:
        await cluster.refresh_metadata(list(sub.topics), allow_auto_create=False)
        names = list(sub.topics)
    out = []
    for name in names:
        for p in cluster.partitions_for(name) or ():
            out.append(TopicPartition(name, p))
    return sorted(out)


async def list_offsets(cluster: Cluster, config: ClientConfig, tps: list[TopicPartition],
                       timestamp: int | dict[TopicPartition, int]) -> dict[TopicPartition, tuple[int, int]]:
    """ListOffsets with retries while leaders move (Kafka's retriable errors, bounded by request.timeout.ms)."""
    if not tps:
        return {}
    fetcher = Fetcher(cluster, config)
    deadline = time.monotonic() + config["request.timeout.ms"] / 1000
    while True:
        try:
            return await fetcher.list_offsets(tps, timestamp)
        except (KafkaError, KafkaConnectionError, RequestTimeoutError) as exc:
            retriable = getattr(exc, "retriable", True)
            if not retriable or time.monotonic() > deadline:
                raise
            log.debug("list offsets retried: %s", exc)
            await cluster.refresh_metadata([tp.topic for tp in tps])
            await asyncio.sleep(config["retry.backoff.ms"] / 1000)


async def resolve(cluster: Cluster, config: ClientConfig, spec: OffsetSpec, tps: list[TopicPartition], *,
                  option: str, strategy: str = "error") -> Offsets:
    """Concrete offsets for ``tps`` from a starting/ending spec (``option`` names it in errors).

    Timestamps resolve to the first offset at or after them; where none exists the ending side and the
    ``latest`` strategy take the latest offset, the default ``error`` strategy fails (Spark's behaviour).
    """
    if spec.kind in ("earliest", "latest"):
        got = await list_offsets(cluster, config, tps, EARLIEST if spec.kind == "earliest" else LATEST)
        return {tp: got[tp][0] for tp in tps}
    if spec.kind in ("timestamp", "timestamps"):
        if spec.kind == "timestamp":
            wanted: dict[TopicPartition, int] = dict.fromkeys(tps, spec.timestamp)
        else:
            wanted = _specific(spec, tps, option)
        found = await list_offsets(cluster, config, tps, wanted)
        missing = [tp for tp in tps if found[tp][0] < 0]
        if missing and option.startswith("starting") and strategy == "error":
            raise SourceOptionError(f"No offset matched the timestamp of {option} for "
                                    f"{', '.join(f'{t}-{p}' for t, p in missing)} (set "
                                    "startingOffsetsByTimestampStrategy=latest to start at the latest offset)")
        latest = await list_offsets(cluster, config, missing, LATEST) if missing else {}
        return {tp: latest[tp][0] if tp in latest else found[tp][0] for tp in tps}
    chosen = _specific(spec, tps, option)
    specials = {tp: o for tp, o in chosen.items() if o in (EARLIEST, LATEST)}
    out = dict(chosen)
    for special in (EARLIEST, LATEST):
        group = [tp for tp, o in specials.items() if o == special]
        got = await list_offsets(cluster, config, group, special)
        out.update({tp: got[tp][0] for tp in group})
    return out


def _specific(spec: OffsetSpec, tps: list[TopicPartition], option: str) -> dict[TopicPartition, int]:
    given = {TopicPartition(t, p): o for t, ps in spec.offsets.items() for p, o in ps.items()}
    missing = [tp for tp in tps if tp not in given]
    if missing:
        raise SourceOptionError(f"{option} must name every assigned partition when it lists specific ones; "
                                f"missing {', '.join(f'{t}-{p}' for t, p in missing)}")
    return {tp: given[tp] for tp in tps}


def data_loss(fail: bool, message: str) -> None:
    """Spark's failOnDataLoss: raise, or warn and go on."""
    if fail:
        raise DataLossError(message + ". Some data may have been lost because they are not available in the "
                            "cluster any more; either the data was aged out or deleted. If you don't want the "
                            "query to fail on such cases, set the source option 'failOnDataLoss' to 'false'.")
    log.warning("%s; skipping (failOnDataLoss=false)", message)


async def read_range(cluster: Cluster, config: ClientConfig, tp: TopicPartition, start: int, end: int, *,
                     fail_on_data_loss: bool) -> AsyncIterator[list[ConsumerRecord]]:
    """The records of [start, end) of one partition, in fetched chunks (compacted-away offsets are skipped)."""
    fetcher = Fetcher(cluster, config)
    states = {tp: PartitionState(position=start, fetch_offset=start)}
    st = states[tp]
    timeout_s = config["request.timeout.ms"] / 1000
    idle_since = time.monotonic()
    while st.fetch_offset is not None and st.fetch_offset < end:
        before = st.fetch_offset
        fetched, out_of_range = await fetcher.fetch(states)
        if tp in out_of_range:
            await _out_of_range(cluster, config, tp, st, end, fail_on_data_loss)
            continue
        records = decode_fetched(fetcher, tp, fetched[tp][1]) if tp in fetched else []
        if records:
            if records[0].offset > before and before == start:
                log.debug("%s-%d: first record at %d, asked %d (compacted)", tp.topic, tp.partition,
                          records[0].offset, before)
            if records[-1].offset >= end:
                records = [r for r in records if r.offset < end]
            if records:
                yield records
        if st.fetch_offset is not None and st.fetch_offset > before:
            idle_since = time.monotonic()
            continue
        if 0 <= st.high_watermark <= st.fetch_offset < end:
            # The log ends before the range does: records vanished (truncation, a shrunk log).
            data_loss(fail_on_data_loss, f"{tp.topic}-{tp.partition}: offsets [{st.fetch_offset}, {end}) "
                      f"are not in the log any more (it ends at {st.high_watermark})")
            return
        if time.monotonic() - idle_since > timeout_s:
            raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, f"fetch of {tp.topic}-{tp.partition} at {st.fetch_offset} made no progress "
                             f"for {timeout_s:.0f}s")


async def _out_of_range(cluster: Cluster, config: ClientConfig, tp: TopicPartition, st: PartitionState,
                        end: int, fail: bool) -> None:
    got = await list_offsets(cluster, config, [tp], EARLIEST)
    earliest = got[tp][0]
    offset = st.fetch_offset
    assert offset is not None
    if earliest > offset:
        data_loss(fail, f"{tp.topic}-{tp.partition}: offsets [{offset}, {min(earliest, end)}) were requested "
                  f"but the earliest available offset is {earliest}")
        st.seek(min(earliest, end))
        return
    latest = (await list_offsets(cluster, config, [tp], LATEST))[tp][0]
    data_loss(fail, f"{tp.topic}-{tp.partition}: offsets [{offset}, {end}) were requested but the log ends at "
              f"{latest}")
    st.seek(end)


def commit_to_group(kafka: Mapping[str, str], group: str, offsets: Offsets) -> None:
    """Commits a completed micro-batch's end offsets to ``group`` (a standalone commit: no group membership),
    so Kafka's group tools show the streaming query's position and lag."""
    from moldau.consumer import Consumer, OffsetAndMetadata

    async def main() -> None:
        consumer = Consumer({**kafka, "group.id": group, "enable.auto.commit": "false"})
        await consumer.start()
        try:
            consumer.assign(list(offsets))
            await consumer.commit({tp: OffsetAndMetadata(off) for tp, off in offsets.items()})
        finally:
            await consumer.close(autocommit=False)

    asyncio.run(main())
