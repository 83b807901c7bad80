"""``moldau-consumer-groups``: list consumer groups and describe their members, committed offsets and lag.

Modelled on Kafka's ``kafka-consumer-groups``::

    moldau-consumer-groups --bootstrap-server 127.0.0.1:9092 --list
    moldau-consumer-groups --bootstrap-server 127.0.0.1:9092 --describe --group my-group [--json]
    moldau-consumer-groups --bootstrap-server 127.0.0.1:9092 --delete --group my-group
    moldau-consumer-groups --bootstrap-server 127.0.0.1:9092 --reset-offsets --group g --topic t --to-earliest \
        [--dry-run | --execute]

For every partition the group has committed offsets for, or that a member is assigned, it shows the committed
offset, the log end offset, the lag (log end offset minus committed offset) and the member that owns it. It talks
to the cluster through Moldau's own client (cluster core, ListGroups/DescribeGroups/OffsetFetch/ListOffsets).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, NoReturn

from moldau.assignors import decode_assignment
from moldau.cluster import Cluster, check_error
from moldau.config import consumer_config
from moldau.errors import ClientError
from moldau.fetcher import EARLIEST, LATEST, Fetcher, TopicPartition
from moldau.protocol.messages.group import DELETE_GROUPS, DESCRIBE_GROUPS, LIST_GROUPS
from moldau.protocol.messages.offsets import OFFSET_COMMIT, OFFSET_FETCH
from moldau.tools.common import EXIT_USAGE, add_common_flags, report_error

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


class Admin:
    """The few group requests this tool needs, on Moldau's cluster core."""

    def __init__(self, bootstrap: str, timeout_ms: int) -> None:
        self.config = consumer_config({"bootstrap.servers": bootstrap, "request.timeout.ms": timeout_ms,
                                       "client.id": "moldau-consumer-groups"})
        self.cluster = Cluster(self.config)

    async def __aenter__(self) -> Admin:
        await self.cluster.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.cluster.close()

    async def _to(self, node: int, api: Any, body: dict[str, Any], max_version: int | None = None) -> dict[str, Any]:
        conn = await self.cluster.connection(node)
        return await self.cluster.send(node, api, body, conn.version_for(api, max_version))

    async def list_groups(self) -> list[dict[str, Any]]:
        """Every broker lists the groups it coordinates: ask them all."""
        groups: dict[str, dict[str, Any]] = {}
        for node in sorted(self.cluster.brokers):
            response = await self._to(node, LIST_GROUPS, {"states_filter": [], "types_filter": []}, 4)
            check_error(response["error_code"])
            for g in response["groups"]:
                groups[g["group_id"]] = {"group_id": g["group_id"], "protocol_type": g["protocol_type"],
                                         "state": g.get("group_state", "")}
        return sorted(groups.values(), key=lambda g: str(g["group_id"]))

    async def describe_group(self, group: str) -> GroupDescription:
        node = await self.cluster.coordinator(group)
        described = (await self._to(node, DESCRIBE_GROUPS, {"groups": [group],
                                                            "include_authorized_operations": False}))["groups"][0]
        check_error(described["error_code"], f"group {group}")
        owners: dict[tuple[str, int], dict[str, Any]] = {}
        members = []
        for m in described["members"]:
            assigned: list[tuple[str, int]] = []
            if described["protocol_type"] == "consumer" and m["member_assignment"]:
                assigned = [(t, p) for t, ps in decode_assignment(bytes(m["member_assignment"])).items() for p in ps]
            for tp in assigned:
                owners[tp] = m
            members.append({"consumer_id": m["member_id"], "group_instance_id": m.get("group_instance_id"),
                            "host": m["client_host"], "client_id": m["client_id"],
                            "partitions": [f"{t}-{p}" for t, p in sorted(assigned)]})
        committed = await self._committed(node, group)
        partitions = sorted(set(committed) | set(owners))
        ends: dict[TopicPartition, tuple[int, int]] = {}
        if partitions:
            await self.cluster.refresh_metadata(sorted({t for t, _ in partitions}))
            ends = await Fetcher(self.cluster, self.config).list_offsets(
                [TopicPartition(t, p) for t, p in partitions], LATEST)
        rows = []
        for t, p in partitions:
            current = committed.get((t, p))
            end = ends[TopicPartition(t, p)][0] if TopicPartition(t, p) in ends else None
            owner = owners.get((t, p))
            rows.append(PartitionRow(group, t, p, current, end,
                                     None if current is None or end is None else max(end - current, 0),
                                     owner["member_id"] if owner else None, owner["client_host"] if owner else None,
                                     owner["client_id"] if owner else None))
        return GroupDescription(group, described["group_state"], described["protocol_data"], members, rows)

    async def _committed(self, node: int, group: str) -> dict[tuple[str, int], int]:
        response = await self._to(node, OFFSET_FETCH, {"group_id": group, "topics": None, "require_stable": False}, 7)
        check_error(response.get("error_code", 0), f"offsets of group {group}")
        return {(t["name"], p["partition_index"]): p["committed_offset"] for t in response["topics"]
                for p in t["partitions"] if p["committed_offset"] >= 0 and not p["error_code"]}

    async def delete_group(self, group: str) -> None:
        node = await self.cluster.coordinator(group)
        response = await self._to(node, DELETE_GROUPS, {"groups_names": [group]})
        for r in response["results"]:
            check_error(r["error_code"], f"group {r['group_id']}")


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


