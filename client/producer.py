"""The asyncio producer: per-partition accumulators, a sender task, idempotence with ordered retries.

``await producer.send(...)`` appends the record to its partition's open batch and returns a future for its
:class:`RecordMetadata` at once; the sender task drains batches that are full, lingered ``linger.ms`` or being
flushed, and sends one Produce request per leader carrying all of that broker's ready batches. Batches are
encoded once (``moldau.protocol.records.build_batch``), when first drained, so a retry resends the same bytes and
the same sequence numbers; the broker's duplicate detection makes that safe under idempotence.

Ordering under idempotence (``max.in.flight.requests.per.connection`` <= 5): when a batch fails retriably, it goes
back to the front of its partition's queue and the partition is muted until every in-flight batch of it has come
back; the failed batches are then resent in sequence order. An OUT_OF_ORDER_SEQUENCE_NUMBER for a batch that does
not directly follow the partition's last acknowledged sequence (an earlier batch is still in flight or being
retried) is retried the same way. When a batch whose sequence was assigned fails for good (delivery.timeout.ms,
retries, a non-retriable error), its sequence leaves a gap the broker would refuse every later batch for, so, as
Kafka's producer does (KIP-360), the partition holds its batches until nothing of it is in flight, the producer
bumps its epoch (InitProducerId with its producer id and epoch, v3+; a new producer id from older brokers) and the
partition's sequences restart at 0 under the new epoch. The failed batch's records stay failed; batches refused
with OUT_OF_ORDER_SEQUENCE_NUMBER (not written) are re-sequenced, others still awaiting a retry are in doubt and
fail rather than be re-sent under the new epoch. Other partitions adopt the new epoch when they have nothing in
flight.
"""

from __future__ import annotations

import asyncio
import logging
import time
from bisect import bisect_right
from collections import deque
from collections.abc import Iterable, Mapping
from itertools import accumulate
from typing import TYPE_CHECKING, Any

from moldau.batch_builder import Record, encode_batch
from moldau.cluster import STALE_METADATA_ERRORS, Cluster
from moldau.config import ClientConfig, producer_config
from moldau.errors import ClientError, ConfigError, KafkaError, RequestTimeoutError
from moldau.partitioner import StickyPartitioner, partition_for_key
from moldau.producer_records import RECORD_OVERHEAD as _RECORD_OVERHEAD
from moldau.producer_records import Batch as _Batch
from moldau.producer_records import Headers, RecordMetadata
from moldau.producer_records import encode_headers as _headers
from moldau.producer_records import to_bytes as _to_bytes
from moldau.producer_txn import TransactionalApi
from moldau.protocol.compression import Codec
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.init_producer_id import INIT_PRODUCER_ID
from moldau.protocol.messages.produce import PRODUCE
from moldau.tasks import cancel_and_wait
from moldau.transaction_manager import TransactionManager

if TYPE_CHECKING:  # the message shapes are for mypy only: zero cost at run time
    from moldau.protocol.typed import (
        InitProducerIdRequest,
        ProduceRequest,
        ProduceRequestTopicDataPartitionData,
        ProduceResponseResponsesPartitionResponses,
    )

__all__ = ["Producer", "RecordMetadata", "Headers"]

log = logging.getLogger("moldau.client.producer")
_SEQ_MOD = 1 << 31

