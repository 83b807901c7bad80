"""The transactional workload (``--workload txn``), on Moldau's own asyncio client: transactional producers writing
atomic transactions over several partitions of two topics (some aborted on purpose), consume-transform-produce
workers (read_committed input, ``send_offsets_to_transaction``, an output topic), a read_committed and a
read_uncommitted reader, and a sampler of every partition's last stable offset (ListOffsets, READ_COMMITTED).

Every outcome goes into a TxnHistory; nothing here judges it (txn_checker.py does).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import time
from collections.abc import Callable
from typing import Any

from moldau.aio import AdminClient, Consumer, Producer, RecordMetadata, TopicPartition
from moldau.errors import TransactionError

from .txn_history import ABORTED, COMMITTED, READ_COMMITTED, UNKNOWN, Txn, TxnHistory, make_output, make_value
from .workload import Counters

log = logging.getLogger("moldau.verify")

RETRY_S = 0.5
MAX_TXN_RECORDS = 200
# Long enough to ride out a failover; short enough that a transaction a fault left open is aborted by its
# coordinator well within the end-of-run wait for the last stable offsets.
TXN_TIMEOUT_MS = 20000
CLIENT = {"request.timeout.ms": 10000, "metadata.max.age.ms": 5000, "max.block.ms": 60000,
          "delivery.timeout.ms": 120000, "transaction.timeout.ms": TXN_TIMEOUT_MS, "linger.ms": 5}


def _stray_cancel(what: str) -> bool:
    """True (logged with its traceback) for a CancelledError that a client call raised although nobody cancelled
    this task; False when the task is being cancelled (re-raise)."""
    current = asyncio.current_task()
    if current is not None and current.cancelling():
        return False
    log.warning("%s raised CancelledError without a cancellation", what, exc_info=True)
    return True


async def _close_producer(producer: Producer | None) -> None:
    if producer is not None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(producer.close(timeout=10), 30)


async def _transactional_producer(bootstrap: str, transactional_id: str, stop: asyncio.Event,
                                  config: dict[str, Any]) -> Producer | None:
    """A started producer whose init_transactions() succeeded (fencing any older one with the id), retried
    through faults; None when stopped first."""
    while not stop.is_set():
        producer = Producer({"bootstrap.servers": bootstrap, "client.id": transactional_id,
                             "transactional.id": transactional_id, **CLIENT, **config})
        try:
            await producer.start()
            await producer.init_transactions()
            return producer
        except asyncio.CancelledError:
            if not _stray_cancel(f"{transactional_id}: init_transactions"):
                raise
            await _close_producer(producer)
        except Exception as exc:  # noqa: BLE001 - a coordinator moving or down: try again
            log.info("%s: init_transactions: %s", transactional_id, exc)
            await _close_producer(producer)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), RETRY_S)
    return None


class _TxnProducerBase:
    """What the transactional producer and the consume-transform-produce worker share: the producer's life
    (recreated after a fatal error, which fences the old one), recording sends and ending transactions."""

    kind = "produce"

    def __init__(self, bootstrap: str, transactional_id: str, history: TxnHistory, counters: Counters,
                 config: dict[str, Any]) -> None:
        self.bootstrap, self.transactional_id = bootstrap, transactional_id
        self.history, self.counters, self.config = history, counters, config
        self.producer: Producer | None = None
        self.txn_count = 0
        self.counter = 0

    def _done(self, value: bytes, future: asyncio.Future[RecordMetadata]) -> None:
        if future.cancelled():
            self.history.fail(value, "cancelled")
        elif (exc := future.exception()) is not None:
            self.history.fail(value, f"{type(exc).__name__}: {exc}")
        else:
            meta = future.result()
            self.history.ack(value, meta.topic, meta.partition, meta.offset)
            self.counters.acked += 1

    abort_ratio = 0.0

    def _abort_due(self, n: int) -> bool:
        """Whether transaction ``n`` (from 1) is aborted on purpose: every 1/abort_ratio-th, spread evenly."""
        return int(n * self.abort_ratio) > int((n - 1) * self.abort_ratio)

    def _begin(self) -> tuple[Txn, int]:
        assert self.producer is not None
        self.txn_count += 1
        txn = self.history.begin(f"{self.transactional_id}:{self.txn_count}", self.transactional_id, self.kind)
        self.producer.begin_transaction()
        return txn, self.txn_count

    async def _send(self, txn: Txn, topic: str, partition: int, value: bytes) -> None:
        assert self.producer is not None
        txn.writes.append((topic, partition, value))
        self.counters.sent += 1
        future = await self.producer.send(topic, value, partition=partition)
        future.add_done_callback(functools.partial(self._done, value))

    async def _end(self, txn: Txn, commit: bool, why: str = "") -> bool:
        """Commits (or aborts) ``txn`` and records its outcome; True when it committed. A failed commit makes
        the outcome unknown unless the abort that follows succeeds (the coordinator refuses to abort a
        transaction it has begun committing). A failure to abort closes the producer (a new one fences it)."""
        assert self.producer is not None
        if commit:
            try:
                await self.producer.commit_transaction()
                txn.outcome = COMMITTED
                return True
            except Exception as exc:  # noqa: BLE001 - under faults any failure may happen; the outcome is judged
                txn.outcome, txn.note = UNKNOWN, f"commit failed: {type(exc).__name__}: {exc}"
                self.counters.errors += 1
                if isinstance(exc, TransactionError) and exc.fatal:
                    await self._drop_producer()
                    return False
        try:
            await self.producer.abort_transaction()
            txn.outcome, txn.note = ABORTED, why or f"aborted after the {txn.note}"
        except Exception as exc:  # noqa: BLE001
            log.info("%s: abort: %s", self.transactional_id, exc)
            if txn.outcome != UNKNOWN:  # no commit was asked for: it can never become visible
                txn.outcome, txn.note = ABORTED, f"{why}; the abort failed ({type(exc).__name__})"
            await self._drop_producer()
        return False

    async def _drop_producer(self) -> None:
        producer, self.producer = self.producer, None
        await _close_producer(producer)

    async def _ensure_producer(self, stop: asyncio.Event) -> bool:
        if self.producer is None:
            self.producer = await _transactional_producer(self.bootstrap, self.transactional_id, stop, self.config)
        return self.producer is not None


class TxnProducer(_TxnProducerBase):
    """Transactions over 2-4 partitions (of every data topic), ``abort_ratio`` of them aborted on purpose (evenly), at
    ``rate`` records/s: one transaction after the other, each with the records due since the last one began
    (at least one per partition, at most MAX_TXN_RECORDS), so a slow commit makes the next transaction bigger."""

    def __init__(self, bootstrap: str, transactional_id: str, partitions: list[tuple[str, int]], rate: float,
                 abort_ratio: float, history: TxnHistory, counters: Counters, rng: random.Random,
                 config: dict[str, Any]) -> None:
        super().__init__(bootstrap, transactional_id, history, counters, config)
        self.partitions, self.rate, self.abort_ratio, self.rng = partitions, rate, abort_ratio, rng

    async def run(self, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        try:
            while not stop.is_set():
                if not await self._ensure_producer(stop):
                    break
                due = int((loop.time() - t0) * self.rate) - self.counter
                try:
                    await self._one_transaction(max(1, min(MAX_TXN_RECORDS, due)))
                except asyncio.CancelledError:
                    if not _stray_cancel(f"{self.transactional_id}: transaction"):
                        raise
                    await self._drop_producer()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), max(0.0, t0 + self.counter / self.rate - loop.time()))
        finally:
            await self._drop_producer()

    async def _one_transaction(self, records: int) -> None:
        txn, n = self._begin()
        abort = self._abort_due(n)
        try:
            tps = self.rng.sample(self.partitions, min(len(self.partitions), self.rng.randint(2, 4)))
            for i in range(max(records, len(tps))):
                topic, partition = tps[i % len(tps)]
                await self._send(txn, topic, partition, make_value(self.transactional_id, n, self.counter))
                self.counter += 1
        except Exception as exc:  # noqa: BLE001 - the transaction failed before its commit: abort it
            self.counters.errors += 1
            await self._end(txn, commit=False, why=f"a send failed: {type(exc).__name__}: {exc}")
            return
        await self._end(txn, commit=not abort, why="aborted on purpose")


class CtpWorker(_TxnProducerBase):
    """Consume-transform-produce: a read_committed member of ``group`` reading the input topic, each batch
    turned into one transaction of outputs (one per input record, naming it) plus the consumed offsets
    (send_offsets_to_transaction); ``abort_ratio`` aborted on purpose. After an abort the worker goes back to
    the group's committed offsets, so every input is output exactly once."""

    kind = "ctp"

    def __init__(self, name: str, bootstrap: str, transactional_id: str, input_topic: str, output_topic: str,
                 output_partitions: int, group: str, abort_ratio: float, history: TxnHistory, counters: Counters,
                 rng: random.Random, config: dict[str, Any]) -> None:
        super().__init__(bootstrap, transactional_id, history, counters, config)
        self.name, self.input_topic, self.output_topic = name, input_topic, output_topic
        self.output_partitions, self.abort_ratio, self.rng = output_partitions, abort_ratio, rng
        self._assigned: set[TopicPartition] = set()
        self._logged = 0.0
        self.consumer_config = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                                "isolation.level": "read_committed", "enable.auto.commit": False,
                                "auto.offset.reset": "earliest", "session.timeout.ms": 10000,
                                "heartbeat.interval.ms": 1000, "metadata.max.age.ms": 5000}

    async def run(self, stop: asyncio.Event) -> None:
        consumer = Consumer(self.consumer_config)
        try:
            await consumer.start()
            consumer.subscribe([self.input_topic])
            while not stop.is_set():
                if not await self._ensure_producer(stop):
                    break
                try:
                    batches = await consumer.getmany(timeout_ms=500, max_records=100)
                except asyncio.CancelledError:
                    if not _stray_cancel("getmany"):
                        raise
                    continue
                except Exception as exc:  # noqa: BLE001 - faults make reads fail for a while: keep reading
                    self.counters.consumer_errors += 1
                    log.info("%s: %s", self.name, exc)
                    await asyncio.sleep(RETRY_S)
                    continue
                await self._log_new_assignment(consumer, batches)
                records = [r for rs in batches.values() for r in rs]
                if not records:
                    continue
                self.history.read(self.name, READ_COMMITTED,
                                  [(r.topic, r.partition, r.offset, r.value) for r in records])
                try:
                    if not await self._process(consumer, batches):
                        await self._rewind(consumer, stop)
                except asyncio.CancelledError:
                    if not _stray_cancel("process"):
                        raise
                    await self._drop_producer()
                    await self._rewind(consumer, stop)
        finally:
            await self._drop_producer()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(consumer.close(autocommit=False), 15)

    async def _log_new_assignment(self, consumer: Consumer, batches: dict[TopicPartition, list[Any]]) -> None:
        """--verbose: where the worker starts on each partition it was given (a start past records it never
        processed shows as ctp_missing)."""
        if not log.isEnabledFor(logging.INFO):
            return
        assigned = consumer.assignment()
        now = time.monotonic()
        if assigned == self._assigned and now - self._logged < 10:
            return
        self._logged = now
        for tp in sorted(assigned):
            with contextlib.suppress(Exception):
                first = batches[tp][0].offset if batches.get(tp) else None
                log.info("%s: %s %s/%d, position %d, first record read %s", self.name,
                         "has" if tp in self._assigned else "assigned", tp.topic, tp.partition,
                         await consumer.position(tp), first)
        self._assigned = set(assigned)

    async def _process(self, consumer: Consumer, batches: dict[TopicPartition, list[Any]]) -> bool:
        txn, n = self._begin()
        abort = self._abort_due(n)
        try:
            for records in batches.values():
                for r in records:
                    out = make_output(self.transactional_id, n, self.counter, r.value)
                    self.counter += 1
                    await self._send(txn, self.output_topic, r.partition % self.output_partitions, out)
            assert self.producer is not None
            await self.producer.send_offsets_to_transaction(
                {tp: records[-1].offset + 1 for tp, records in batches.items() if records}, consumer.group_metadata())
        except Exception as exc:  # noqa: BLE001 - e.g. the group moved on (KIP-447 fencing): abort, re-read
            self.counters.errors += 1
            await self._end(txn, commit=False, why=f"failed before the commit: {type(exc).__name__}: {exc}")
            return False
        return await self._end(txn, commit=not abort, why="aborted on purpose")

    async def _rewind(self, consumer: Consumer, stop: asyncio.Event) -> None:
        """Back to the group's committed offsets (read_committed: waits for a pending transactional commit),
        asked again until they are known: going on from the current position would skip the batch whose
        transaction was aborted (the checker reports its inputs as ctp_missing)."""
        while not stop.is_set():
            tps = sorted(consumer.assignment())
            try:
                committed = await consumer.committed_offsets(tps)
            except Exception as exc:  # noqa: BLE001 - the group coordinator moving or down: ask again
                log.info("%s: committed offsets: %s", self.name, exc)
                await asyncio.sleep(RETRY_S)
                continue
            assigned = consumer.assignment()
            for tp, om in committed.items():
                if tp in assigned:
                    if om is None:
                        consumer.seek_to_beginning(tp)
                    else:
                        consumer.seek(tp, om.offset)
            return


