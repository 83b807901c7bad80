"""The checker: what a history says about the cluster, in the manner of Jepsen's Kafka analysis.

* lost: acknowledged (or read by a consumer during the run), yet absent from the final full read;
* unexpected: read, but never attempted by this run's producer (or not a value this tool writes);
* duplicated: one value read at two or more (partition, offset) positions;
* reordered: within one partition, one producer's values not increasing with the offset (per reader);
* changed: one (partition, offset) holding different values across the reads and the acknowledgements, or a
  value read at an offset other than the one its acknowledgement gave.

Anything else is information, not an anomaly: failed sends (indeterminate: a write whose answer was lost may
still be in the log, "recovered"), and attempts that were neither acknowledged nor read.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from .history import FINAL_READ, History, parse_value

ANOMALIES = ("lost", "unexpected", "duplicated", "reordered", "changed")
EXAMPLES = 5


@dataclass(slots=True)
class Report:
    attempted: int = 0
    acked: int = 0
    failed: int = 0
    consumed: int = 0  # records the consumers read during the run (re-reads after a rebalance included)
    final_read: int = 0
    recovered: int = 0  # not acknowledged, yet in the final read
    never_written: int = 0  # not acknowledged and not read anywhere
    # anomaly name -> human-readable examples (all of them are counted, EXAMPLES are kept per kind)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ANOMALIES, 0))
    examples: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in ANOMALIES})

    @property
    def ok(self) -> bool:
        return not any(self.counts.values())

    def flag(self, kind: str, example: str) -> None:
        self.counts[kind] += 1
        if len(self.examples[kind]) < EXAMPLES:
            self.examples[kind].append(example)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "attempted": self.attempted, "acked": self.acked, "failed": self.failed,
                "consumed": self.consumed, "final_read": self.final_read, "recovered": self.recovered,
                "never_written": self.never_written, "anomalies": dict(self.counts),
                "examples": {k: v for k, v in self.examples.items() if v}}

    def table(self) -> str:
        rows = [("attempted", self.attempted, ""), ("acknowledged", self.acked, ""),
                ("failed (indeterminate)", self.failed, ""), ("read by consumers", self.consumed, ""),
                ("final read", self.final_read, ""), ("recovered (unacked, read)", self.recovered, ""),
                ("never written (unacked, unread)", self.never_written, "")]
        rows += [(kind, self.counts[kind], "; ".join(self.examples[kind])) for kind in ANOMALIES]
        width = max(len(r[0]) for r in rows)
        lines = [f"{name:<{width}}  {count:>9}  {example}".rstrip() for name, count, example in rows]
        lines.append(f"{'result':<{width}}  {'OK' if self.ok else 'FAILED':>9}")
        return "\n".join(lines)


def _text(value: bytes | None) -> str:
    return "null" if value is None else value.decode("ascii", "replace")


def check(history: History) -> Report:
    report = Report(attempted=len(history.attempts), acked=len(history.acks), failed=len(history.failures))
    final = history.reads.get(FINAL_READ, [])
    report.final_read = len(final)
    report.consumed = history.read_count()
    _unexpected(history, report)
    _lost(history, final, report)
    _duplicated_and_changed(history, report)
    for reader, records in sorted(history.reads.items()):
        _reordered(reader, records, report)
    return report


def _unexpected(history: History, report: Report) -> None:
    seen: set[bytes | None] = set()
    for reader, records in sorted(history.reads.items()):
        for partition, offset, value in records:
            if value in seen:
                continue
            if value is None or value not in history.attempts:
                seen.add(value)
                report.flag("unexpected", f"{_text(value)} at {partition}/{offset} ({reader})")


def _lost(history: History, final: list[tuple[int, int, bytes | None]], report: Report) -> None:
    in_final = {value for _, _, value in final}
    read_during = {value for name, recs in history.reads.items() if name != FINAL_READ for _, _, value in recs}
    report.recovered = sum(1 for v in history.attempts if v not in history.acks and v in in_final)
    report.never_written = sum(1 for v in history.attempts
                               if v not in history.acks and v not in in_final and v not in read_during)
    for value, (partition, offset) in sorted(history.acks.items(), key=lambda kv: kv[1]):
        if value not in in_final:
            report.flag("lost", f"{_text(value)} acked at {partition}/{offset}")
    for value in sorted(v for v in read_during if v is not None and v not in in_final and v not in history.acks):
        if value in history.attempts:  # a value read during the run that has since gone (unacked but committed)
            report.flag("lost", f"{_text(value)} read during the run, gone from the final read")


def _duplicated_and_changed(history: History, report: Report) -> None:
    positions: dict[bytes | None, set[tuple[int, int]]] = defaultdict(set)
    at: dict[tuple[int, int], set[bytes | None]] = defaultdict(set)
    for records in history.reads.values():
        for partition, offset, value in records:
            positions[value].add((partition, offset))
            at[(partition, offset)].add(value)
    for value, (partition, offset) in history.acks.items():
        at[(partition, offset)].add(value)
    for value, places in sorted(positions.items(), key=lambda kv: min(kv[1])):
        if len(places) > 1:
            report.flag("duplicated", f"{_text(value)} at " + ", ".join(f"{p}/{o}" for p, o in sorted(places)))
    for value, (partition, offset) in sorted(history.acks.items(), key=lambda kv: kv[1]):
        read_at = positions.get(value, set())
        if read_at and (partition, offset) not in read_at:  # acknowledged at one offset, read at another
            shown = ", ".join(f"{p}/{o}" for p, o in sorted(read_at))
            report.flag("changed", f"{_text(value)} acked at {partition}/{offset}, read at {shown}")
    for (partition, offset), values in sorted(at.items()):
        if len(values) > 1:
            shown = ", ".join(sorted(_text(v) for v in values))
            report.flag("changed", f"{partition}/{offset} held {shown}")


def _reordered(reader: str, records: list[tuple[int, int, bytes | None]], report: Report) -> None:
    """Per partition in offset order (a reader may re-read after a rebalance: each offset counts once), each
    producer's counters must increase."""
    by_partition: dict[int, dict[int, bytes | None]] = defaultdict(dict)
    for partition, offset, value in records:
        by_partition[partition].setdefault(offset, value)
    for partition, offsets in sorted(by_partition.items()):
        last: dict[str, tuple[int, int]] = {}  # producer -> (counter, offset)
        seen: set[bytes | None] = set()
        for offset in sorted(offsets):
            value = offsets[offset]
            parsed = parse_value(value)
            if parsed is None or value in seen:  # a value's second copy is a duplicate, not a reordering
                continue
            seen.add(value)
            producer, counter = parsed
            before = last.get(producer)
            if before is not None and counter <= before[0]:
                report.flag("reordered", f"{producer}:{counter} at {partition}/{offset} after "
                                         f"{producer}:{before[0]} at {partition}/{before[1]} ({reader})")
            last[producer] = (counter, offset)
