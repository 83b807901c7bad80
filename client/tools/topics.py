"""``moldau-topics``: Kafka's kafka-topics — create, delete, list, describe topics and add partitions.

    moldau-topics --bootstrap-server 127.0.0.1:9092 --create --topic t --partitions 2 --replication-factor 1
    moldau-topics --bootstrap-server 127.0.0.1:9092 --describe --topic t
    moldau-topics --bootstrap-server 127.0.0.1:9092 --alter --topic t --partitions 4

Describe prints Kafka's lines: a topic line, then one tab-indented line per partition
(``Topic: t<TAB>Partition: 0<TAB>Leader: 1<TAB>Replicas: 1,2,3<TAB>Isr: 1,2,3``).
"""

from __future__ import annotations

import argparse
import base64
import re
import sys
from collections.abc import Sequence
from typing import Any

from moldau.tools.common import (
    ToolError,
    ToolParser,
    UsageError,
    add_bootstrap,
    admin_config,
    parse_key_values,
    run_tool,
)

ACTIONS = ("create", "delete", "list", "describe", "alter")


def _parser() -> ToolParser:
    p = ToolParser(prog="moldau-topics", description="Create, delete, describe, or list topics.")
    add_bootstrap(p)
    for action in ACTIONS:
        p.add_argument(f"--{action}", action="store_true")
    p.add_argument("--topic", help="the topic (a regular expression for --list/--describe/--delete)")
    p.add_argument("--partitions", type=_positive("--partitions"), default=None)
    p.add_argument("--replication-factor", type=_positive("--replication-factor"), default=None)
    p.add_argument("--replica-assignment", default=None, metavar="B:B,B:B",
                   help="broker ids per partition: partitions separated by ',', replicas by ':'")
    p.add_argument("--config", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--if-not-exists", action="store_true")
    p.add_argument("--if-exists", action="store_true")
    p.add_argument("--under-replicated-partitions", action="store_true")
    p.add_argument("--unavailable-partitions", action="store_true")
    p.add_argument("--exclude-internal", action="store_true")
    p.add_argument("--command-config", default=None, metavar="FILE", help="admin client config file")
    return p


def _positive(flag: str) -> Any:
    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag}: {text!r} is not a number") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"{flag}: must be at least 1, got {value}")
        return value
    return convert


def parse_replica_assignment(text: str) -> dict[int, list[int]]:
    """``"0:1,1:2"`` -> {0: [0, 1], 1: [1, 2]}; every partition must list the same number of distinct brokers."""
    out: dict[int, list[int]] = {}
    for index, part in enumerate(text.split(",")):
        try:
            brokers = [int(b) for b in part.split(":")]
        except ValueError:
            raise UsageError(f"--replica-assignment: {part!r} is not a ':'-separated list of broker ids") from None
        if len(set(brokers)) != len(brokers):
            raise UsageError(f"--replica-assignment: partition {index} lists a broker twice ({part})")
        out[index] = brokers
    if len({len(b) for b in out.values()}) > 1:
        raise UsageError("--replica-assignment: every partition needs the same number of replicas")
    return out


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    args = _parser().parse_args(argv)
    chosen = [a for a in ACTIONS if getattr(args, a)]
    if len(chosen) != 1:
        raise UsageError("Command must include exactly one action: --list, --describe, --create, --alter or --delete")
    args.action = chosen[0]
    if args.action in ("create", "alter", "delete") and not args.topic:
        raise UsageError(f"Missing required argument \"[topic]\" for --{args.action}")
    if args.action == "alter" and args.partitions is None:
        raise UsageError("Missing required argument \"[partitions]\" for --alter (moldau-configs changes configs)")
    if args.replica_assignment is not None:
        if args.replication_factor is not None or (args.partitions is not None and args.action != "alter"):
            raise UsageError("--replica-assignment cannot be used with --partitions or --replication-factor")
        args.assignment = parse_replica_assignment(args.replica_assignment)
    else:
        args.assignment = None
    args.configs = parse_key_values(args.config, "--config")
    if args.if_not_exists and args.action != "create":
        raise UsageError("--if-not-exists is only valid with --create")
    if args.if_exists and args.action not in ("alter", "delete", "describe"):
        raise UsageError("--if-exists is only valid with --alter, --delete or --describe")
    return args


