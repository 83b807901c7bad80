"""``moldau-transactions``: Kafka's kafka-transactions.sh verbs ``list``, ``describe`` and ``describe-producers``
on Moldau's ``AdminClient`` (client/admin_txn.py).

    moldau-transactions --bootstrap-server 127.0.0.1:9092 list
    moldau-transactions --bootstrap-server 127.0.0.1:9092 describe --transactional-id my-app
    moldau-transactions --bootstrap-server 127.0.0.1:9092 describe-producers --topic t --partition 0 [--broker-id 1]

Tables as Kafka prints them: a header row, then one row per item, columns padded to their widest cell and separated
by a tab; a missing value (no open transaction) is ``None``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from moldau.tools.common import ToolParser, UsageError, add_bootstrap, admin_config, run_tool

LIST_HEADERS = ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
DESCRIBE_HEADERS = ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                    "TopicPartitions"]
PRODUCERS_HEADERS = ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                     "CurrentTransactionStartOffset"]


def _parser() -> ToolParser:
    p = ToolParser(prog="moldau-transactions", description="List and describe transactions and producers.")
    add_bootstrap(p)
    p.add_argument("--command-config", default=None, metavar="FILE", help="admin client config file")
    verbs = p.add_subparsers(dest="verb", metavar="COMMAND")
    verbs.add_parser("list", help="list transactions")
    describe = verbs.add_parser("describe", help="describe the state of an active transactional id")
    describe.add_argument("--transactional-id", required=True, help="the transactional id to describe")
    producers = verbs.add_parser("describe-producers", help="describe the states of active producers of a "
                                                            "topic partition")
    producers.add_argument("--topic", required=True, help="topic name")
    producers.add_argument("--partition", required=True, type=int, help="partition number")
    producers.add_argument("--broker-id", type=int, default=None,
                           help="the broker to ask (default: the partition leader)")
    return p


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    args = _parser().parse_args(argv)
    if args.verb is None:
        raise UsageError("a command is required: list, describe or describe-producers")
    return args


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    return "\n".join("\t".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
                     for row in [headers, *rows])


def _none(value: int) -> str:
    return "None" if value < 0 else str(value)


def main(argv: Sequence[str] | None = None) -> int:
    def body() -> int:
        from moldau.errors import KafkaError
        from moldau.sync import AdminClient

        args = parse_args(sys.argv[1:] if argv is None else argv)
        with AdminClient(admin_config(args, "moldau-transactions")) as admin:
            if args.verb == "list":
                rows = [[t.transactional_id, str(t.coordinator_id), str(t.producer_id), t.state]
                        for t in admin.list_transactions()]
                print(table(LIST_HEADERS, rows))
            elif args.verb == "describe":
                d = admin.describe_transactions([args.transactional_id])[args.transactional_id]
                assert not isinstance(d, KafkaError)  # raise_errors=True raised it
                start = d.transaction_start_time_ms
                duration = "None" if start < 0 else str(int(time.time() * 1000) - start)
                parts = ",".join(f"{tp.topic}-{tp.partition}" for tp in d.topic_partitions)
                print(table(DESCRIBE_HEADERS, [[
                    str(d.coordinator_id), args.transactional_id, str(d.producer_id), str(d.producer_epoch),
                    d.state, str(d.transaction_timeout_ms), _none(start), duration, parts]]))
            else:
                tp = (args.topic, args.partition)
                states = next(iter(admin.describe_producers([tp], broker_id=args.broker_id).values()))
                assert not isinstance(states, KafkaError)
                print(table(PRODUCERS_HEADERS, [[
                    str(s.producer_id), str(s.producer_epoch), _none(s.coordinator_epoch), str(s.last_sequence),
                    str(s.last_timestamp), _none(s.current_transaction_start_offset)] for s in states]))
        return 0
    return run_tool(body, "moldau-transactions", argv)


if __name__ == "__main__":
    sys.exit(main())