class TxnReader:
    """A consumer assigned every partition of ``topics`` from the beginning, at one isolation level."""

    def __init__(self, name: str, bootstrap: str, tps: list[TopicPartition], isolation: str, history: TxnHistory,
                 counters: Counters) -> None:
        self.name, self.tps, self.isolation, self.history, self.counters = name, tps, isolation, history, counters
        self.config = {"bootstrap.servers": bootstrap, "client.id": name, "isolation.level": isolation,
                       "auto.offset.reset": "earliest", "enable.auto.commit": False, "metadata.max.age.ms": 5000}
        self.position: dict[TopicPartition, int] = {}  # the consumer's position after its last poll
        self.high: dict[TopicPartition, int] = {}  # next offset after the last record read

    async def run(self, stop: asyncio.Event) -> None:
        consumer = Consumer(self.config)
        try:
            await consumer.start()
            consumer.assign(self.tps)
            consumer.seek_to_beginning(*self.tps)
            while not stop.is_set():
                try:
                    batches = await consumer.getmany(timeout_ms=500, max_records=5000)
                except Exception as exc:  # noqa: BLE001
                    self.counters.consumer_errors += 1
                    log.info("%s: %s", self.name, exc)
                    await asyncio.sleep(RETRY_S)
                    continue
                for tp, records in batches.items():
                    self.history.read(self.name, self.isolation,
                                      [(r.topic, r.partition, r.offset, r.value) for r in records])
                    if records:
                        self.high[tp] = records[-1].offset + 1
                for tp in self.tps:
                    with contextlib.suppress(Exception):
                        self.position[tp] = await consumer.position(tp)
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(consumer.close(), 15)


