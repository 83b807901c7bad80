"""One moldau-verify run: (launch the cluster,) create the topic, write and read for --duration while the fault
schedule runs, heal everything, drain, read it all once more. Returns the History for the checker."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import random
import signal
import time
import uuid
from pathlib import Path
from typing import TextIO

from moldau.aio import AdminClient

from .cluster import LaunchedCluster
from .history import History
from .netfault import NetFaults
from .tiered import broker_overrides, topic_configs
from .workload import (
    Connect,
    Counters,
    GroupReader,
    VerifiableProducer,
    create_topic,
    end_offsets,
    final_read,
    partitions_led,
)

log = logging.getLogger("moldau.verify")

HEAL_TIMEOUT_S = 180.0
CATCH_UP_TIMEOUT_S = 60.0


def _properties(items: list[str]) -> dict[str, str]:
    return {k.strip(): v for k, _, v in (item.partition("=") for item in items)}


class Run:
    def __init__(self, args: argparse.Namespace, workdir: Path, progress: TextIO | None) -> None:
        self.args = args
        self.workdir = workdir
        self.progress_to = progress if args.progress_interval > 0 else None
        self.counters = Counters()
        self.history = History(meta={"topic": args.topic, "partitions": args.partitions,
                                     "replication_factor": args.replication_factor, "rate": args.rate,
                                     "duration": args.duration, "faults": args.faults})
        self.rng = random.Random(args.seed)
        self.cluster: LaunchedCluster | None = None
        self.netfaults: NetFaults | None = None
        self.fault_log: list[str] = []
        self.final_complete = False
        self.t0 = time.monotonic()
        self.main_task: asyncio.Task[History] | None = None
        self.interrupted: str | None = None

    def say(self, text: str) -> None:
        if self.progress_to is not None:
            print(f"[{time.monotonic() - self.t0:6.1f}s] {text}", file=self.progress_to, flush=True)

    def interrupt(self, signum: int) -> None:
        """SIGINT/SIGTERM/SIGHUP: stop the run, heal and stop a launched cluster (and its partitions) on the way
        out. Set explicitly: a tool started in the background of a script inherits SIGINT ignored."""
        if self.interrupted is None and self.main_task is not None:
            self.interrupted = signal.Signals(signum).name
            self.main_task.cancel()

    async def execute(self) -> History:
        self.main_task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(sig, self.interrupt, sig)
        try:
            if self.args.launch is not None:
                await self._launch()
            if self.cluster is not None:
                connect = {"bootstrap.servers": self.cluster.bootstrap}
            else:
                connect = {**self.args.client_config, "bootstrap.servers": str(self.args.bootstrap_server)}
            await self._workload(connect)
        finally:
            if self.cluster is not None:
                self.say("stopping the launched cluster")
                await asyncio.to_thread(self.cluster.close)
            if self.netfaults is not None:
                self.netfaults.close()
        return self.history

    async def _launch(self) -> None:
        if "partition" in self.args.faults:
            self.netfaults = NetFaults()
        overrides = [*broker_overrides(self.args, self.workdir), *self.args.override]
        self.cluster = LaunchedCluster(self.args.launch, self.workdir, overrides, self.netfaults)
        self.say(f"launching ZooKeeper and {self.args.launch} broker(s) in {self.workdir}")
        await asyncio.to_thread(self.cluster.start)
        await self._all_brokers_known(self.cluster.bootstrap, self.args.launch)
        self.say(f"cluster up: {self.cluster.bootstrap}")

    async def _all_brokers_known(self, bootstrap: str, brokers: int) -> None:
        """Until the metadata lists every launched broker: a port accepts before the controller has told the
        others of that broker, and a topic created then is refused INVALID_REPLICATION_FACTOR."""
        deadline = time.monotonic() + HEAL_TIMEOUT_S
        async with AdminClient(bootstrap_servers=bootstrap, client_id="moldau-verify-admin") as admin:
            while len((await admin.describe_cluster()).brokers) < brokers:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the metadata did not list {brokers} brokers within {HEAL_TIMEOUT_S:.0f}s")
                await asyncio.sleep(0.2)

    async def _workload(self, connect: Connect) -> None:
        a = self.args
        await create_topic(connect, a.topic, a.partitions, a.replication_factor, a.min_insync_replicas,
                           configs=topic_configs(a))
        self.say(f"topic {a.topic}: {a.partitions} partitions, replication factor {a.replication_factor}, "
                 f"min.insync.replicas {a.min_insync_replicas}; writing {a.rate:g} records/s for {a.duration:g}s")
        producer = VerifiableProducer(connect, a.topic, a.partitions, a.rate, self.history, self.counters,
                                      uuid.uuid4().hex[:8], _properties(a.producer_property))
        readers = [GroupReader(f"consumer-{i}", connect, a.topic, f"{a.topic}-group", self.history,
                               self.counters) for i in range(a.consumers)]
        stop_producer, stop_readers, stop_faults = asyncio.Event(), asyncio.Event(), asyncio.Event()
        producing = asyncio.create_task(producer.run(stop_producer))
        reading = [asyncio.create_task(r.run(stop_readers)) for r in readers]
        progress = asyncio.create_task(self._progress())
        faulting = asyncio.create_task(self._faults(stop_faults)) if a.faults else None
        try:
            done, _ = await asyncio.wait([producing, *reading], timeout=a.duration,
                                        return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                task.result()  # a workload task that ended early: its error ends the run
            stop_faults.set()
            if faulting is not None:
                await faulting
            stop_producer.set()
            self.say("writes stopped; waiting for the last acknowledgements")
            await producing
            await self._settle(connect)
            await self._catch_up(connect, readers)
            stop_readers.set()
            await asyncio.gather(*reading)
            self.say("final read of every partition from the beginning")
            self.final_complete = await final_read(connect, a.topic, a.partitions, self.history,
                                                   a.final_read_timeout)
        finally:
            stop_faults.set()
            stop_producer.set()
            stop_readers.set()
            progress.cancel()
            for task in [producing, *reading, *([faulting] if faulting else [])]:
                if not task.done():
                    task.cancel()
            await asyncio.gather(producing, *reading, progress, *([faulting] if faulting else []),
                                 return_exceptions=True)
            self._progress_line()

    # ------------------------------------------------------------------------------------------ progress
    def _progress_line(self) -> None:
        c = self.counters
        faults = sum(c.faults.values())
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(c.faults.items()))
        self.say(f"sent {c.sent}  acked {c.acked}  errors {c.errors}  read {self.history.read_count()}  "
                 f"faults {faults}{f' ({kinds})' if kinds else ''}")

    async def _progress(self) -> None:
        while True:
            await asyncio.sleep(self.args.progress_interval)
            self._progress_line()

    # ------------------------------------------------------------------------------------------ faults
    async def _faults(self, stop: asyncio.Event) -> None:
        """Every --fault-interval: a fault of a random kind for --fault-duration, then healed."""
        assert self.cluster is not None
        a, cluster = self.args, self.cluster
        try:
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), a.fault_interval - a.fault_duration)
                if stop.is_set():
                    break
                kind = self.rng.choice(a.faults)
                what = await asyncio.to_thread(cluster.start_fault, kind, self.rng)
                self.counters.faults[kind] = self.counters.faults.get(kind, 0) + 1
                self.fault_log.append(f"{time.monotonic() - self.t0:.1f}s {what}")
                self.say(f"fault: {what}")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), a.fault_duration)
                await asyncio.to_thread(cluster.heal_all)
                self.say("healed")
        finally:
            await asyncio.to_thread(cluster.heal_all)

    async def _settle(self, connect: Connect) -> None:
        """On a launched cluster: wait for every replica back in sync before the final read (bounded)."""
        if self.cluster is None:
            return
        deadline = time.monotonic() + HEAL_TIMEOUT_S
        async with AdminClient({**connect, "client.id": "moldau-verify-admin"}) as admin:
            while not await partitions_led(admin, self.args.topic, self.args.partitions, full_isr=True):
                if time.monotonic() > deadline:
                    log.warning("not every replica was back in sync %.0fs after the faults", HEAL_TIMEOUT_S)
                    return
                await asyncio.sleep(0.5)
        self.say("every replica in sync")

    async def _catch_up(self, connect: Connect, readers: list[GroupReader]) -> None:
        """Lets the group read up to the log end (bounded): its reads are compared with the final read."""
        if not readers:
            return
        ends = await end_offsets(connect, self.args.topic, self.args.partitions)
        deadline = time.monotonic() + CATCH_UP_TIMEOUT_S
        while any(max(r.high.get(p, 0) for r in readers) < end for p, end in ends.items()):
            if time.monotonic() > deadline:
                log.warning("the consumers did not reach the log end within %.0fs", CATCH_UP_TIMEOUT_S)
                return
            await asyncio.sleep(0.2)