def topic_id_text(topic_id: Any) -> str:
    """Kafka's Uuid.toString(): URL-safe base64 without padding."""
    if not topic_id:
        return "AAAAAAAAAAAAAAAAAAAAAA"
    raw = topic_id.bytes if hasattr(topic_id, "bytes") else bytes(topic_id)
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def describe_lines(desc: Any, topic_id: Any, under_replicated: bool = False,
                   unavailable: bool = False) -> list[str]:
    """Kafka's describe output for one topic (filters show only matching partitions, and no topic line)."""
    parts = desc.partitions
    lines: list[str] = []
    if not (under_replicated or unavailable):
        rf = len(parts[0].replicas) if parts else 0
        lines.append(f"Topic: {desc.name}\tTopicId: {topic_id_text(topic_id)}\tPartitionCount: {len(parts)}\t"
                     f"ReplicationFactor: {rf}\tConfigs: ")
    for p in parts:
        if under_replicated and len(p.isr) >= len(p.replicas):
            continue
        if unavailable and p.leader >= 0:
            continue
        leader = "none" if p.leader < 0 else str(p.leader)
        line = (f"\tTopic: {desc.name}\tPartition: {p.partition}\tLeader: {leader}\t"
                f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}")
        if p.offline:
            line += f"\tOffline: {','.join(map(str, p.offline))}"
        lines.append(line)
    return lines


def _matching(names: list[str], pattern: str | None) -> list[str]:
    if pattern is None:
        return names
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise ToolError(f"--topic: invalid regular expression {pattern!r}: {exc}") from None
    return [n for n in names if regex.fullmatch(n)]


def execute(args: argparse.Namespace, admin: Any, out: Any) -> int:
    from moldau.admin import NewTopic
    from moldau.protocol.errors import ErrorCode

    if args.action == "create":
        new = NewTopic(args.topic, args.partitions or -1, args.replication_factor or -1,
                       args.assignment, args.configs)
        errors = admin.create_topics([new], raise_errors=False)
        err = errors.get(args.topic)
        if err is not None:
            if err.code == ErrorCode.TOPIC_ALREADY_EXISTS and args.if_not_exists:
                return 0
            raise ToolError(f"Error while executing topic command : {err.detail or err}")
        print(f"Created topic {args.topic}.", file=out)
        return 0
    names = admin.list_topics(include_internal=not args.exclude_internal)
    matched = _matching(names, args.topic)
    if args.topic is not None and not matched and not args.if_exists and args.action != "list":
        raise ToolError(f"Error while executing topic command : Topic '{args.topic}' does not exist as expected")
    if args.action == "list":
        for name in matched:
            print(name, file=out)
    elif args.action == "delete":
        admin.delete_topics(matched)
    elif args.action == "alter":
        alter_partitions(args, admin, matched, out)
    else:
        descs = admin.describe_topics(matched)
        for desc in descs:
            topic_id = admin.cluster.topics[desc.name].topic_id if desc.name in admin.cluster.topics else None
            for line in describe_lines(desc, topic_id, args.under_replicated_partitions,
                                       args.unavailable_partitions):
                print(line, file=out)
    return 0


def alter_partitions(args: argparse.Namespace, admin: Any, names: list[str], out: Any) -> None:
    """--alter --partitions N [--replica-assignment ...]: the assignment lists every partition, as Kafka's tool
    takes it; the entries past the current count place the new partitions."""
    from moldau.admin import NewPartitions

    for name in names:
        current = len(admin.describe_topics([name])[0].partitions)
        assignment = None
        if args.assignment is not None:
            assignment = [args.assignment[p] for p in sorted(args.assignment) if p >= current]
        errors = admin.create_partitions({name: NewPartitions(args.partitions, assignment)}, raise_errors=False)
        err = errors.get(name)
        if err is not None:
            raise ToolError(f"Error while executing topic command : {err.detail or err}")
    print("WARNING: If partitions are increased for a topic that has a key, the partition logic or ordering of "
          "the messages will be affected", file=out)
    print("Adding partitions succeeded!", file=out)


def main(argv: Sequence[str] | None = None) -> int:
    def body() -> int:
        from moldau.sync import AdminClient

        args = parse_args(sys.argv[1:] if argv is None else argv)
        conf = admin_config(args, "moldau-topics")
        with AdminClient(conf) as admin:
            return execute(args, admin, sys.stdout)
    return run_tool(body, "moldau-topics", argv)


if __name__ == "__main__":
    sys.exit(main())
