"""``moldau-consumer-groups``: list consumer groups and describe their members, committed offsets and lag.

Modelled on Kafka's ``kafka-consumer-groups``::

    moldau-consumer-groups --bootstrap-server 127.0.0.1:9092 --list
    moldau-consumer-groups --bootstrap-server 127.0.0.1:9092 --describe --group my-group [--json]

For every partition the group has committed offsets for, or that a member is assigned, it shows the committed
offset, the log end offset, the lag (log end offset minus committed offset) and the member that owns it.

Until Moldau's own client library exists (``client/`` has no admin client yet), this tool talks to the cluster
through kafka-python's ``KafkaAdminClient`` (kafka-python 3.0, a test dependency: ``pip install kafka-python``).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

log = logging.getLogger("moldau.consumer_groups")


@dataclass(slots=True)
class PartitionRow:
    group: str
    topic: str
    partition: int
    current_offset: int | None  # None: nothing committed
    log_end_offset: int | None
    lag: int | None
    consumer_id: str | None
    host: str | None
    client_id: str | None


@dataclass(slots=True)
class GroupDescription:
    group: str
    state: str
    protocol: str
    members: list[dict[str, Any]]
    partitions: list[PartitionRow]


def _admin(bootstrap: str, timeout_ms: int) -> Any:
    try:
        from kafka.admin import KafkaAdminClient
    except ImportError:  # pragma: no cover - depends on the environment
        sys.exit("moldau-consumer-groups needs kafka-python for now: pip install 'kafka-python>=3.0,<3.1'")
    return KafkaAdminClient(bootstrap_servers=bootstrap, client_id="moldau-consumer-groups",
                            request_timeout_ms=timeout_ms)


def list_groups(admin: Any) -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = admin.list_groups()
    return sorted(groups, key=lambda g: g["group_id"])


def describe_group(admin: Any, group: str) -> GroupDescription:
    from kafka import TopicPartition
    from kafka.admin import OffsetSpec

    described = admin.describe_groups([group])[group]
    owners: dict[tuple[str, int], dict[str, Any]] = {}
    members = []
    for m in described.get("members", []):
        assigned: list[tuple[str, int]] = []
        assignment = m.get("member_assignment") or {}
        for entry in assignment.get("assigned_partitions", []) if isinstance(assignment, dict) else []:
            assigned += [(entry["topic"], p) for p in entry["partitions"]]
        for tp in assigned:
            owners[tp] = m
        members.append({"consumer_id": m["member_id"], "group_instance_id": m.get("group_instance_id"),
                        "host": m["client_host"], "client_id": m["client_id"],
                        "partitions": [f"{t}-{p}" for t, p in sorted(assigned)]})
    committed = admin.list_group_offsets({group: None}).get(group, {})
    partitions = sorted({(tp.topic, tp.partition) for tp in committed} | set(owners))
    ends: dict[Any, Any] = {}
    if partitions:
        ends = admin.list_partition_offsets({TopicPartition(t, p): OffsetSpec.LATEST for t, p in partitions})
    rows = []
    for t, p in partitions:
        tp = TopicPartition(t, p)
        c = committed.get(tp)
        current = c.offset if c is not None and c.offset >= 0 else None
        end = ends[tp].offset if tp in ends else None
        owner = owners.get((t, p))
        rows.append(PartitionRow(group, t, p, current, end,
                                 None if current is None or end is None else max(end - current, 0),
                                 owner["member_id"] if owner else None, owner["client_host"] if owner else None,
                                 owner["client_id"] if owner else None))
    return GroupDescription(group, described.get("group_state", ""), described.get("protocol_data", ""), members,
                            rows)


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows)


def render(desc: GroupDescription) -> str:
    def show(v: object) -> str:
        return "-" if v is None else str(v)

    header = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
              "CLIENT-ID"]
    rows = [header] + [[r.group, r.topic, str(r.partition), show(r.current_offset), show(r.log_end_offset),
                        show(r.lag), show(r.consumer_id), show(r.host), show(r.client_id)] for r in desc.partitions]
    text = f"Consumer group '{desc.group}' is {desc.state} ({len(desc.members)} members"
    text += f", assignor {desc.protocol})\n\n" if desc.protocol else ")\n\n"
    if len(rows) == 1:
        return text + "(no committed offsets and no assigned partitions)"
    return text + _table(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="moldau-consumer-groups", description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-server", required=True, help="host:port of a broker")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list the consumer groups")
    action.add_argument("--describe", action="store_true", help="describe the groups given with --group")
    parser.add_argument("--group", action="append", default=[], help="a group to describe (repeatable)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--timeout-ms", type=int, default=30000, help="request timeout")
    args = parser.parse_args(argv)
    if args.describe and not args.group:
        parser.error("--describe needs at least one --group")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    admin = _admin(args.bootstrap_server, args.timeout_ms)
    try:
        if args.list:
            groups = list_groups(admin)
            if args.json:
                print(json.dumps(groups, indent=1))
            else:
                for g in groups:
                    print(g["group_id"])
            return 0
        descriptions = [describe_group(admin, g) for g in args.group]
        if args.json:
            print(json.dumps([asdict(d) for d in descriptions], indent=1))
        else:
            print("\n\n".join(render(d) for d in descriptions))
        return 0
    except Exception as exc:  # a CLI: report, do not dump a traceback
        print(f"moldau-consumer-groups: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        admin.close()


if __name__ == "__main__":
    sys.exit(main())
