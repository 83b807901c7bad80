"""The remote log manager's leader tasks and remote reads on real parts: a Log, a Partition, the filesystem
storage manager and the in-process metadata manager."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from moldau.broker.metadata import PartitionState
from moldau.broker.partition import Partition
from moldau.broker.remote_log_manager import RemoteLogManager, Throttle
from moldau.broker.remote_log_metadata import InMemoryRemoteLogMetadataManager
from moldau.protocol.errors import ErrorCode
from moldau.protocol.records import build_batch, iter_headers
from moldau.storage.config import LogConfig, ManualClock
from moldau.storage.errors import OffsetMovedToTieredStorageError
from moldau.storage.log import EARLIEST_LOCAL_TIMESTAMP, EARLIEST_TIMESTAMP, Log
from moldau.storage.remote.api import RemoteLogSegmentId, RemoteStorageError, SegmentState
from moldau.storage.remote.filesystem import FileSystemRemoteStorageManager
from moldau.storage.remote.segments import segment_data, segment_metadata

TP = ("t", 0)


def tiered_config(**overrides: int) -> LogConfig:
    cfg = LogConfig(segment_bytes=1024, index_interval_bytes=128, file_delete_delay_ms=0,
                    remote_storage_enable=True, local_retention_bytes=0, retention_ms=-1)
    for k, v in overrides.items():
        setattr(cfg, k, v)
    return cfg


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def partition(tmp_path: Path, clock: ManualClock) -> Iterator[Partition]:
    p = Partition("t", 0, 1, Log(tmp_path / "data" / "t-0", tiered_config(), clock))
    p.apply_state(PartitionState(0, 1, 3, [1], [1], zk_version=1), clock.time_ms())
    yield p
    p.log.close()


def produce(p: Partition, batches: int, records: int = 5) -> list[bytes]:
    sent = []
    for i in range(batches):
        data = build_batch([(None, b"v%d-%d" % (i, j) + b"x" * 40, [], 1000 + i) for j in range(records)])
        p.append_as_leader(bytearray(data))
        sent.append(data)
    p.maybe_advance_high_watermark()
    return sent


@pytest.fixture
def rlm(tmp_path: Path, partition: Partition, clock: ManualClock) -> Iterator[RemoteLogManager]:
    rsm = FileSystemRemoteStorageManager(tmp_path / "remote")
    rsm.configure({})
    manager = RemoteLogManager(1, rsm, InMemoryRemoteLogMetadataManager(), {TP: partition}, clock,
                               task_interval_ms=60_000, reader_threads=2, copy_bytes_per_second=1 << 40,
                               fetch_bytes_per_second=1 << 40)
    yield manager
    manager._readers.shutdown()
    manager._copier.shutdown()


def remote_files(tmp_path: Path) -> list[Path]:
    return sorted(p for p in (tmp_path / "remote").rglob("*.log"))


async def read_all_records(rlm: RemoteLogManager, p: Partition) -> list[int]:
    """Every offset, read remotely below the local log start and locally above, as a consumer would."""
    offsets: list[int] = []
    offset = p.log.log_start_offset
    while offset < p.high_watermark:
        try:
            data = p.log.read(offset, 300, max_offset=p.high_watermark).read()
        except OffsetMovedToTieredStorageError:
            result = await rlm.read("t", 0, offset, 300)
            assert result.error == ErrorCode.NONE
            data = result.records
        headers = [h for _, h in iter_headers(data)]
        assert headers, offset
        for h in headers:
            offsets += [o for o in range(h.base_offset, h.last_offset + 1) if o >= offset]
        offset = headers[-1].last_offset + 1
    return offsets


async def test_copies_rolled_segments_then_deletes_them_locally(rlm: RemoteLogManager, partition: Partition,
                                                                 tmp_path: Path) -> None:
    produce(partition, 40)
    rolled = partition.log.segments[:-1]
    assert len(rolled) >= 3
    await rlm.run_partition(TP, partition)
    cache = rlm.metadata.cache
    assert [(m.start_offset, m.end_offset) for m in cache.copied_segments(*TP)] == [
        (s.base_offset, s.next_offset - 1) for s in rolled]
    assert len(remote_files(tmp_path)) == len(rolled)
    # Local retention (0 bytes) removed every copied segment; the active one stays; the log still starts at 0.
    assert len(partition.log.segments) == 1
    assert partition.log.log_start_offset == 0
    assert partition.log.local_log_start_offset == rolled[-1].next_offset
    assert partition.log.offset_for_timestamp(EARLIEST_TIMESTAMP)[0] == 0  # type: ignore[index]
    assert partition.log.offset_for_timestamp(EARLIEST_LOCAL_TIMESTAMP)[0] == rolled[-1].next_offset  # type: ignore[index]
    with pytest.raises(OffsetMovedToTieredStorageError):
        partition.log.read(0, 1000)
    assert await read_all_records(rlm, partition) == list(range(partition.high_watermark))
    await rlm.run_partition(TP, partition)  # idempotent: nothing copied twice
    assert rlm.stats.copied_segments == len(rolled)


async def test_uncopied_segments_stay_local(rlm: RemoteLogManager, partition: Partition) -> None:
    produce(partition, 40)
    partition.log.delete_expired_segments(0)  # local.retention.bytes=0, but nothing is copied yet
    assert partition.log.local_log_start_offset == 0
    # Segments reaching above the high watermark are not copied either.
    first, second = partition.log.segments[:2]
    partition.high_watermark = second.base_offset + 1
    await rlm.run_partition(TP, partition)
    assert rlm.metadata.cache.highest_copied_offset(*TP) == first.next_offset - 1
    assert partition.log.local_log_start_offset == second.base_offset


async def test_a_dead_leaders_unfinished_copy_is_deleted(rlm: RemoteLogManager, partition: Partition,
                                                         tmp_path: Path) -> None:
    produce(partition, 40)
    log_ = partition.log
    seg = log_.segments[0]
    orphan = segment_metadata(log_, seg, broker_id=2, now_ms=0)
    await rlm.metadata.publish(orphan)
    rlm.rsm.copy_log_segment_data(orphan, segment_data(log_, seg))  # its objects got there, FINISHED did not
    await rlm.run_partition(TP, partition)
    ids = {m.segment_id for m in rlm.metadata.cache.segments(*TP)}
    assert orphan.segment_id not in ids
    assert all(m.state == SegmentState.COPY_SEGMENT_FINISHED for m in rlm.metadata.cache.segments(*TP))
    assert len(remote_files(tmp_path)) == len(rlm.metadata.cache.copied_segments(*TP))
    assert await read_all_records(rlm, partition) == list(range(partition.high_watermark))


async def test_remote_retention_by_bytes_moves_the_log_start(rlm: RemoteLogManager, partition: Partition,
                                                             tmp_path: Path) -> None:
    produce(partition, 40)
    await rlm.run_partition(TP, partition)
    chain = rlm.metadata.cache.copied_segments(*TP)
    partition.log.config.retention_bytes = sum(m.segment_size_in_bytes for m in chain[1:]) + \
        partition.log.active_segment.size
    await rlm.run_partition(TP, partition)
    assert [m.segment_id for m in rlm.metadata.cache.copied_segments(*TP)] == [m.segment_id for m in chain[1:]]
    assert partition.log.log_start_offset == chain[1].start_offset
    assert len(remote_files(tmp_path)) == len(chain) - 1
    assert (await rlm.read("t", 0, 0, 100)).error == ErrorCode.OFFSET_OUT_OF_RANGE  # below the log start


async def test_remote_retention_by_time_and_delete_records(rlm: RemoteLogManager, partition: Partition,
                                                           clock: ManualClock) -> None:
    produce(partition, 40)
    await rlm.run_partition(TP, partition)
    chain = rlm.metadata.cache.copied_segments(*TP)
    partition.advance_log_start_offset(chain[1].start_offset + 1)  # DeleteRecords inside the second segment
    await rlm.run_partition(TP, partition)
    assert rlm.metadata.cache.copied_segments(*TP)[0].segment_id == chain[1].segment_id
    partition.log.config.retention_ms = clock.time_ms() - 1100  # record timestamps are 1000 + i, i < 40
    await rlm.run_partition(TP, partition)
    assert rlm.metadata.cache.copied_segments(*TP) == []
    assert partition.log.log_start_offset == partition.log.local_log_start_offset


async def test_a_failed_copy_is_retried_under_a_new_id(rlm: RemoteLogManager, partition: Partition,
                                                       tmp_path: Path) -> None:
    produce(partition, 40)
    rsm = rlm.rsm
    assert isinstance(rsm, FileSystemRemoteStorageManager)
    root, rsm.root = rsm.root, tmp_path / "not-a-dir"
    rsm.root.write_bytes(b"")  # the store is unusable: every copy fails with an OSError
    with pytest.raises(RemoteStorageError):
        await rlm.run_partition(TP, partition)
    rsm.root = root
    assert rlm.metadata.cache.unfinished_segments(*TP)
    assert partition.log.local_log_start_offset == 0  # nothing deleted locally while uncopied
    await rlm.run_partition(TP, partition)
    assert rlm.metadata.cache.unfinished_segments(*TP) == []
    assert await read_all_records(rlm, partition) == list(range(partition.high_watermark))


def test_throttle() -> None:
    t = Throttle(1000)
    assert t.delay(500, now=10.0) == 0
    assert t.delay(500, now=10.0) == pytest.approx(0.5)
    assert t.delay(1000, now=12.0) == 0  # idle time is not saved up beyond now


def test_remote_segment_ids_are_unique() -> None:
    assert RemoteLogSegmentId.generate("t", 0) != RemoteLogSegmentId.generate("t", 0)


async def test_metrics(rlm: RemoteLogManager, partition: Partition) -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from moldau.broker.remote_log_metrics import RemoteLogCollector

    registry = CollectorRegistry()
    registry.register(RemoteLogCollector(rlm))
    produce(partition, 40)
    waiting = len(partition.log.segments) - 1
    text = generate_latest(registry).decode()
    assert f'moldau_remote_copy_lag_segments{{partition="0",topic="t"}} {float(waiting)}' in text
    await rlm.run_partition(TP, partition)
    await rlm.read("t", 0, 0, 100)
    text = generate_latest(registry).decode()
    assert f"moldau_remote_copy_segments_total {float(waiting)}" in text
    assert 'moldau_remote_copy_lag_segments{partition="0",topic="t"} 0.0' in text
    assert "moldau_remote_fetch_latency_seconds_count 1.0" in text
    assert "moldau_remote_fetch_bytes_total 0.0" not in text


async def test_a_lagging_log_start_is_raised_to_the_remote_log_start(rlm: RemoteLogManager,
                                                                     partition: Partition) -> None:
    produce(partition, 40)
    await rlm.run_partition(TP, partition)
    chain = rlm.metadata.cache.copied_segments(*TP)
    await rlm._delete_remote(chain[0])  # deleted by retention, but the checkpointed log start did not follow
    rlm._synced.clear()  # as after a restart or a new leadership
    await rlm.run_partition(TP, partition)
    assert partition.log.log_start_offset == chain[1].start_offset


async def test_a_read_given_up_on_is_joined_by_the_next_fetch(rlm: RemoteLogManager, partition: Partition) -> None:
    """A store that hangs: the fetch stops waiting (cancelled), the read goes on; the next fetch of the position
    takes that read's answer (here the store's error) instead of starting another read that would be given up
    on in turn, so the client sees KAFKA_STORAGE_ERROR instead of empty answers forever."""
    import asyncio
    import threading

    produce(partition, 40)
    await rlm.run_partition(TP, partition)
    rsm = rlm.rsm
    assert isinstance(rsm, FileSystemRemoteStorageManager)
    release, calls = threading.Event(), []

    def hanging_fetch(*args: object, **kwargs: object) -> bytes:
        calls.append(args)
        release.wait(10)
        raise RemoteStorageError("the store timed out")

    rsm.fetch_log_segment = hanging_fetch  # type: ignore[method-assign]
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(rlm.read("t", 0, 0, 1000), 0.2)
    release.set()
    result = await asyncio.wait_for(rlm.read("t", 0, 0, 1000), 5)
    assert result.error == ErrorCode.KAFKA_STORAGE_ERROR
    assert len(calls) == 1  # one read, joined
    release.clear()
    with pytest.raises(TimeoutError):  # taken: the next fetch reads again
        await asyncio.wait_for(rlm.read("t", 0, 0, 1000), 0.2)
    assert len(calls) == 2
    release.set()


async def test_read_committed_remote_reads_fetch_each_transaction_index_once(rlm: RemoteLogManager,
                                                                             partition: Partition) -> None:
    """Without transactions the aborted-transaction search of a read_committed remote read runs over every later
    segment's .txnindex; a catch-up read fetched them all from the store for every fetch (quadratic: a 50 MB
    catch-up over moto's S3 server read at 1 MB/s). Now each is fetched once."""
    from moldau.storage.remote.api import IndexType

    produce(partition, 40)
    await rlm.run_partition(TP, partition)
    chain = rlm.metadata.cache.copied_segments(*TP)
    assert len(chain) >= 4
    rsm = rlm.rsm
    assert isinstance(rsm, FileSystemRemoteStorageManager)
    fetched: list[object] = []
    fetch_index = rsm.fetch_index

    def counting(metadata: object, index_type: IndexType) -> bytes:
        if index_type == IndexType.TRANSACTION:
            fetched.append(metadata)
        return fetch_index(metadata, index_type)  # type: ignore[arg-type]

    rsm.fetch_index = counting  # type: ignore[method-assign]
    for m in chain:
        result = await rlm.read("t", 0, m.start_offset, 1 << 20, read_committed=True)
        assert result.error == ErrorCode.NONE and result.records and result.aborted == []
    assert len(fetched) == len(chain)