# ---------------------------------------------------------------------------------------------- --reset-offsets
class UsageError(ClientError):
    """Bad flag value; the message names the flag."""


_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")


def parse_duration_ms(text: str) -> int:
    """ISO-8601 duration as Kafka's --by-duration takes it (PnDTnHnMnS) -> milliseconds."""
    m = _DURATION.match(text)
    if not m or text in ("P", "PT") or text.endswith("T"):
        raise UsageError(f"--by-duration: {text!r} is not a duration like P1DT2H3M4S")
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in m.groups())
    return int((((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000)


def parse_datetime_ms(text: str) -> int:
    """Kafka's --to-datetime format YYYY-MM-DDTHH:mm:SS.sss (UTC unless an offset such as +02:00 is given)."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"--to-datetime: {text!r} is not YYYY-MM-DDTHH:mm:SS.sss") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def parse_topic_spec(text: str) -> tuple[str, list[int] | None]:
    """``t`` or ``t:0,2`` (Kafka's --topic form for --reset-offsets)."""
    topic, sep, parts = text.partition(":")
    if not sep:
        return topic, None
    try:
        return topic, [int(p) for p in parts.split(",") if p]
    except ValueError:
        raise UsageError(f"--topic {text!r}: partitions must be integers (topic:0,1)") from None


def reset_target(args: argparse.Namespace, current: int | None, earliest: int, latest: int,
                 by_time: int | None) -> int:
    """The new offset of one partition for the chosen --to-*/--shift-by/--by-duration, clamped to the log."""
    if args.to_earliest:
        target = earliest
    elif args.to_latest:
        target = latest
    elif args.to_offset is not None:
        target = args.to_offset
    elif args.shift_by is not None:
        target = (current if current is not None else latest) + args.shift_by
    elif args.to_current:
        target = current if current is not None else latest
    else:  # --to-datetime / --by-duration: the first offset at or after that time, else the end
        target = latest if by_time is None or by_time < 0 else by_time
    return min(max(target, earliest), latest)


async def reset_offsets(admin: Admin, group: str, args: argparse.Namespace) -> list[tuple[str, int, int]]:
    node = await admin.cluster.coordinator(group)
    described = (await admin._to(node, DESCRIBE_GROUPS, {"groups": [group],
                                                         "include_authorized_operations": False}))["groups"][0]
    state = described["group_state"]
    if args.execute and state not in ("Empty", "Dead"):
        raise UsageError(f"--execute: assignments can only be reset if the group '{group}' is inactive, "
                         f"but the current state is {state}")
    committed = await admin._committed(node, group)
    if args.all_topics:
        tps = sorted(committed)
    else:
        tps = []
        for spec in args.topic:
            topic, parts = parse_topic_spec(spec)
            known = await admin.cluster.wait_for_topic(topic, admin.config["request.timeout.ms"] / 1000)
            tps += [(topic, p) for p in (parts if parts is not None else known)]
    if not tps:
        return []
    await admin.cluster.refresh_metadata(sorted({t for t, _ in tps}))
    fetcher = Fetcher(admin.cluster, admin.config)
    keys = [TopicPartition(t, p) for t, p in tps]
    earliest = await fetcher.list_offsets(keys, EARLIEST)
    latest = await fetcher.list_offsets(keys, LATEST)
    by_time: dict[TopicPartition, tuple[int, int]] = {}
    if args.to_datetime is not None or args.by_duration is not None:
        when = (parse_datetime_ms(args.to_datetime) if args.to_datetime is not None
                else int(time.time() * 1000) - parse_duration_ms(args.by_duration))
        by_time = await fetcher.list_offsets(keys, when)
    plan = [(tp.topic, tp.partition, reset_target(args, committed.get((tp.topic, tp.partition)), earliest[tp][0], latest[tp][0],
                                                  by_time[tp][0] if tp in by_time else None)) for tp in keys]
    if args.execute:
        topics: dict[str, list[dict[str, Any]]] = {}
        for t, p, off in plan:
            topics.setdefault(t, []).append({"partition_index": p, "committed_offset": off, "committed_metadata": ""})
        response = await admin._to(node, OFFSET_COMMIT, {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}, 8)
        for t in response["topics"]:
            for part in t["partitions"]:
                check_error(part["error_code"], f"commit {t['name']}-{part['partition_index']}")
    return plan


def render_reset(group: str, plan: list[tuple[str, int, int]]) -> str:
    rows = [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]] + [[group, t, str(p), str(o)] for t, p, o in plan]
    return _table(rows)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # the tools' one style (tools/common.py): usage errors exit 2
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


async def _run(args: argparse.Namespace) -> None:
    async with Admin(args.bootstrap_server, args.timeout_ms) as admin:
        if args.list:
            groups = await admin.list_groups()
            print(json.dumps(groups, indent=1) if args.json else "\n".join(str(g["group_id"]) for g in groups))
        elif args.reset_offsets:
            for g in args.group:
                print(render_reset(g, await reset_offsets(admin, g, args)))
        elif args.delete:
            for g in args.group:
                await admin.delete_group(g)
                print(f"Deletion of requested consumer groups ('{g}') was successful.")
        else:
            descriptions = [await admin.describe_group(g) for g in args.group]
            if args.json:
                print(json.dumps([asdict(d) for d in descriptions], indent=1))
            else:
                print("\n\n".join(render(d) for d in descriptions))


def main(argv: Sequence[str] | None = None) -> int:
    parser = _Parser(prog="moldau-consumer-groups", description=(__doc__ or "").split("\n\n")[0].replace("``", ""))
    add_common_flags(parser, verbose=False)
    parser.add_argument("--bootstrap-server", required=True, help="host:port of a broker")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list the consumer groups")
    action.add_argument("--describe", action="store_true", help="describe the groups given with --group")
    action.add_argument("--delete", action="store_true", help="delete the (empty) groups given with --group")
    action.add_argument("--reset-offsets", action="store_true", help="reset the committed offsets of --group")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--to-earliest", action="store_true", help="reset to the log start")
    target.add_argument("--to-latest", action="store_true", help="reset to the log end")
    target.add_argument("--to-current", action="store_true", help="reset to the committed offset")
    target.add_argument("--to-offset", type=int, help="reset to this offset")
    target.add_argument("--shift-by", type=int, help="move the committed offset by N (may be negative)")
    target.add_argument("--to-datetime", help="reset to the first offset at or after YYYY-MM-DDTHH:mm:SS.sss")
    target.add_argument("--by-duration", help="reset to the first offset after now minus PnDTnHnMnS")
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument("--all-topics", action="store_true", help="every topic the group has offsets for")
    scope.add_argument("--topic", action="append", default=[], help="topic or topic:p1,p2 (repeatable)")
    run = parser.add_mutually_exclusive_group()
    run.add_argument("--dry-run", action="store_true", help="only show the new offsets (the default)")
    run.add_argument("--execute", action="store_true", help="commit the new offsets")
    parser.add_argument("--group", action="append", default=[], help="a group to describe (repeatable)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--timeout-ms", type=int, default=30000, help="request timeout")
    args = parser.parse_args(argv)
    if (args.describe or args.delete or args.reset_offsets) and not args.group:
        parser.error("--describe, --delete and --reset-offsets need at least one --group")
    if args.reset_offsets:
        if not (args.all_topics or args.topic):
            parser.error("--reset-offsets needs --all-topics or --topic")
        if not any((args.to_earliest, args.to_latest, args.to_current, args.to_offset is not None,
                    args.shift_by is not None, args.to_datetime, args.by_duration)):
            parser.error("--reset-offsets needs one of --to-earliest, --to-latest, --to-current, --to-offset, "
                         "--shift-by, --to-datetime, --by-duration")
        try:
            if args.to_datetime:
                parse_datetime_ms(args.to_datetime)
            if args.by_duration:
                parse_duration_ms(args.by_duration)
        except UsageError as exc:
            parser.error(str(exc))
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        asyncio.run(_run(args))
        return 0
    except (ClientError, OSError) as exc:  # a CLI: report, do not dump a traceback
        report_error("moldau-consumer-groups", exc)
        return 1


if __name__ == "__main__":
    sys.exit(main())