async def end_offsets(bootstrap: str, tps: list[TopicPartition], isolation: str,
                      timeout_s: float = 10.0) -> dict[TopicPartition, int]:
    async with Consumer(bootstrap_servers=bootstrap, client_id="moldau-verify-offsets", isolation_level=isolation,
                        default_api_timeout_ms=int(timeout_s * 1000)) as consumer:
        return await consumer.end_offsets(tps)


async def sample_lso(bootstrap: str, tps: list[TopicPartition], history: TxnHistory, t0: float,
                     stop: asyncio.Event, interval_s: float = 0.5) -> None:
    """Every ``interval_s``: every partition's last stable offset (ListOffsets latest, READ_COMMITTED)."""
    async with Consumer(bootstrap_servers=bootstrap, client_id="moldau-verify-lso", isolation_level=READ_COMMITTED,
                        default_api_timeout_ms=5000, metadata_max_age_ms=5000) as consumer:
        while not stop.is_set():
            try:
                ends = await consumer.end_offsets(tps)
            except Exception as exc:  # noqa: BLE001 - a leader moving (OFFSET_NOT_AVAILABLE...): sample later
                log.debug("lso sample: %s", exc)
            else:
                now = time.monotonic() - t0
                history.lso_samples.extend((now, tp.topic, tp.partition, lso) for tp, lso in sorted(ends.items()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval_s)


async def wait_until(what: str, condition: Callable[[], Any], timeout_s: float, say: Callable[[str], None]) -> bool:
    """Polls the async ``condition`` (exceptions count as False) until it holds or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if await condition():
                return True
        except Exception as exc:  # noqa: BLE001
            log.debug("%s: %s", what, exc)
        if time.monotonic() > deadline:
            say(f"{what}: not reached within {timeout_s:.0f}s")
            return False
        await asyncio.sleep(RETRY_S)


async def group_caught_up(bootstrap: str, group: str, ends: dict[TopicPartition, int], reader: TxnReader) -> bool:
    """True when ``group`` has committed, on every partition in ``ends``, the offset after the last committed
    record below its end (``reader``, a read_committed reader of those partitions, has read up to the end and
    says which record that is: a commit marker or an aborted transaction may follow it)."""
    if any(reader.position.get(tp, 0) < end for tp, end in ends.items()):
        return False
    async with AdminClient(bootstrap_servers=bootstrap, client_id="moldau-verify-admin") as admin:
        committed = await admin.list_consumer_group_offsets(group, [(tp.topic, tp.partition) for tp in ends])
    return all(tp not in reader.high or (tp in committed and committed[tp].offset >= reader.high[tp])
               for tp in ends)


async def final_offsets(bootstrap: str, tps: list[TopicPartition], history: TxnHistory) -> bool:
    """Records every partition's (last stable offset, high watermark); True when they are all equal."""
    lso = await end_offsets(bootstrap, tps, READ_COMMITTED)
    hw = await end_offsets(bootstrap, tps, "read_uncommitted")
    history.final_offsets = {(tp.topic, tp.partition): (lso[tp], hw[tp]) for tp in tps}
    return all(lso[tp] >= hw[tp] for tp in tps)


async def final_read(bootstrap: str, tps: list[TopicPartition], isolation: str, reader: str, history: TxnHistory,
                     timeout_s: float) -> bool:
    """Reads every partition from its beginning to its end at ``isolation`` (the LSO for read_committed);
    False when that did not finish within ``timeout_s`` (what was read is kept)."""
    deadline = time.monotonic() + timeout_s
    async with Consumer(bootstrap_servers=bootstrap, client_id=f"moldau-verify-{reader}", isolation_level=isolation,
                        auto_offset_reset="earliest", enable_auto_commit=False) as consumer:
        ends = await consumer.end_offsets(tps)
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        history.read(reader, isolation, [])
        remaining = {tp for tp in tps if ends[tp] > 0}
        while remaining:
            if time.monotonic() > deadline:
                log.warning("final read (%s): partitions %s not read to their end within %.0fs", isolation,
                            sorted(f"{tp.topic}/{tp.partition}" for tp in remaining), timeout_s)
                return False
            try:
                batches = await consumer.getmany(timeout_ms=500, max_records=10000)
            except Exception as exc:  # noqa: BLE001 - transient (a leader moving): retry until the deadline
                log.debug("final read: %s", exc)
                await asyncio.sleep(RETRY_S)
                continue
            for tp, records in batches.items():
                history.read(reader, isolation,
                             [(r.topic, r.partition, r.offset, r.value) for r in records if r.offset < ends[tp]])
            for tp in list(remaining):
                # read_committed skips aborted records and markers: the position, not the last record, says
                # whether the end was reached
                if await consumer.position(tp) >= ends[tp]:
                    remaining.discard(tp)
    return True