async def test_a_remote_read_reads_ahead_the_next_position(rlm: RemoteLogManager, partition: Partition) -> None:
    """A catch-up consumer's next fetch finds the following chunk already read: each remote read starts the one
    after it (only while that is still below the local log start)."""
    import asyncio

    produce(partition, 40)
    await rlm.run_partition(TP, partition)
    chain = rlm.metadata.cache.copied_segments(*TP)
    rsm = rlm.rsm
    assert isinstance(rsm, FileSystemRemoteStorageManager)
    fetched: list[int] = []
    fetch = rsm.fetch_log_segment

    def counting(metadata: Any, start: int, end: int | None = None) -> bytes:
        fetched.append(metadata.start_offset)
        return fetch(metadata, start, end)

    rsm.fetch_log_segment = counting  # type: ignore[method-assign]
    size = chain[0].segment_size_in_bytes  # a read of exactly the first segment: the next one starts chain[1]
    first = await rlm.read("t", 0, chain[0].start_offset, size)
    assert len(first.records) == size
    for _ in range(250):  # bounded: the read-ahead runs on the reader threads
        if len(fetched) >= 2:
            break
        await asyncio.sleep(0.02)
    assert fetched[:2] == [chain[0].start_offset, chain[1].start_offset]
    second = await rlm.read("t", 0, chain[1].start_offset, size)
    assert second.records and fetched.count(chain[1].start_offset) == 1  # taken, not read again
    last = await rlm.read("t", 0, chain[-1].start_offset, 1 << 20)
    assert last.records and chain[-1].end_offset + 1 == partition.log.local_log_start_offset
    assert not [key for key in rlm._reads if key[2] > chain[-1].start_offset]  # nothing past the remote part