class Producer(TransactionalApi):
    """Asynchronous producer. ``async with Producer(bootstrap_servers=...) as p: fut = await p.send(...)``."""

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self.config: ClientConfig = producer_config(config, **kwargs)
        c = self.config
        self._acks = -1 if c["acks"] in ("all", "-1") else int(c["acks"])
        self._idempotent = self._resolve_idempotence()
        self._linger_s = c["linger.ms"] / 1000
        self._batch_size = max(c["batch.size"], 1)
        self._codec = int(Codec.from_name(c["compression.type"]))
        self._max_in_flight = c["max.in.flight.requests.per.connection"]
        self._retries = c["retries"]
        self._delivery_timeout_s = c["delivery.timeout.ms"] / 1000
        self._request_timeout_ms = c["request.timeout.ms"]
        self._buffer_memory = c["buffer.memory"]
        self._max_block_s = c["max.block.ms"] / 1000
        self._max_request_size = c["max.request.size"]
        self._ignore_keys = c["partitioner.ignore.keys"]
        self._key_ser = c["key.serializer"]
        self._value_ser = c["value.serializer"]
        self._cluster = Cluster(c)
        self._sticky = StickyPartitioner()
        self._queues: dict[tuple[str, int], deque[_Batch]] = {}
        self._parts_cache: dict[str, tuple[int, list[int]]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._inflight_tp: dict[tuple[str, int], int] = {}
        self._inflight_node: dict[int, int] = {}
        self._retrying: set[tuple[str, int]] = set()
        self._next_seq: dict[tuple[str, int], int] = {}
        self._last_acked: dict[tuple[str, int], int] = {}  # last acknowledged sequence under _tp_ids
        self._tp_ids: dict[tuple[str, int], tuple[int, int]] = {}  # (producer id, epoch) of the partition's sequences
        self._reset_pending: set[tuple[str, int]] = set()  # a batch failed for good: sequences restart at 0
        self._bump: asyncio.Task[None] | None = None
        self._producer_id = -1
        self._producer_epoch = -1
        self._buffered = 0
        self._space_waiters: deque[asyncio.Future[None]] = deque()
        self._wake = asyncio.Event()
        self._flushing = 0
        self._sender: asyncio.Task[None] | None = None
        self._requests: set[asyncio.Task[None]] = set()
        self._started = False
        self._closed = False
        self._txn: TransactionManager | None = None
        if c["transactional.id"] is not None:
            self._txn = TransactionManager(self._cluster, c, self._wake.set, self._fail_partitions)

    def _resolve_idempotence(self) -> bool:
        """Kafka's rule: idempotence is on by default, silently off when acks/in-flight/retries conflict with it
        unless the user asked for it explicitly (then the conflict is an error naming the key)."""
        c = self.config
        explicit = "enable.idempotence" in c.explicit or c["transactional.id"] is not None
        if not c["enable.idempotence"]:
            if c["transactional.id"] is not None:
                raise ConfigError("enable.idempotence", "must be true when transactional.id is set")
            return False
        conflicts = []
        if self._acks != -1:
            conflicts.append(("acks", "must be all (-1) when enable.idempotence=true"))
        if c["max.in.flight.requests.per.connection"] > 5:
            conflicts.append(("max.in.flight.requests.per.connection", "must be <= 5 when enable.idempotence=true"))
        if c["retries"] == 0:
            conflicts.append(("retries", "must be > 0 when enable.idempotence=true"))
        if conflicts and explicit:
            raise ConfigError(*conflicts[0])
        return not conflicts

    @property
    def idempotent(self) -> bool:
        return self._idempotent

    @property
    def cluster(self) -> Cluster:
        return self._cluster

    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Connects (bootstrap), gets a producer id when idempotent and starts the sender task."""
        if self._started:
            return
        await self._cluster.start()
        if self._idempotent and self._txn is None:
            await self._init_producer_id()
        self._loop = asyncio.get_running_loop()
        self._sender = self._loop.create_task(self._send_loop())
        self._started = True

    async def _init_producer_id(self, bump: bool = False) -> None:
        """A producer id, or (``bump``) a new epoch of the current one (KIP-360, InitProducerId v3+; older brokers
        give a new producer id)."""
        conn = await self._cluster.any_connection()
        body: InitProducerIdRequest = {"transactional_id": None, "transaction_timeout_ms": 60000}
        if bump and conn.version_for(INIT_PRODUCER_ID) >= 3:
            body["producer_id"], body["producer_epoch"] = self._producer_id, self._producer_epoch
        response = await conn.send(INIT_PRODUCER_ID, body)
        if response["error_code"]:
            raise KafkaError(response["error_code"], "InitProducerId failed")
        self._producer_id = response["producer_id"]
        self._producer_epoch = response["producer_epoch"]
        log.debug("producer id %d epoch %d", self._producer_id, self._producer_epoch)

    # ------------------------------------------------------------------ appending
    async def send(self, topic: str, value: Any = None, key: Any = None, *, partition: int | None = None,
                   timestamp_ms: int | None = None, headers: Headers = None) -> asyncio.Future[RecordMetadata]:
        """Queues one record; returns a future for its metadata without waiting for the broker."""
        future = self.send_nowait(topic, value, key, partition=partition, timestamp_ms=timestamp_ms,
                                  headers=headers)
        if future is not None:
            if self._wake.is_set():  # a batch is ready: let the sender ship it while the broker works in parallel
                await asyncio.sleep(0)
            return future
        # Slow path: topic metadata unknown or buffer.memory full.
        await self._partitions(topic)
        while True:
            future = self.send_nowait(topic, value, key, partition=partition, timestamp_ms=timestamp_ms,
                                      headers=headers)
            if future is not None:
                return future
            await self._wait_for_space(self._record_size(key, value, headers))

    def _record_size(self, key: Any, value: Any, headers: Headers) -> int:
        return _RECORD_OVERHEAD + len(key or b"") + len(value or b"") + \
            sum(len(k) + len(v or b"") + 2 for k, v in _headers(headers))

    def send_nowait(self, topic: str, value: Any = None, key: Any = None, *, partition: int | None = None,
                    timestamp_ms: int | None = None, headers: Headers = None) -> asyncio.Future[RecordMetadata] | None:
        """Appends the record if that needs no waiting (topic metadata known, room in buffer.memory) and returns
        its future; None when the caller must wait (``send()`` does). Call it on the producer's loop."""
        return self._try_append(topic, value, key, partition, timestamp_ms, headers, True)[1]

    def append_nowait(self, topic: str, value: Any = None, key: Any = None, *, partition: int | None = None,
                      timestamp_ms: int | None = None, headers: Headers = None) -> bool:
        """Like :meth:`send_nowait` without a per-record future (a failed batch is logged): True if appended."""
        return self._try_append(topic, value, key, partition, timestamp_ms, headers, False)[0]

    def _try_append(self, topic: str, value: Any, key: Any, partition: int | None, timestamp_ms: int | None,
                    headers: Headers, want_future: bool) -> tuple[bool, asyncio.Future[RecordMetadata] | None]:
        if self._closed or not self._started:
            raise ClientError("producer is closed" if self._closed else "producer not started; await start()")
        if self._txn is not None and not self._txn.in_transaction:
            self._txn.check_can_send()
        kb = key if type(key) is bytes or key is None and not self._key_ser else \
            _to_bytes(self._key_ser(key) if self._key_ser else key, "key")
        vb = value if type(value) is bytes and not self._value_ser else \
            _to_bytes(self._value_ser(value) if self._value_ser else value, "value")
        hdrs = _headers(headers) if headers else None
        size = _RECORD_OVERHEAD + (len(kb) if kb else 0) + (len(vb) if vb else 0)
        if hdrs:
            size += sum(len(k) + len(v or b"") + 2 for k, v in hdrs)
        if size > self._max_request_size:
            raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE,
                             f"record of {size} bytes exceeds max.request.size {self._max_request_size}")
        cached = self._parts_cache.get(topic)
        if cached is None or cached[0] != self._cluster.metadata_version:
            parts = self._cluster.partitions_for(topic)
            if parts is None:
                return False, None
            self._parts_cache[topic] = cached = (self._cluster.metadata_version, parts)
        if self._buffered + size > self._buffer_memory and self._buffered > 0:
            return False, None
        parts = cached[1]
        if partition is not None:
            if partition not in parts:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"{topic} has no partition {partition} (it has {len(parts)})")
            part = partition
        elif kb is not None and not self._ignore_keys:
            part = partition_for_key(kb, len(parts))
        else:
            part = self._sticky.partition(topic, self._cluster.available_partitions_for(topic), parts)
        ts = timestamp_ms if timestamp_ms is not None else int(time.time() * 1000)
        future: asyncio.Future[RecordMetadata] | None = None
        if want_future:
            future = (self._loop or asyncio.get_running_loop()).create_future()
        self._append(topic, part, (kb, vb, hdrs, ts), size, future, keyless=kb is None and partition is None)
        return True, future

    async def send_many(self, topic: str, values: Iterable[Any], *, keys: Iterable[Any] | None = None,
                        partition: int | None = None) -> asyncio.Future[int]:
        """Fast path: queues many records (no per-record futures); the future gives the count once all are
        acknowledged, or the first delivery error."""
        if self._closed or not self._started:
            raise ClientError("producer is closed" if self._closed else "producer not started; await start()")
        if self._txn is not None:
            self._txn.check_can_send()
        parts = await self._partitions(topic)
        if partition is not None and partition not in parts:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic} has no partition {partition}")
        ts = int(time.time() * 1000)
        batches: dict[int, _Batch] = {}
        if partition is not None and keys is None and self._value_ser is None:
            count = await self._append_values(topic, partition, values, ts, batches)
            return asyncio.ensure_future(self._await_batches(list(batches.values()), count))
        count = 0
        key_iter = iter(keys) if keys is not None else None
        for value in values:
            vb = _to_bytes(self._value_ser(value) if self._value_ser else value, "value")
            kb = _to_bytes(next(key_iter), "key") if key_iter is not None else None
            size = _RECORD_OVERHEAD + (len(vb) if vb else 0) + (len(kb) if kb else 0)
            if partition is not None:
                part = partition
            elif kb is not None:
                part = partition_for_key(kb, len(parts))
            else:
                part = self._sticky.partition(topic, self._cluster.available_partitions_for(topic), parts)
            if self._buffered + size > self._buffer_memory:
                await self._wait_for_space(size)
            batch = self._append(topic, part, (kb, vb, None, ts), size, None, keyless=kb is None and partition is None)
            batches[id(batch)] = batch
            count += 1
            if not batch.open:
                await asyncio.sleep(0)  # a batch filled: let the sender ship it
        return asyncio.ensure_future(self._await_batches(list(batches.values()), count))

    async def send_many_partitions(self, topic: str, values: Mapping[int, Iterable[Any]]) -> asyncio.Future[int]:
        """``send_many`` for many partitions of one topic in one call: ``values`` maps each partition to its
        records' values (no keys). Every partition's records are queued before the sender runs, so it sends one
        request per leader with all of them; the future gives the total count once all are acknowledged, or the
        first delivery error. Over 10,000 partitions a ``send_many`` per partition made the caller, not the
        brokers, the limit (docs/benchmarks.md)."""
        if self._closed or not self._started:
            raise ClientError("producer is closed" if self._closed else "producer not started; await start()")
        if self._txn is not None:
            self._txn.check_can_send()
        parts = set(await self._partitions(topic))
        unknown = sorted(p for p in values if p not in parts)
        if unknown:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"{topic} has no partition {', '.join(map(str, unknown[:5]))}")
        ts = int(time.time() * 1000)
        batches: dict[int, _Batch] = {}
        count = 0
        for partition, records in values.items():
            if self._value_ser is not None:
                records = [self._value_ser(v) for v in records]
            count += await self._append_values(topic, partition, records, ts, batches)
        return asyncio.ensure_future(self._await_batches(list(batches.values()), count))

    async def _append_values(self, topic: str, partition: int, values: Iterable[Any], ts: int,
                             batches: dict[int, _Batch]) -> int:
        """send_many's bulk path (one partition, values only): fills whole batches per step, not per record."""
        recs = [(None, v if type(v) is bytes else _to_bytes(v, "value"), None, ts) for v in values]
        sizes = [_RECORD_OVERHEAD + (len(r[1]) if r[1] is not None else 0) for r in recs]
        ends = list(accumulate(sizes, initial=0))  # ends[i]: the size of recs[:i]
        n = len(recs)
        start = 0
        while start < n:
            batch = self._append(topic, partition, recs[start], sizes[start], None, keyless=False)
            batches[id(batch)] = batch
            start += 1
            # The records after it that fit in the batch's room, found by bisection rather than one by one.
            end = bisect_right(ends, ends[start] + self._batch_size - batch.size, start, n + 1) - 1 \
                if batch.open else start
            if end > start:
                added = ends[end] - ends[start]
                batch.records.extend(recs[start:end])
                batch.size += added
                self._buffered += added
                start = end
            if batch.size >= self._batch_size or (start < n and batch.open):
                self._close_batch(batch, keyless=False)
                await asyncio.sleep(0)  # let the sender ship the full batch
            if self._buffered > self._buffer_memory and start < n:
                await self._wait_for_space(sizes[start])
        return n

    @staticmethod
    async def _await_batches(batches: list[_Batch], count: int) -> int:
        await asyncio.gather(*(b.done for b in batches))
        for b in batches:
            if b.error is not None:
                raise b.error
        return count

    async def _partitions(self, topic: str) -> list[int]:
        cached = self._parts_cache.get(topic)
        if cached is not None and cached[0] == self._cluster.metadata_version:
            return cached[1]
        parts = self._cluster.partitions_for(topic)
        if parts is None:
            self._cluster.add_topics([topic])
            parts = await self._cluster.wait_for_topic(topic, self._max_block_s)
        self._parts_cache[topic] = (self._cluster.metadata_version, parts)
        return parts

    def _append(self, topic: str, partition: int, record: Record, size: int,
                future: asyncio.Future[RecordMetadata] | None, keyless: bool) -> _Batch:
        tp = (topic, partition)
        queue = self._queues.get(tp)
        if queue is None:
            queue = self._queues[tp] = deque()
        batch = queue[-1] if queue and queue[-1].open else None
        if batch is None or (batch.size + size > self._batch_size and batch.records):
            if batch is not None:
                self._close_batch(batch, keyless)
            batch = _Batch(topic, partition, time.monotonic(), [], [],
                           (self._loop or asyncio.get_running_loop()).create_future())
            queue.append(batch)
        if future is not None:
            batch.futures.append((len(batch.records), future))
        batch.records.append(record)
        batch.size += size
        self._buffered += size
        if batch.size >= self._batch_size:
            self._close_batch(batch, keyless)
        elif self._linger_s == 0 or len(queue) == 1 and len(batch.records) == 1:
            self._wake.set()  # the sender computes the linger deadline of a new batch
        return batch

    def _close_batch(self, batch: _Batch, keyless: bool) -> None:
        batch.open = False
        self._wake.set()
        if keyless:
            parts = self._cluster.available_partitions_for(batch.topic) or \
                self._cluster.partitions_for(batch.topic) or []
            self._sticky.batch_done(batch.topic, batch.partition, parts)

    async def _wait_for_space(self, size: int) -> None:
        """buffer.memory back-pressure: blocks up to max.block.ms until sent batches free enough room."""
        deadline = time.monotonic() + self._max_block_s
        while self._buffered + size > self._buffer_memory and self._buffered > 0:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._space_waiters.append(waiter)
            self._wake.set()
            try:
                async with asyncio.timeout(max(deadline - time.monotonic(), 0)):
                    await waiter
            except TimeoutError:
                raise KafkaError(ErrorCode.REQUEST_TIMED_OUT,
                                 f"buffer.memory full for max.block.ms ({self._max_block_s * 1000:.0f} ms)") from None

    def _release(self, size: int) -> None:
        self._buffered -= size
        while self._space_waiters:
            w = self._space_waiters.popleft()
            if not w.done():
                w.set_result(None)

    # ------------------------------------------------------------------ flush / close
    async def flush(self, timeout: float | None = None) -> None:
        """Sends everything queued and waits for every batch's outcome (errors go to the record futures)."""
        pending = [b.done for q in self._queues.values() for b in q]
        pending += [t for t in self._requests]
        if not pending:
            return
        self._flushing += 1
        self._wake.set()
        try:
            async with asyncio.timeout(timeout):
                await asyncio.gather(*pending, return_exceptions=True)
        finally:
            self._flushing -= 1

    async def close(self, timeout: float | None = None) -> None:
        """Flushes, stops the sender and closes the connections. Idempotent."""
        if self._closed:
            return
        try:
            if self._started:
                await self.flush(timeout)
        finally:
            self._closed = True
            await cancel_and_wait([t for t in (self._sender, self._bump) if t is not None])
            if self._txn is not None:
                await self._txn.close()
            self._fail_all(ClientError("producer closed before the record was sent"))
            await self._cluster.close()

    def _fail_all(self, error: BaseException) -> None:
        for queue in self._queues.values():
            while queue:
                self._complete(queue.popleft(), error=error)

    # ------------------------------------------------------------------ sending
    async def _send_loop(self) -> None:
        while True:
            timeout = self._drain()
            try:
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()

    def _drain(self) -> float | None:
        """Starts one Produce request per leader with its ready batches; returns seconds until the next
        linger deadline (None: nothing queued)."""
        now = time.monotonic()
        per_node: dict[int, list[_Batch]] = {}
        node_bytes: dict[int, int] = {}
        next_due: float | None = None
        force = self._flushing > 0 or bool(self._space_waiters) or self._closed
        emptied: list[tuple[str, int]] = []
        for tp, queue in self._queues.items():
            if not queue:
                emptied.append(tp)
                continue
            batch = queue[0]
            if now - batch.created > self._delivery_timeout_s and batch.data is None:
                queue.popleft()
                self._complete(batch, error=KafkaError(ErrorCode.REQUEST_TIMED_OUT, "expired: delivery.timeout.ms "
                                                       f"({self._delivery_timeout_s * 1000:.0f} ms) passed"))
                continue
            ready = not batch.open or force or now - batch.created >= self._linger_s
            if not ready:
                due = batch.created + self._linger_s - now
                next_due = due if next_due is None else min(next_due, due)
                continue
            if self._txn is not None and not self._txn.partition_ready(tp):
                continue  # AddPartitionsToTxn first; its answer wakes the sender
            inflight = self._inflight_tp.get(tp, 0)
            if (tp in self._retrying and inflight) or inflight >= self._max_in_flight:
                continue
            if self._idempotent and self._txn is None:
                if tp in self._reset_pending:
                    if inflight or not self._reset_sequences(tp):
                        continue
                    if not queue:
                        continue
                    batch = queue[0]
                elif batch.data is None and inflight and self._tp_ids.get(tp, self._ids()) != self._ids():
                    continue  # the epoch changed: its old-epoch batches come back first, then sequences restart
            leader = self._cluster.leader_for(*tp)
            if leader is None:
                self._cluster.request_update()
                next_due = self._retry_backoff() if next_due is None else min(next_due, self._retry_backoff())
                continue
            if self._inflight_node.get(leader, 0) >= self._max_in_flight:
                continue
            used = node_bytes.get(leader, 0)
            if used and used + batch.size > self._max_request_size:
                continue
            queue.popleft()
            batch.open = False
            self._seal(batch)
            per_node.setdefault(leader, []).append(batch)
            node_bytes[leader] = used + len(batch.data or b"")
            self._inflight_tp[tp] = inflight + 1
        # A partition's queue is made again by its next record: a producer that wrote to 10,000 partitions once
        # and now writes to a few passes over those few here, not over all of them on every drain.
        for tp in emptied:
            del self._queues[tp]
        for node, batches in per_node.items():
            self._inflight_node[node] = self._inflight_node.get(node, 0) + 1
            task = asyncio.get_running_loop().create_task(self._send_request(node, batches))
            self._requests.add(task)
            task.add_done_callback(self._requests.discard)
        if any(self._queues.values()) and next_due is None:
            next_due = self._retry_backoff()  # blocked on in-flight limits: re-check when a response wakes us
        return next_due

    def _retry_backoff(self) -> float:
        return float(self.config["retry.backoff.ms"]) / 1000

    def _ids(self) -> tuple[int, int]:
        return self._producer_id, self._producer_epoch

    def _reset_sequences(self, tp: tuple[str, int]) -> bool:
        """A batch of ``tp`` failed for good and nothing of it is in flight: once the epoch has been bumped, its
        waiting batches restart at sequence 0 (True); until then False (the bump is started)."""
        if self._tp_ids.get(tp) == self._ids():
            if self._bump is None:
                self._bump = asyncio.get_running_loop().create_task(self._bump_epoch())
            return False
        queue = self._queues.get(tp)
        if queue:
            for batch in list(queue):
                if batch.data is None:
                    break
                last = batch.last_error
                if isinstance(last, KafkaError) and last.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
                    batch.data, batch.base_sequence = None, -1  # refused, not written: a new sequence
                else:  # perhaps written: never re-sent under the new epoch
                    queue.remove(batch)
                    self._complete(batch, error=last or KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "in doubt"))
        self._reset_pending.discard(tp)
        self._retrying.discard(tp)
        log.info("%s-%d: sequences restart at 0 under producer id %d epoch %d", tp[0], tp[1], *self._ids())
        return True

    async def _bump_epoch(self) -> None:
        try:
            await self._init_producer_id(bump=True)
        except Exception as exc:  # noqa: BLE001 - retried on the next drain after the backoff
            log.warning("bumping the producer epoch failed (retried): %s", exc)
            await asyncio.sleep(self._retry_backoff())
        finally:
            self._bump = None
            self._wake.set()

    def _seal(self, batch: _Batch) -> None:
        """Encodes the batch once (first drain), fixing its sequence numbers for every retry."""
        if batch.data is not None:
            return
        tp = (batch.topic, batch.partition)
        if self._idempotent:
            if self._tp_ids.get(tp) != self._ids():  # first batch under this producer id/epoch
                self._tp_ids[tp] = self._ids()
                self._next_seq[tp] = 0
                self._last_acked[tp] = -1
            seq = self._next_seq.get(tp, 0)
            batch.base_sequence = seq
            self._next_seq[tp] = (seq + len(batch.records)) % _SEQ_MOD
        batch.data = encode_batch(batch.records, compression=self._codec, producer_id=self._producer_id,
                                 producer_epoch=self._producer_epoch, base_sequence=batch.base_sequence,
                                 transactional=self._txn is not None)

    async def _send_request(self, node: int, batches: list[_Batch]) -> None:
        topic_data: dict[str, list[ProduceRequestTopicDataPartitionData]] = {}
        lookup: dict[tuple[str, int], _Batch] = {}
        for b in batches:
            topic_data.setdefault(b.topic, []).append({"index": b.partition, "records": b.data})
            lookup[(b.topic, b.partition)] = b
            b.attempts += 1
        body: ProduceRequest = {
            "transactional_id": self._txn.transactional_id if self._txn else None, "acks": self._acks,
            "timeout_ms": self._request_timeout_ms,
            "topic_data": [{"name": t, "partition_data": p} for t, p in topic_data.items()]}
        try:
            conn = await self._cluster.connection(node)
            version = conn.version_for(PRODUCE)
            if version < 3:
                raise ClientError(f"broker {node} does not offer Produce v3+ (record batch v2)")
            if self._acks == 0:
                await conn.send_no_response(PRODUCE, body, version)
                for b in batches:
                    self._complete(b, base_offset=-1, append_time=-1)
                return
            response = await conn.send(PRODUCE, body, version)
        except (OSError, RequestTimeoutError, KafkaError) as exc:  # connection-level: every batch is in doubt
            self._cluster.request_update()
            for b in batches:
                self._retry_or_fail(b, exc if isinstance(exc, KafkaError) else
                                    KafkaError(ErrorCode.NETWORK_EXCEPTION, str(exc)))
            return
        except Exception as exc:
            for b in batches:
                self._complete(b, error=exc)
            return
        finally:
            self._inflight_node[node] -= 1
            for b in batches:
                self._inflight_tp[(b.topic, b.partition)] -= 1
            self._wake.set()
        for topic in response["responses"]:
            for part in topic["partition_responses"]:
                batch = lookup.pop((topic["name"], part["index"]), None)
                if batch is not None:
                    self._handle_partition_response(batch, part)
        for b in lookup.values():
            self._retry_or_fail(b, KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "partition missing from response"))

    def _handle_partition_response(self, batch: _Batch, part: ProduceResponseResponsesPartitionResponses) -> None:
        code = part["error_code"]
        if code == ErrorCode.NONE:
            self._retrying.discard((batch.topic, batch.partition))
            self._acked(batch)
            self._complete(batch, base_offset=part["base_offset"], append_time=part.get("log_append_time_ms", -1))
            return
        if code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:  # already written by an earlier attempt
            self._acked(batch)
            self._complete(batch, base_offset=-1, append_time=-1)
            return
        error = KafkaError(code, part.get("error_message"))
        if code in STALE_METADATA_ERRORS:
            self._cluster.request_update()
        self._retry_or_fail(batch, error)

    def _acked(self, batch: _Batch) -> None:
        if batch.base_sequence < 0:
            return
        tp = (batch.topic, batch.partition)
        last = (batch.base_sequence + len(batch.records) - 1) % _SEQ_MOD
        prev = self._last_acked.get(tp, -1)
        if prev < 0 or 0 < (last - prev) % _SEQ_MOD < _SEQ_MOD // 2:  # never backwards (a late duplicate answer)
            self._last_acked[tp] = last

    def _retry_or_fail(self, batch: _Batch, error: KafkaError) -> None:
        tp = (batch.topic, batch.partition)
        # Kafka's rule: OUT_OF_ORDER_SEQUENCE_NUMBER is retriable unless the batch directly follows the last
        # acknowledged one (then the broker really lacks a sequence: the batch fails, the epoch is bumped).
        retriable = error.retriable or (
            error.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and (
                tp in self._retrying or tp in self._reset_pending or
                batch.base_sequence != (self._last_acked.get(tp, -1) + 1) % _SEQ_MOD))
        expired = time.monotonic() - batch.created > self._delivery_timeout_s
        if retriable and not expired and batch.attempts <= self._retries and not self._closed:
            log.debug("retrying %s-%d (attempt %d): %s", batch.topic, batch.partition, batch.attempts, error)
            batch.last_error = error
            self._retrying.add(tp)
            queue = self._queues.setdefault(tp, deque())
            # Back to the front, in sequence order among the other batches being retried.
            idx = 0
            while idx < len(queue) and queue[idx].data is not None and queue[idx].base_sequence < batch.base_sequence:
                idx += 1
            queue.insert(idx, batch)
            self._wake.set()
            return
        self._complete(batch, error=error)

    def _complete(self, batch: _Batch, *, base_offset: int = -1, append_time: int = -1,
                  error: BaseException | None = None) -> None:
        """Resolves the batch's record futures (metadata or the error) and frees its buffer space."""
        if batch.done.done():
            return
        batch.error = error
        if error is not None and self._txn is not None:
            self._txn.set_error(error)
        elif error is not None and batch.data is not None and self._idempotent and not self._closed:
            self._reset_pending.add((batch.topic, batch.partition))  # its sequence is a gap now
            self._wake.set()
        topic, partition, records = batch.topic, batch.partition, batch.records
        if error is not None and len(batch.futures) < len(records):
            log.warning("%d records to %s-%d failed: %s", len(records) - len(batch.futures), topic, partition, error)
        for idx, fut in batch.futures:
            if fut.done():
                continue
            if error is not None:
                fut.set_exception(error)
            else:
                offset = base_offset + idx if base_offset >= 0 else -1
                ts = append_time if append_time >= 0 else records[idx][3]
                fut.set_result(RecordMetadata(topic, partition, offset, ts))
        batch.done.set_result(None)
        self._release(batch.size)
