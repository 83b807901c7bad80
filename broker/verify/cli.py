"""``moldau-verify``: checks that a Kafka-protocol cluster loses, duplicates, reorders and rewrites nothing.

    moldau-verify --bootstrap-server host:9092 --duration 60 --rate 200
    moldau-verify --launch 3 --duration 120 --faults kill,pause,partition --fault-interval 10
    moldau-verify --bootstrap-server host:9093 --command-config client.properties   # SASL/SSL settings

A paced idempotent acks=all producer writes unique sequential values to a new topic while ``--consumers``
consumers of one group read it; with ``--launch`` the tool runs its own ZooKeeper and brokers in a temporary
directory and injects ``--faults`` into them. After ``--duration`` every fault is healed, the producer flushes,
the consumers catch up, one more consumer reads every partition from the beginning, and checker.py judges the
history. Exit code 0: nothing lost, unexpected, duplicated, reordered or changed; 2: anomalies; 1: the run failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from moldau.errors import ClientError
from moldau.tools.common import (
    EXIT_USAGE,
    ToolError,
    ToolParser,
    UsageError,
    read_properties_file,
    report_error,
)

from .checker import Report, check
from .cluster import FAULTS, fault_unavailable
from .history import History
from .run import Run
from .tiered import remote_segments
from .txn_checker import TxnReport, check_txn
from .txn_history import TxnHistory
from .txn_run import TxnRun, add_txn_arguments, recheck_txn, validate_txn

WORKLOADS = ("idempotent", "txn")

EXIT_ANOMALIES = 2
EXIT_INTERRUPTED = 130


class Interrupted(Exception):
    """A signal stopped the run before the check."""


def parser() -> argparse.ArgumentParser:
    p = ToolParser(prog="moldau-verify", description=__doc__.split("\n\n")[0].replace("``", ""),
                   formatter_class=argparse.RawDescriptionHelpFormatter)
    where = p.add_mutually_exclusive_group()
    where.add_argument("--bootstrap-server", metavar="HOST:PORT[,...]", help="the cluster to check")
    where.add_argument("--launch", type=int, metavar="N",
                       help="launch ZooKeeper and N brokers in a temporary directory and check them")
    p.add_argument("--command-config", metavar="FILE",
                   help="client properties for --bootstrap-server (security.protocol, sasl.*, ssl.*), used by "
                   "every producer, consumer and admin client of the run")
    p.add_argument("--topic", help="the topic to create and write (default moldau-verify-<random>)")
    p.add_argument("--partitions", type=int, default=6, help="partitions of the topic (default 6)")
    p.add_argument("--replication-factor", type=int,
                   help="replication factor (default 3, or the number of launched brokers if fewer)")
    p.add_argument("--min-insync-replicas", type=int,
                   help="the topic's min.insync.replicas (default 2 with 3 or more replicas, else 1)")
    p.add_argument("--topic-config", action="append", default=[], metavar="KEY=VALUE",
                   help="a setting of the created topic (may repeat), e.g. retention.ms=600000")
    p.add_argument("--tiered", action="store_true",
                   help="tiered storage on: the topic gets remote.storage.enable=true, segment.bytes=8192 and "
                        "local.retention.bytes=8192 (--topic-config overrides them); a launched cluster a "
                        "filesystem store in its directory (or the storage manager --override names)")
    p.add_argument("--rate", type=float, default=100.0, help="records per second (default 100)")
    p.add_argument("--duration", type=float, default=60.0, help="seconds of writing (default 60)")
    p.add_argument("--consumers", type=int, default=2, help="consumers in the group (default 2; 0: none)")
    p.add_argument("--workload", choices=WORKLOADS, default="idempotent",
                   help="idempotent (default): one idempotent producer, a consumer group; txn: transactional "
                   "producers, consume-transform-produce workers, read_committed checks (docs/reliability.md)")
    add_txn_arguments(p)
    p.add_argument("--faults", default="", help=f"comma-separated faults for a launched cluster: {','.join(FAULTS)}")
    p.add_argument("--fault-interval", type=float, default=10.0, help="seconds from one fault to the next "
                   "(default 10)")
    p.add_argument("--fault-duration", type=float, help="seconds each fault lasts (default half the interval)")
    p.add_argument("--seed", type=int, help="random seed for the fault schedule (victims, order)")
    p.add_argument("--progress-interval", type=float, default=5.0, help="seconds between progress lines "
                   "(default 5; 0: none)")
    p.add_argument("--final-read-timeout", type=float, default=120.0, help="seconds the final read may take")
    p.add_argument("--producer-property", action="append", default=[], metavar="KEY=VALUE",
                   help="a producer setting (may repeat), e.g. linger.ms=20")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="a broker setting for a launched cluster (may repeat)")
    p.add_argument("--data", help="directory for a launched cluster (kept); default a temporary one, removed "
                   "after a clean run")
    p.add_argument("--history", metavar="FILE", help="write the history (every attempt, ack and read) as JSON")
    p.add_argument("--recheck", metavar="FILE", help="do not run: read the topic of a saved --history again "
                   "from --bootstrap-server and check it")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--verbose", action="store_true", help="log what the tool and a launched cluster do")
    return p


def validate(args: argparse.Namespace) -> None:
    """Raises ToolError naming the flag for a bad combination or value."""
    if args.command_config and args.launch is not None:
        raise UsageError("--command-config needs --bootstrap-server: a launched cluster has plaintext listeners")
    args.client_config = read_properties_file(args.command_config, "--command-config") \
        if args.command_config else {}
    if args.recheck:
        if not args.bootstrap_server:
            raise UsageError("--recheck needs --bootstrap-server (the cluster that holds the topic)")
        return
    if not args.bootstrap_server and args.launch is None:
        raise UsageError("give --bootstrap-server or --launch N")
    if args.launch is not None and args.launch < 1:
        raise UsageError("--launch must be at least 1")
    for flag in ("partitions", "rate", "duration", "fault_interval", "final_read_timeout"):
        if getattr(args, flag) <= 0:
            raise UsageError(f"--{flag.replace('_', '-')} must be positive")
    validate_txn(args)
    if args.consumers < 0:
        raise UsageError("--consumers must be 0 or more")
    if args.replication_factor is None:
        args.replication_factor = min(3, args.launch) if args.launch is not None else 3
    if args.replication_factor < 1:
        raise UsageError("--replication-factor must be at least 1")
    if args.min_insync_replicas is None:
        args.min_insync_replicas = 2 if args.replication_factor >= 3 else 1
    if not 1 <= args.min_insync_replicas <= args.replication_factor:
        raise UsageError("--min-insync-replicas must be between 1 and --replication-factor")
    faults = [f.strip() for f in args.faults.split(",") if f.strip()]
    unknown = [f for f in faults if f not in FAULTS]
    if unknown:
        raise UsageError(f"--faults: unknown fault {unknown[0]!r} (choose from {', '.join(FAULTS)})")
    if faults and args.launch is None:
        raise UsageError("--faults needs --launch: faults are only injected into a cluster the tool launched")
    args.faults = faults
    if args.fault_duration is None:
        args.fault_duration = args.fault_interval / 2
    if not 0 < args.fault_duration < args.fault_interval:
        raise UsageError("--fault-duration must be positive and shorter than --fault-interval")
    if args.topic is None:
        args.topic = f"moldau-verify-{uuid.uuid4().hex[:8]}"
    for item in [*args.producer_property, *args.override, *args.topic_config]:
        if "=" not in item:
            raise UsageError(f"expected KEY=VALUE, got {item!r}")


def output(args: argparse.Namespace, report: Report | TxnReport, extra: dict[str, Any]) -> None:
    if args.json:
        print(json.dumps({**extra, **report.to_json()}, indent=2))
        return
    for key, value in extra.items():
        if key != "fault_log":
            print(f"{key}: {value}")
    print(report.table())


async def recheck(args: argparse.Namespace) -> tuple[Report | TxnReport, dict[str, Any]]:
    from .history import FINAL_READ
    from .workload import final_read

    path = Path(args.recheck)
    try:
        data = json.loads(path.read_text())
        txn_history = TxnHistory.from_json(data) if data.get("workload") == "txn" else None
        history = History() if txn_history else History.from_json(data)
        topic, partitions = str(data["meta"]["topic"]), int(data["meta"]["partitions"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ToolError(f"--recheck: cannot read a history from {path}: {exc}") from None
    if txn_history is not None:  # --workload txn
        return await recheck_txn(args, txn_history)
    history.reads.pop(FINAL_READ, None)
    connect = {**args.client_config, "bootstrap.servers": args.bootstrap_server}
    complete = await final_read(connect, topic, partitions, history, args.final_read_timeout)
    return check(history), {"topic": topic, "final_read_complete": complete}


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not args.verbose:  # the clients' retries under faults are expected; the checker judges the outcome
        logging.getLogger("moldau.client").setLevel(logging.ERROR)
    try:
        validate(args)
        if args.recheck:
            try:
                report, extra = asyncio.run(recheck(args))
            except (ClientError, OSError, TimeoutError) as exc:
                raise ToolError(f"--recheck: {exc}") from None
        else:
            why = fault_unavailable(args.faults)
            if why is not None:
                raise ToolError(why)
            report, extra = run_once(args)
    except ToolError as exc:
        report_error("moldau-verify", exc)
        return EXIT_USAGE if isinstance(exc, UsageError) else 1
    except Interrupted as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    output(args, report, extra)
    return 0 if report.ok else EXIT_ANOMALIES


def run_once(args: argparse.Namespace) -> tuple[Report | TxnReport, dict[str, Any]]:
    workdir = Path(args.data) if args.data else Path(tempfile.mkdtemp(prefix="moldau-verify-"))
    run = (TxnRun if args.workload == "txn" else Run)(args, workdir, progress=sys.stderr)
    t0 = time.monotonic()
    try:
        history = asyncio.run(run.execute())
    except asyncio.CancelledError:
        raise Interrupted(f"{run.interrupted or 'interrupted'}: the run was stopped"
                          + (" and the launched cluster with it" if args.launch else "")) from None
    except (ClientError, ValueError, TimeoutError, OSError, RuntimeError) as exc:
        raise ToolError(f"{exc} (cluster data and logs: {workdir})" if args.launch else str(exc)) from None
    report: Report | TxnReport
    if isinstance(run, TxnRun):  # --workload txn
        report = check_txn(run.txn_history)
        if args.history:
            run.txn_history.save(Path(args.history))
    else:
        report = check(history)
        if args.history:
            history.save(Path(args.history))
    extra: dict[str, Any] = {"topic": args.topic, "seconds": round(time.monotonic() - t0, 1),
                             "faults": dict(run.counters.faults), "final_read_complete": run.final_complete,
                             "fault_log": run.fault_log}
    if args.launch is not None:
        if args.tiered:
            extra["remote_segments"] = remote_segments(workdir)
        if report.ok and not args.data:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            extra["data"] = str(workdir)
    return report, extra


if __name__ == "__main__":
    sys.exit(main())
