"""``moldau-consumer-groups``: list consumer groups, describe their members, state, committed offsets and lag,
delete groups or their offsets, reset offsets. Kafka's ``kafka-consumer-groups`` flags::

    moldau-consumer-groups --bootstrap-server 127.0.0.1:9092 --list [--state [Stable,Empty]]
    moldau-consumer-groups --bootstrap-server 127.0.0.1:9092 --describe (--group g ... | --all-groups) \
        [--offsets | --members [--verbose] | --state] [--json]
    moldau-consumer-groups --bootstrap-server 127.0.0.1:9092 --delete (--group g ... | --all-groups)
    moldau-consumer-groups --bootstrap-server 127.0.0.1:9092 --delete-offsets --group g --topic t[:0,1]
    moldau-consumer-groups --bootstrap-server 127.0.0.1:9092 --reset-offsets (--group g | --all-groups) \
        (--all-topics | --topic t[:0,1] ...) --to-earliest [--dry-run | --execute | --export]

For every partition the group has committed offsets for, or that a member is assigned, --describe shows the
committed offset, the log end offset, the lag (log end offset minus committed offset) and the member that owns it.
It rides Moldau's AdminClient (its consumer-group methods and list_offsets); ``--command-config`` gives that
client's settings (security) as a properties file.
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
from pathlib import Path
from typing import Any, NoReturn

from moldau.admin import AdminClient, OffsetResult
from moldau.admin_groups import GROUP_STATES, ConsumerGroupDescription, MemberDescription
from moldau.errors import ClientError, KafkaError
from moldau.fetcher import TopicPartition
from moldau.tools.common import EXIT_USAGE, ToolError, add_common_flags, admin_config, report_error

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
    coordinator: str = "-"  # host:port (id)


async def describe_group(admin: AdminClient, group: str) -> GroupDescription:
    """Members, committed offsets, log end offsets and lag of one group (AdminClient's group methods)."""
    desc = _described((await admin.describe_consumer_groups([group]))[group])
    owners: dict[TopicPartition, MemberDescription] = {tp: m for m in desc.members for tp in m.assignment}
    members = [{"consumer_id": m.member_id, "group_instance_id": m.group_instance_id, "host": m.host,
                "client_id": m.client_id, "partitions": [f"{t}-{p}" for t, p in m.assignment]} for m in desc.members]
    committed = await admin.list_consumer_group_offsets(group)
    partitions = sorted(set(committed) | set(owners))
    ends = await admin.list_offsets({tp: "latest" for tp in partitions}, raise_errors=False) if partitions else {}
    rows = []
    for tp in partitions:
        om = committed.get(tp)
        current = None if om is None else om.offset
        end_result = ends.get(tp)
        end = end_result.offset if isinstance(end_result, OffsetResult) else None
        owner = owners.get(tp)
        rows.append(PartitionRow(group, tp.topic, tp.partition, current, end,
                                 None if current is None or end is None else max(end - current, 0),
                                 owner.member_id if owner else None, owner.host if owner else None,
                                 owner.client_id if owner else None))
    coordinator = admin.cluster.brokers.get(desc.coordinator)
    where = f"{coordinator.host}:{coordinator.port}" if coordinator else "-"
    return GroupDescription(group, desc.state, desc.partition_assignor, members, rows,
                            f"{where} ({desc.coordinator})")


def _described(result: ConsumerGroupDescription | KafkaError) -> ConsumerGroupDescription:
    if isinstance(result, KafkaError):
        raise result
    return result


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


def render_members(desc: GroupDescription, verbose: bool) -> str:
    """Kafka's --members table (--verbose adds GROUP-INSTANCE-ID and ASSIGNMENT)."""
    if not desc.members:
        return f"Consumer group '{desc.group}' has no active members."
    header = ["GROUP", "CONSUMER-ID"] + (["GROUP-INSTANCE-ID"] if verbose else []) + ["HOST", "CLIENT-ID",
                                                                                     "#PARTITIONS"]
    rows = [header + (["ASSIGNMENT"] if verbose else [])]
    for m in desc.members:
        row = [desc.group, m["consumer_id"]] + ([m["group_instance_id"] or "-"] if verbose else [])
        row += [m["host"], m["client_id"], str(len(m["partitions"]))]
        if verbose:
            by_topic: dict[str, list[str]] = {}
            for name in m["partitions"]:
                topic, _, part = name.rpartition("-")
                by_topic.setdefault(topic, []).append(part)
            row.append(",".join(f"{t}({','.join(ps)})" for t, ps in sorted(by_topic.items())) or "-")
        rows.append(row)
    return _table(rows)


def render_state(desc: GroupDescription) -> str:
    """Kafka's --state table."""
    return _table([["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
                   [desc.group, desc.coordinator, desc.protocol or "-", desc.state, str(len(desc.members))]])


async def _partitions_in_scope(admin: AdminClient, args: argparse.Namespace,
                               committed: Sequence[TopicPartition]) -> list[TopicPartition]:
    if args.all_topics:
        return sorted(committed)
    tps: list[TopicPartition] = []
    for spec in args.topic:
        topic, parts = parse_topic_spec(spec)
        if parts is None:
            (described,) = await admin.describe_topics([topic])
            parts = [p.partition for p in described.partitions]
        tps += [TopicPartition(topic, p) for p in parts]
    return tps


def read_reset_file(path: str, group: str) -> dict[TopicPartition, int]:
    """--from-file: Kafka's CSV (``topic,partition,offset``, or ``group,topic,partition,offset`` rows as --export
    writes them for several groups; rows of other groups are skipped)."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UsageError(f"--from-file: cannot read {path}: {exc.strerror or exc}") from None
    plan: dict[TopicPartition, int] = {}
    for number, line in enumerate(lines, 1):
        cells = [c.strip() for c in line.split(",")]
        if not line.strip():
            continue
        if len(cells) == 4:
            if cells[0] != group:
                continue
            cells = cells[1:]
        try:
            if len(cells) != 3:
                raise ValueError
            plan[TopicPartition(cells[0], int(cells[1]))] = int(cells[2])
        except ValueError:
            raise UsageError(f"--from-file: {path} line {number}: expected topic,partition,offset, "
                             f"got {line!r}") from None
    return plan


async def reset_offsets(admin: AdminClient, group: str, args: argparse.Namespace) -> list[tuple[str, int, int]]:
    desc = _described((await admin.describe_consumer_groups([group]))[group])
    if args.execute and desc.state not in ("Empty", "Dead"):
        raise UsageError(f"--execute: assignments can only be reset if the group '{group}' is inactive, "
                         f"but the current state is {desc.state}")
    committed = await admin.list_consumer_group_offsets(group)
    from_file = read_reset_file(args.from_file, group) if args.from_file else None
    tps = sorted(from_file) if from_file is not None else await _partitions_in_scope(admin, args, list(committed))
    if not tps:
        return []
    earliest = await admin.list_offsets({tp: "earliest" for tp in tps})
    latest = await admin.list_offsets({tp: "latest" for tp in tps})
    by_time: dict[tuple[str, int], OffsetResult | KafkaError] = {}
    if args.to_datetime is not None or args.by_duration is not None:
        when = (parse_datetime_ms(args.to_datetime) if args.to_datetime is not None
                else int(time.time() * 1000) - parse_duration_ms(args.by_duration))
        by_time = await admin.list_offsets({tp: when for tp in tps})
    plan = []
    for tp in tps:
        low, high = _offset(earliest[tp]), _offset(latest[tp])
        if from_file is not None:
            target = min(max(from_file[tp], low), high)
        else:
            om = committed.get(tp)
            found = by_time.get(tp)
            target = reset_target(args, None if om is None else om.offset, low, high,
                                  found.offset if isinstance(found, OffsetResult) else None)
        plan.append((tp.topic, tp.partition, target))
    if args.execute:
        await admin.alter_consumer_group_offsets(group, {(t, p): off for t, p, off in plan})
    return plan


def _offset(result: OffsetResult | KafkaError) -> int:
    if isinstance(result, KafkaError):
        raise result
    return result.offset


def render_reset(group: str, plan: list[tuple[str, int, int]]) -> str:
    rows = [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]] + [[group, t, str(p), str(o)] for t, p, o in plan]
    return _table(rows)


def export_reset(plans: dict[str, list[tuple[str, int, int]]]) -> str:
    """--export: Kafka's CSV, with the group column when more than one group was reset (what --from-file reads)."""
    many = len(plans) > 1
    return "\n".join((f"{g}," if many else "") + f"{t},{p},{o}" for g, plan in plans.items() for t, p, o in plan)


async def delete_offsets(admin: AdminClient, group: str, args: argparse.Namespace) -> str:
    tps = await _partitions_in_scope(admin, args, [])
    results = await admin.delete_consumer_group_offsets(group, tps, raise_errors=False)
    rows = [["TOPIC", "PARTITION", "STATUS"]]
    for tp in tps:
        error = results.get(tp)
        rows.append([tp.topic, str(tp.partition), "Successful" if error is None else f"Error: {error.code.name}"])
    failed = any(e is not None for e in results.values())
    head = f"{'Request failed' if failed else 'Request succeed'} for deleting offsets of group '{group}'."
    if failed:
        raise ClientError(head + "\n" + _table(rows))
    return head + "\n\n" + _table(rows)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # the tools' one style (tools/common.py): usage errors exit 2
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


async def _groups(admin: AdminClient, args: argparse.Namespace) -> list[str]:
    if args.all_groups:
        return [g.group_id for g in await admin.list_consumer_groups()]
    return list(args.group)


async def _run(args: argparse.Namespace) -> None:
    conf = admin_config(args, "moldau-consumer-groups")
    conf.setdefault("request.timeout.ms", args.timeout_ms)
    async with AdminClient(conf) as admin:
        if args.list:
            listed = await admin.list_consumer_groups(_states(args.state) if args.state else None)
            if args.json:
                print(json.dumps([{"group_id": g.group_id, "protocol_type": g.protocol_type, "state": g.state or ""}
                                  for g in listed], indent=1))
            elif args.state is not None:
                print(_table([["GROUP", "STATE"]] + [[g.group_id, g.state or "-"] for g in listed]))
            else:
                print("\n".join(g.group_id for g in listed))
        elif args.reset_offsets:
            plans = {g: await reset_offsets(admin, g, args) for g in await _groups(admin, args)}
            if args.export:
                print(export_reset(plans))
            else:
                print("\n\n".join(render_reset(g, plan) for g, plan in plans.items()))
        elif args.delete_offsets:
            for g in args.group:
                print(await delete_offsets(admin, g, args))
        elif args.delete:
            groups = await _groups(admin, args)
            results = await admin.delete_consumer_groups(groups, raise_errors=False)
            for g, error in results.items():
                if error is not None:
                    raise ClientError(f"Deletion of some consumer groups failed: group '{g}': {error}")
            print(f"Deletion of requested consumer groups ({', '.join(repr(g) for g in groups)}) was successful.")
        else:
            descriptions = [await describe_group(admin, g) for g in await _groups(admin, args)]
            if args.json:
                print(json.dumps([asdict(d) for d in descriptions], indent=1))
            elif args.members:
                print("\n\n".join(render_members(d, args.verbose) for d in descriptions))
            elif args.state is not None:
                print("\n\n".join(render_state(d) for d in descriptions))
            else:
                print("\n\n".join(render(d) for d in descriptions))


def _states(text: str) -> list[str]:
    wanted = [s.strip() for s in text.split(",") if s.strip()]
    by_lower = {s.lower(): s for s in GROUP_STATES}
    unknown = [s for s in wanted if s.lower() not in by_lower]
    if unknown:
        raise UsageError(f"--state: unknown state(s) {', '.join(unknown)}; known: {', '.join(GROUP_STATES)}")
    return [by_lower[s.lower()] for s in wanted]


TARGETS = ("--to-earliest", "--to-latest", "--to-current", "--to-offset", "--shift-by", "--to-datetime",
           "--by-duration", "--from-file")


def _check(parser: _Parser, args: argparse.Namespace) -> None:
    groups = bool(args.group) or args.all_groups
    if args.group and args.all_groups:
        parser.error("--group and --all-groups cannot be used together")
    if (args.describe or args.delete or args.reset_offsets) and not groups:
        parser.error("--describe, --delete and --reset-offsets need --group (one or more) or --all-groups")
    if args.delete_offsets and (len(args.group) != 1 or not args.topic):
        parser.error("--delete-offsets needs exactly one --group and at least one --topic")
    shown = [f for f, on in (("--members", args.members), ("--offsets", args.offsets),
                             ("--state", args.state is not None and not args.list)) if on]
    if len(shown) > 1:
        parser.error(f"{' and '.join(shown)} cannot be used together")
    if shown and not args.describe:
        parser.error(f"{shown[0]} can only be used with --describe")
    if args.verbose and not args.describe:
        parser.error("--verbose can only be used with --describe")
    if args.state and args.describe:
        parser.error("--state takes no value with --describe (state names filter --list)")
    if not args.reset_offsets:
        used = [f for f in TARGETS + ("--all-topics", "--execute", "--dry-run", "--export")
                if getattr(args, f[2:].replace("-", "_")) not in (None, False)]
        if used:
            parser.error(f"{used[0]} can only be used with --reset-offsets")
        if args.topic and not args.delete_offsets:
            parser.error("--topic can only be used with --reset-offsets or --delete-offsets")
        return
    if args.execute and args.export:
        parser.error("--execute and --export cannot be used together (--export implies a dry run)")
    if args.from_file is None and not (args.all_topics or args.topic):
        parser.error("--reset-offsets needs --all-topics or --topic (or --from-file)")
    if not any(getattr(args, f[2:].replace("-", "_")) not in (None, False) for f in TARGETS):
        parser.error(f"--reset-offsets needs one of {', '.join(TARGETS)}")
    try:
        if args.to_datetime:
            parse_datetime_ms(args.to_datetime)
        if args.by_duration:
            parse_duration_ms(args.by_duration)
    except UsageError as exc:
        parser.error(str(exc))


def main(argv: Sequence[str] | None = None) -> int:
    parser = _Parser(prog="moldau-consumer-groups", description=(__doc__ or "").split("\n\n")[0].replace("``", ""))
    add_common_flags(parser, verbose=False)
    parser.add_argument("--bootstrap-server", required=True, help="host:port of a broker")
    parser.add_argument("--command-config", metavar="FILE", help="admin client properties (security settings)")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list the consumer groups")
    action.add_argument("--describe", action="store_true", help="describe the groups given with --group")
    action.add_argument("--delete", action="store_true", help="delete the (empty) groups given with --group")
    action.add_argument("--reset-offsets", action="store_true", help="reset the committed offsets of --group")
    action.add_argument("--delete-offsets", action="store_true", help="delete the group's offsets of --topic")
    show = parser.add_argument_group("--describe views (one of)")
    show.add_argument("--offsets", action="store_true", help="committed offsets, log end and lag (the default)")
    show.add_argument("--members", action="store_true", help="the members and how many partitions each has")
    show.add_argument("--state", nargs="?", const="", default=None, metavar="STATES",
                      help="with --describe: coordinator, assignor, state, #members; with --list: show states "
                           "and keep only these (comma separated, e.g. Stable,Empty)")
    show.add_argument("--verbose", action="store_true", help="with --members: instance ids and assignments")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--to-earliest", action="store_true", help="reset to the log start")
    target.add_argument("--to-latest", action="store_true", help="reset to the log end")
    target.add_argument("--to-current", action="store_true", help="reset to the committed offset")
    target.add_argument("--to-offset", type=int, help="reset to this offset")
    target.add_argument("--shift-by", type=int, help="move the committed offset by N (may be negative)")
    target.add_argument("--to-datetime", help="reset to the first offset at or after YYYY-MM-DDTHH:mm:SS.sss")
    target.add_argument("--by-duration", help="reset to the first offset after now minus PnDTnHnMnS")
    target.add_argument("--from-file", metavar="CSV", help="reset to the offsets in this CSV (as --export writes)")
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument("--all-topics", action="store_true", help="every topic the group has offsets for")
    scope.add_argument("--topic", action="append", default=[], help="topic or topic:p1,p2 (repeatable)")
    run = parser.add_mutually_exclusive_group()
    run.add_argument("--dry-run", action="store_true", help="only show the new offsets (the default)")
    run.add_argument("--execute", action="store_true", help="commit the new offsets")
    parser.add_argument("--export", action="store_true", help="print the reset plan as CSV (for --from-file)")
    parser.add_argument("--group", action="append", default=[], help="a group (repeatable)")
    parser.add_argument("--all-groups", action="store_true", help="every group (--describe, --delete, --reset-offsets)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--timeout-ms", "--timeout", type=int, default=30000, help="request timeout (ms)")
    args = parser.parse_args(argv)
    _check(parser, args)
    try:
        if args.list and args.state:
            _states(args.state)
    except UsageError as exc:
        parser.error(str(exc))
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        asyncio.run(_run(args))
        return 0
    except (ClientError, ToolError, OSError) as exc:  # a CLI: report, do not dump a traceback
        report_error("moldau-consumer-groups", exc)
        return 1


if __name__ == "__main__":
    sys.exit(main())