async def test_a_clean_restart_leaves_copied_segments_unopened(rlm: RemoteLogManager, partition: Partition,
                                                               tmp_path: Path, clock: ManualClock) -> None:
    """Tiering's copy loop and copy-lag gauge skip copied segments by the next segment's base offset: after a
    clean restart (segments opened on first use) they open none of them."""
    keep_local = tiered_config(local_retention_bytes=-1)
    partition.log.config = keep_local
    produce(partition, 40)
    await rlm.run_partition(TP, partition)
    rolled = len(partition.log.segments) - 1
    assert rolled >= 3 and rlm.stats.copied_segments == rolled
    partition.log.close(flush=True)

    again = Partition("t", 0, 1, Log(tmp_path / "data" / "t-0", keep_local, clock, clean_shutdown=True))
    again.apply_state(PartitionState(0, 1, 3, [1], [1], zk_version=1), clock.time_ms())
    rlm.partitions[TP] = again
    try:
        assert not any(s.loaded for s in again.log.segments[:-1])
        await rlm.run_partition(TP, again)
        assert rlm.stats.copied_segments == rolled  # nothing copied twice
        assert rlm.copy_lag() == [("t", 0, 0, 0)]
        assert not any(s.loaded for s in again.log.segments[:-1])
        assert len(again.log.segments) - 1 == rolled  # local copies kept (local retention off)
    finally:
        again.log.close()


