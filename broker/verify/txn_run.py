"""One ``moldau-verify --workload txn`` run: the launch and fault schedule of run.Run, with the transactional
workload (txn_workload.py) instead of the idempotent one. Three topics, ``--partitions`` each:
``<topic>-input`` and ``<topic>-data`` written in transactions spanning both, ``<topic>-output`` written by the
consume-transform-produce workers from the input topic. After ``--duration``: faults healed, producers stopped,
every replica back in sync, the workers caught up with the input's last stable offsets, every partition's last
stable offset up to its high watermark (else the transaction holding it is reported stuck), and one
read_committed and one read_uncommitted read of everything. Returns the TxnHistory for txn_checker.py.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from pathlib import Path
from typing import TextIO

from moldau.aio import AdminClient, TopicPartition

from .run import HEAL_TIMEOUT_S, Run, _properties
from .txn_checker import TxnReport, check_txn
from .txn_history import FINAL_RC, FINAL_RU, READ_COMMITTED, READ_UNCOMMITTED, TxnHistory
from .txn_workload import (
    CtpWorker,
    TxnProducer,
    TxnReader,
    end_offsets,
    final_offsets,
    final_read,
    group_caught_up,
    sample_lso,
    wait_until,
)
from .workload import Connect, create_topic, partitions_led

CATCH_UP_TIMEOUT_S = 120.0
# transaction.timeout.ms of the workload (20 s) plus the coordinator's abort sweep (10 s), with room to spare
LSO_TIMEOUT_S = 60.0


def topics(base: str) -> dict[str, str]:
    """Topic name -> role (txn_history.TxnHistory.topics)."""
    return {f"{base}-input": "input", f"{base}-data": "data", f"{base}-output": "output"}


class TxnRun(Run):
    def __init__(self, args: argparse.Namespace, workdir: Path, progress: TextIO | None) -> None:
        super().__init__(args, workdir, progress)
        self.txn_history = TxnHistory(topics=topics(args.topic), meta={
            "topic": args.topic, "partitions": args.partitions, "replication_factor": args.replication_factor,
            "rate": args.rate, "duration": args.duration, "faults": args.faults, "workload": "txn"})

    def _progress_line(self) -> None:
        c, h = self.counters, self.txn_history
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(c.faults.items()))
        self.say(f"transactions committed {h.count('committed')} aborted {h.count('aborted')} unknown "
                 f"{h.count('unknown')} open {h.count('open')}  sent {c.sent}  acked {c.acked}  errors {c.errors}  read {h.read_count()}  "
                 f"lso samples {len(h.lso_samples)}  faults {sum(c.faults.values())}{f' ({kinds})' if kinds else ''}")

    async def _workload(self, connect: Connect) -> None:
        a, h = self.args, self.txn_history
        bootstrap = str(connect["bootstrap.servers"])  # --command-config is refused with --workload txn
        names = list(h.topics)
        input_topic, data_topic, output_topic = names
        for name in names:
            await create_topic(connect, name, a.partitions, a.replication_factor, a.min_insync_replicas)
        all_tps = [TopicPartition(t, p) for t in names for p in range(a.partitions)]
        data_tps = [(t, p) for t in (input_topic, data_topic) for p in range(a.partitions)]
        input_tps = [TopicPartition(input_topic, p) for p in range(a.partitions)]
        group = f"{a.topic}-ctp"
        self.say(f"topics {', '.join(names)}: {a.partitions} partitions each, replication factor "
                 f"{a.replication_factor}, min.insync.replicas {a.min_insync_replicas}; {a.transactional_producers} "
                 f"transactional producer(s) at {a.rate:g} records/s, {a.ctp_workers} consume-transform-produce "
                 f"worker(s), {a.abort_ratio:g} of the transactions aborted on purpose, for {a.duration:g}s")
        rng = random.Random(self.rng.random())
        config = _properties(a.producer_property)
        producers = [TxnProducer(bootstrap, f"{a.topic}-txn-{i}", data_tps, a.rate / a.transactional_producers,
                                 a.abort_ratio, h, self.counters, random.Random(rng.random()), config)
                     for i in range(a.transactional_producers)]
        workers = [CtpWorker(f"ctp-{i}", bootstrap, f"{a.topic}-ctp-{i}", input_topic, output_topic, a.partitions,
                             group, a.abort_ratio / 2, h, self.counters, random.Random(rng.random()), config)
                   for i in range(a.ctp_workers)]
        readers = [TxnReader("reader-committed", bootstrap, all_tps, READ_COMMITTED, h, self.counters),
                   TxnReader("reader-uncommitted", bootstrap, all_tps, READ_UNCOMMITTED, h, self.counters)]
        stop_producers, stop_workers, stop_readers, stop_faults = (asyncio.Event() for _ in range(4))
        producing = [asyncio.create_task(p.run(stop_producers), name=p.transactional_id) for p in producers]
        working = [asyncio.create_task(w.run(stop_workers), name=w.name) for w in workers]
        reading = [asyncio.create_task(r.run(stop_readers), name=r.name) for r in readers]
        sampling = asyncio.create_task(sample_lso(bootstrap, all_tps, h, self.t0, stop_readers), name="lso-sampler")
        progress = asyncio.create_task(self._progress())
        faulting = asyncio.create_task(self._faults(stop_faults)) if a.faults else None
        tasks = [*producing, *working, *reading, sampling]
        try:
            done, _ = await asyncio.wait(tasks, timeout=a.duration, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                if task.cancelled():  # not by us: a client call gave up with CancelledError
                    raise RuntimeError(f"a workload task ({task.get_name()}) was cancelled")
                task.result()  # a workload task that ended early: its error ends the run
            stop_faults.set()
            if faulting is not None:
                await faulting
            stop_producers.set()
            self.say("transactions stopped; waiting for the last ones to end")
            await asyncio.gather(*producing)
            await self._settle_all(bootstrap, names)
            input_ends = await end_offsets(bootstrap, input_tps, READ_COMMITTED, 30)
            if a.ctp_workers and await wait_until("consume-transform-produce caught up",
                                                  lambda: group_caught_up(bootstrap, group, input_ends, readers[0]),
                                                  CATCH_UP_TIMEOUT_S, self.say):
                self.say("consume-transform-produce caught up with the input")
            elif a.verbose:  # where the workers are stuck
                for task in working:
                    task.print_stack(file=sys.stderr)
            stop_workers.set()
            await asyncio.gather(*working)
            if await wait_until("last stable offsets up to the high watermarks",
                                lambda: final_offsets(bootstrap, all_tps, h), LSO_TIMEOUT_S, self.say):
                self.say("every last stable offset is at its high watermark")
            stop_readers.set()
            await asyncio.gather(*reading, sampling)
            self.say("final reads (read_committed, read_uncommitted) of every partition from the beginning")
            rc = await final_read(bootstrap, all_tps, READ_COMMITTED, FINAL_RC, h, a.final_read_timeout)
            ru = await final_read(bootstrap, all_tps, READ_UNCOMMITTED, FINAL_RU, h, a.final_read_timeout)
            self.final_complete = rc and ru
        finally:
            for event in (stop_faults, stop_producers, stop_workers, stop_readers):
                event.set()
            progress.cancel()
            rest = [*tasks, progress, *([faulting] if faulting else [])]
            for task in rest:
                if not task.done():
                    task.cancel()
            await asyncio.gather(*rest, return_exceptions=True)
            self._progress_line()

    async def _settle_all(self, bootstrap: str, names: list[str]) -> None:
        """On a launched cluster: every replica of the three topics back in sync (bounded)."""
        if self.cluster is None:
            return
        deadline = time.monotonic() + HEAL_TIMEOUT_S
        async with AdminClient(bootstrap_servers=bootstrap, client_id="moldau-verify-admin") as admin:
            for name in names:
                while not await partitions_led(admin, name, self.args.partitions, full_isr=True):
                    if time.monotonic() > deadline:
                        self.say(f"not every replica was back in sync {HEAL_TIMEOUT_S:.0f}s after the faults")
                        return
                    await asyncio.sleep(0.5)
        self.say("every replica in sync")


def add_txn_arguments(p: argparse.ArgumentParser) -> None:
    txn = p.add_argument_group("--workload txn")
    txn.add_argument("--transactional-producers", type=int, default=2,
                     help="transactional producers writing atomic multi-partition transactions (default 2)")
    txn.add_argument("--ctp-workers", type=int, default=2,
                     help="consume-transform-produce workers in one group (default 2; 0: none)")
    txn.add_argument("--abort-ratio", type=float, default=0.2,
                     help="share of the transactions aborted on purpose (default 0.2; half of it for the "
                     "consume-transform-produce workers)")


def validate_txn(args: argparse.Namespace) -> None:
    from moldau.tools.common import UsageError

    if args.workload != "txn":
        return
    if args.command_config:
        raise UsageError("--command-config is not supported with --workload txn yet (its clients take only "
                         "--bootstrap-server)")
    if args.transactional_producers < 1:
        raise UsageError("--transactional-producers must be at least 1")
    if args.ctp_workers < 0:
        raise UsageError("--ctp-workers must be 0 or more")
    if not 0 <= args.abort_ratio < 1:
        raise UsageError("--abort-ratio must be at least 0 and below 1")


async def recheck_txn(args: argparse.Namespace, history: TxnHistory) -> tuple[TxnReport, dict[str, object]]:
    """Reads the topics of a saved transactional history again (both isolation levels) and re-judges it."""
    partitions = int(history.meta["partitions"])
    tps = [TopicPartition(t, p) for t in history.topics for p in range(partitions)]
    history.reads.pop(FINAL_RC, None)
    history.reads.pop(FINAL_RU, None)
    rc = await final_read(args.bootstrap_server, tps, READ_COMMITTED, FINAL_RC, history, args.final_read_timeout)
    ru = await final_read(args.bootstrap_server, tps, READ_UNCOMMITTED, FINAL_RU, history, args.final_read_timeout)
    return check_txn(history), {"topic": history.meta["topic"], "final_read_complete": rc and ru}
