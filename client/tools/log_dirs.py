"""``moldau-log-dirs``: Kafka's kafka-log-dirs -- the log dirs of brokers, with each replica's size and lag.

    moldau-log-dirs --bootstrap-server 127.0.0.1:9092 --describe [--broker-list 1,2] [--topic-list t1,t2]

Prints Kafka's two progress lines, then one line of Kafka's JSON:
``{"brokers":[{"broker":1,"logDirs":[{"logDir":"/data","error":null,"partitions":[{"partition":"t-0",
"size":123,"offsetLag":0,"isFuture":false}]}]}],"version":1}``; an offline log dir's ``error`` names Kafka's
exception class.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from moldau.tools.common import (
    ToolParser,
    UsageError,
    add_bootstrap,
    admin_config,
    run_tool,
)

# Kafka's exception class per error code, as its JSON prints them.
EXCEPTIONS = {56: "org.apache.kafka.common.errors.KafkaStorageException"}


def _parser() -> ToolParser:
    p = ToolParser(prog="moldau-log-dirs", description="Describe the log dirs of brokers.")
    add_bootstrap(p)
    p.add_argument("--describe", action="store_true", help="REQUIRED: describe the log dirs")
    p.add_argument("--broker-list", metavar="ID[,ID...]", help="broker ids to query (default: all)")
    p.add_argument("--topic-list", metavar="TOPIC[,TOPIC...]", help="topics to describe (default: all)")
    p.add_argument("--command-config", default=None, metavar="FILE", help="admin client config file")
    return p


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    args = _parser().parse_args(argv)
    if not args.describe:
        raise UsageError("Missing required argument \"[describe]\"")
    args.brokers = None
    if args.broker_list:
        try:
            args.brokers = [int(b) for b in args.broker_list.split(",") if b.strip()]
        except ValueError:
            raise UsageError(f"--broker-list: expected comma-separated broker ids, got {args.broker_list!r}") from None
    args.topics = [t for t in args.topic_list.split(",") if t] if args.topic_list else None
    return args


def to_json(described: dict[int, Any], topics: list[str] | None) -> str:
    brokers = []
    for broker, dirs in sorted(described.items()):
        log_dirs = []
        for d in dirs:
            error = None if d.error is None else EXCEPTIONS.get(d.error.raw_code, type(d.error).__name__)
            parts = [{"partition": f"{t}-{p}", "size": r.size, "offsetLag": r.offset_lag, "isFuture": r.is_future}
                     for (t, p), r in sorted(d.replicas.items()) if topics is None or t in topics]
            log_dirs.append({"logDir": d.path, "error": error, "partitions": parts})
        brokers.append({"broker": broker, "logDirs": log_dirs})
    return json.dumps({"brokers": brokers, "version": 1}, separators=(",", ":"))


def main(argv: Sequence[str] | None = None) -> int:
    def body() -> int:
        from moldau.sync import AdminClient

        args = parse_args(sys.argv[1:] if argv is None else argv)
        conf = admin_config(args, "moldau-log-dirs")
        print("Querying brokers for log directories information", file=sys.stdout)
        with AdminClient(conf) as admin:
            described = admin.describe_log_dirs(args.brokers)
        print(f"Received log directory information from brokers {','.join(map(str, sorted(described)))}",
              file=sys.stdout)
        print(to_json(described, args.topics), file=sys.stdout)
        return 0
    return run_tool(body, "moldau-log-dirs", argv)


if __name__ == "__main__":
    sys.exit(main())