async def test_a_remote_read_spans_segments_up_to_max_bytes(rlm: RemoteLogManager, partition: Partition) -> None:
    """As a local read: a fetch over small remote segments gets batches from as many consecutive segments as
    max_bytes allows (one segment's worth per round trip made a catch-up consumer of 1 MiB segments wait a
    round trip per MiB), whole batches only, at most max_bytes, offsets contiguous; the first batch comes even
    when larger than max_bytes, a later one never does."""
    produce(partition, 40)
    await rlm.run_partition(TP, partition)
    chain = rlm.metadata.cache.copied_segments(*TP)
    assert len(chain) >= 6 and all(m.segment_size_in_bytes < 1024 for m in chain)
    result = await rlm.read("t", 0, chain[0].start_offset, 2500)
    assert result.error == ErrorCode.NONE
    headers = [h for _, h in iter_headers(result.records)]
    assert sum(h.total_size for h in headers) == len(result.records) <= 2500
    assert headers[0].base_offset == chain[0].start_offset
    assert all(b.base_offset == a.last_offset + 1 for a, b in zip(headers, headers[1:], strict=False))
    spanned = [m for m in chain if m.start_offset <= headers[-1].last_offset]
    assert len(spanned) >= 3  # more than two segments of < 1 KB each in one read
    # The next batch would not have fit: a full read, not one cut short.
    nxt = chain[len(spanned) - 1] if headers[-1].last_offset < spanned[-1].end_offset else chain[len(spanned)]
    rest = await rlm.read("t", 0, headers[-1].last_offset + 1, 1)
    assert rest.records and nxt.start_offset <= headers[-1].last_offset + 1 <= nxt.end_offset
    assert len(result.records) + [h for _, h in iter_headers(rest.records)][0].total_size > 2500
    one = await rlm.read("t", 0, chain[0].start_offset, 1)  # min one: the first batch whatever max_bytes says
    assert [h.base_offset for _, h in iter_headers(one.records)] == [chain[0].start_offset]


class _SlowReplay(InMemoryRemoteLogMetadataManager):
    """The in-process metadata manager whose replay, once ``behind``, is never done: counts the waits for it."""

    def __init__(self) -> None:
        super().__init__()
        self.behind = False
        self.waits = 0

    async def wait_caught_up(self, topic: str, partition: int, timeout_s: float = 30.0) -> bool:
        if not self.behind:
            return True
        self.waits += 1
        return False


async def test_a_remote_read_waits_for_the_metadata_replay_only_to_say_nothing_is_there(
        tmp_path: Path, partition: Partition, clock: ManualClock) -> None:
    """A first catch-up read of a segment the metadata already names is read at once (waiting for the replay's
    end cost it ~0.25 s: the end-offsets request queued behind the metadata consumer's long poll); an offset no
    segment holds waits for the replay first, so "out of range" is never said on a metadata replay still behind
    (here it never ends: an empty answer, fetch again)."""
    rsm = FileSystemRemoteStorageManager(tmp_path / "remote")
    rsm.configure({})
    metadata = _SlowReplay()
    manager = RemoteLogManager(1, rsm, metadata, {TP: partition}, clock, task_interval_ms=60_000,
                               reader_threads=2, copy_bytes_per_second=1 << 40, fetch_bytes_per_second=1 << 40)
    try:
        produce(partition, 40)
        await manager.run_partition(TP, partition)
        chain = metadata.cache.copied_segments(*TP)
        assert chain
        metadata.behind = True
        found = await manager.read("t", 0, chain[0].start_offset, 1 << 20)
        assert found.error == ErrorCode.NONE and found.records and metadata.waits == 0
        # Past every segment the metadata names (as one a replay has not reached yet would be): wait first.
        missing = await manager.read("t", 0, chain[-1].end_offset + 1, 1 << 20)
        assert missing.error == ErrorCode.NONE and not missing.records and metadata.waits == 1
    finally:
        manager._readers.shutdown()
        manager._copier.shutdown()


async def test_a_remote_read_spans_at_most_a_bounded_number_of_segments(rlm: RemoteLogManager,
                                                                       partition: Partition) -> None:
    """Each segment of a read is a store call made one after the other, and the fetch waits for them all: a read
    over tiny segments stops after MAX_SPAN_SEGMENTS of them, however much max_bytes allows."""
    from moldau.storage.remote.reader import MAX_SPAN_SEGMENTS

    produce(partition, 3 * MAX_SPAN_SEGMENTS + 10)
    await rlm.run_partition(TP, partition)
    chain = rlm.metadata.cache.copied_segments(*TP)
    assert len(chain) > MAX_SPAN_SEGMENTS + 1
    result = await rlm.read("t", 0, chain[0].start_offset, 1 << 20)
    last = [h for _, h in iter_headers(result.records)][-1].last_offset
    assert last == chain[MAX_SPAN_SEGMENTS - 1].end_offset
