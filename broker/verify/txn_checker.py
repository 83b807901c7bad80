"""The transactional checker: a pure function of a TxnHistory (txn_history.py), in the manner of Jepsen's Kafka
analysis of transactions.

* aborted_read: a read_committed reader (during the run, or the final read) saw a record of an aborted
  transaction, or a consume-transform-produce output made from an input that is not committed;
* torn: a transaction partly visible in the final read_committed read (some of its records, not all);
* lost: a record of a committed transaction absent from the final read_committed read; a record a
  read_committed reader saw during the run (so committed) absent from it; an acknowledged record (of any
  transaction) absent from the final read_uncommitted read (gone from the log);
* duplicated: one value at two or more (topic, partition, offset) positions in any reads;
* changed: one position holding different values across the reads and acknowledgements, or a value read at a
  position other than the one its acknowledgement gave;
* unexpected: a value read that no transaction of this run wrote;
* lso_backwards: a partition's last stable offset lower than one sampled before it;
* lso_stuck: once every transaction had ended, a partition's last stable offset still below its high watermark;
* ctp_missing / ctp_duplicated: a committed input record of the consume-transform-produce stage with no
  committed output, or with more than one.

Transactions whose commit failed are "unknown" (as are any still open): either outcome is legal, a partial one
is not (torn).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from .txn_history import (
    ABORTED,
    COMMITTED,
    FINAL_RC,
    FINAL_RU,
    READ_COMMITTED,
    Position,
    Record,
    TxnHistory,
    output_source,
)

TXN_ANOMALIES = ("aborted_read", "torn", "lost", "duplicated", "changed", "unexpected", "lso_backwards",
                 "lso_stuck", "ctp_missing", "ctp_duplicated")
EXAMPLES = 5


def _text(value: bytes | None) -> str:
    return "null" if value is None else value.decode("ascii", "replace")


def _at(pos: Position) -> str:
    return f"{pos[0]}/{pos[1]}/{pos[2]}"


@dataclass(slots=True)
class TxnReport:
    committed: int = 0
    aborted: int = 0
    unknown: int = 0
    ctp_committed: int = 0
    records_committed: int = 0  # records of committed transactions
    acked: int = 0
    failed: int = 0
    consumed: int = 0  # records read during the run (every reader)
    final_read_committed: int = 0
    final_read_uncommitted: int = 0
    lso_samples: int = 0
    unknown_visible: int = 0  # unknown transactions found committed
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TXN_ANOMALIES, 0))
    examples: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in TXN_ANOMALIES})

    @property
    def ok(self) -> bool:
        return not any(self.counts.values())

    def flag(self, kind: str, example: str) -> None:
        self.counts[kind] += 1
        if len(self.examples[kind]) < EXAMPLES:
            self.examples[kind].append(example)

    def _info(self) -> list[tuple[str, int]]:
        return [("transactions committed", self.committed), ("transactions aborted", self.aborted),
                ("transactions unknown (commit failed)", self.unknown),
                ("  of which found committed", self.unknown_visible),
                ("consume-transform-produce committed", self.ctp_committed),
                ("records of committed transactions", self.records_committed), ("acknowledged", self.acked),
                ("failed sends", self.failed), ("read during the run", self.consumed),
                ("final read (read_committed)", self.final_read_committed),
                ("final read (read_uncommitted)", self.final_read_uncommitted),
                ("last stable offsets sampled", self.lso_samples)]

    def to_json(self) -> dict[str, Any]:
        keys = ("committed", "aborted", "unknown", "unknown_visible", "ctp_committed", "records_committed", "acked",
                "failed", "consumed", "final_read_committed", "final_read_uncommitted", "lso_samples")
        return {"ok": self.ok, "workload": "txn", **{k: getattr(self, k) for k in keys},
                "anomalies": dict(self.counts), "examples": {k: v for k, v in self.examples.items() if v}}

    def table(self) -> str:
        rows = [(name, count, "") for name, count in self._info()]
        rows += [(kind, self.counts[kind], "; ".join(self.examples[kind])) for kind in TXN_ANOMALIES]
        width = max(len(r[0]) for r in rows)
        lines = [f"{name:<{width}}  {count:>9}  {example}".rstrip() for name, count, example in rows]
        lines.append(f"{'result':<{width}}  {'OK' if self.ok else 'FAILED':>9}")
        return "\n".join(lines)


def check_txn(history: TxnHistory) -> TxnReport:
    h = history
    report = TxnReport(committed=h.count(COMMITTED), aborted=h.count(ABORTED),
                       unknown=len(h.txns) - h.count(COMMITTED) - h.count(ABORTED),
                       ctp_committed=h.count(COMMITTED, "ctp"), acked=len(h.acks), failed=len(h.failures),
                       consumed=h.read_count(), lso_samples=len(h.lso_samples))
    report.records_committed = sum(len(t.writes) for t in h.txns.values() if t.outcome == COMMITTED)
    final_rc = h.reads.get(FINAL_RC, [])
    final_ru = h.reads.get(FINAL_RU, [])
    report.final_read_committed, report.final_read_uncommitted = len(final_rc), len(final_ru)
    owner = {value: txn_id for txn_id, t in h.txns.items() for _, _, value in t.writes}
    visible = {value for _, _, _, value in final_rc}
    _aborted_reads_and_unexpected(h, owner, report)
    _torn_and_lost(h, visible, {value for _, _, _, value in final_ru}, report)
    _duplicated_and_changed(h, report)
    _lso(h, report)
    _ctp(h, final_rc, report)
    return report


def _aborted_reads_and_unexpected(h: TxnHistory, owner: dict[bytes, str], report: TxnReport) -> None:
    flagged: set[bytes | None] = set()
    for reader, records in sorted(h.reads.items()):
        committed_view = h.isolation.get(reader) == READ_COMMITTED
        for topic, partition, offset, value in records:
            if value in flagged:
                continue
            txn_id = owner.get(value) if value is not None else None
            if txn_id is None:
                flagged.add(value)
                report.flag("unexpected", f"{_text(value)} at {_at((topic, partition, offset))} ({reader}): "
                                          "no transaction of this run wrote it")
            elif committed_view and h.txns[txn_id].outcome == ABORTED:
                flagged.add(value)
                note = f", {h.txns[txn_id].note}" if h.txns[txn_id].note else ""
                report.flag("aborted_read", f"{reader} read {_text(value)} at {_at((topic, partition, offset))} "
                                            f"of aborted transaction {txn_id}{note}")


def _torn_and_lost(h: TxnHistory, visible: set[bytes | None], in_log: set[bytes | None], report: TxnReport) -> None:
    for txn_id, txn in sorted(h.txns.items()):
        if txn.outcome == ABORTED or not txn.writes:
            continue
        seen = [value for _, _, value in txn.writes if value in visible]
        if seen and txn.outcome != COMMITTED and len(seen) == len(txn.writes):
            report.unknown_visible += 1
        if seen and len(seen) < len(txn.writes):
            missing = [f"{_text(value)} ({topic}/{partition})" for topic, partition, value in txn.writes
                       if value not in visible]
            report.flag("torn", f"{txn.outcome} transaction {txn_id}: {len(seen)} of {len(txn.writes)} records "
                                f"visible to read_committed, missing {', '.join(missing[:3])}")
        if txn.outcome == COMMITTED:
            for topic, partition, value in txn.writes:
                if value not in visible:
                    where = _at(h.acks[value]) if value in h.acks else f"{topic}/{partition}"
                    report.flag("lost", f"{_text(value)} of committed transaction {txn_id} (acked at {where}) "
                                        "absent from the final read_committed read")
    # committed ones were counted just above; aborted ones are aborted reads
    counted = {v for t in h.txns.values() if t.outcome in (COMMITTED, ABORTED) for _, _, v in t.writes}
    committed_during: dict[bytes | None, str] = {}
    for reader, records in h.reads.items():
        if reader != FINAL_RC and h.isolation.get(reader) == READ_COMMITTED:
            for *_, seen_value in records:
                committed_during.setdefault(seen_value, reader)
    for seen_value, reader in sorted(committed_during.items(), key=lambda kv: _text(kv[0])):
        if seen_value not in visible and seen_value not in counted:
            report.flag("lost", f"{_text(seen_value)} read by {reader} (read_committed) during the run, absent from "
                                "the final read_committed read")
    for acked, pos in sorted(h.acks.items(), key=lambda kv: kv[1]):
        if acked not in in_log:
            report.flag("lost", f"{_text(acked)} acked at {_at(pos)}, absent from the final read_uncommitted read")


def _duplicated_and_changed(h: TxnHistory, report: TxnReport) -> None:
    positions: dict[bytes | None, set[Position]] = defaultdict(set)
    at: dict[Position, set[bytes | None]] = defaultdict(set)
    for records in h.reads.values():
        for topic, partition, offset, value in records:
            positions[value].add((topic, partition, offset))
            at[(topic, partition, offset)].add(value)
    for value, pos in h.acks.items():
        at[pos].add(value)
    for value, places in sorted(positions.items(), key=lambda kv: min(kv[1])):
        if len(places) > 1:
            report.flag("duplicated", f"{_text(value)} at " + ", ".join(_at(p) for p in sorted(places)))
    for value, pos in sorted(h.acks.items(), key=lambda kv: kv[1]):
        read_at = positions.get(value, set())
        if read_at and pos not in read_at:
            report.flag("changed", f"{_text(value)} acked at {_at(pos)}, read at "
                                   + ", ".join(_at(p) for p in sorted(read_at)))
    for pos, values in sorted(at.items()):
        if len(values) > 1:
            report.flag("changed", f"{_at(pos)} held " + ", ".join(sorted(_text(v) for v in values)))


def _lso(h: TxnHistory, report: TxnReport) -> None:
    highest: dict[tuple[str, int], tuple[int, float]] = {}
    for seconds, topic, partition, lso in h.lso_samples:
        before = highest.get((topic, partition))
        if before is not None and lso < before[0]:
            report.flag("lso_backwards", f"{topic}/{partition}: last stable offset {lso} at {seconds:.1f}s after "
                                         f"{before[0]} at {before[1]:.1f}s")
        if before is None or lso > before[0]:
            highest[(topic, partition)] = (lso, seconds)
    for (topic, partition), (lso, hw) in sorted(h.final_offsets.items()):
        if lso < hw:
            report.flag("lso_stuck", f"{topic}/{partition}: last stable offset {lso} below the high watermark {hw} "
                                     "after every transaction had ended")


def _ctp(h: TxnHistory, final_rc: list[Record], report: TxnReport) -> None:
    inputs = {t for t, role in h.topics.items() if role == "input"}
    outputs = {t for t, role in h.topics.items() if role == "output"}
    if not inputs or not outputs:
        return
    committed_inputs = {value: (topic, partition, offset) for topic, partition, offset, value in final_rc
                        if topic in inputs and value is not None}
    made: dict[bytes, list[tuple[bytes, Position]]] = defaultdict(list)  # input -> its visible outputs
    for topic, partition, offset, value in final_rc:
        if topic not in outputs or value is None:
            continue
        source = output_source(value)
        if source is None:
            continue  # not an output value: "unexpected" above
        made[source].append((value, (topic, partition, offset)))
        if source not in committed_inputs:
            report.flag("aborted_read", f"output {_text(value)} at {_at((topic, partition, offset))} was made from "
                                        f"{_text(source)}, which is not a committed input record")
    for source, pos in sorted(committed_inputs.items(), key=lambda kv: kv[1]):
        outs = made.get(source, [])
        if not outs:
            report.flag("ctp_missing", f"committed input {_text(source)} at {_at(pos)} has no committed output")
        elif len(outs) > 1:
            report.flag("ctp_duplicated", f"committed input {_text(source)} at {_at(pos)} has {len(outs)} committed "
                                          "outputs: " + ", ".join(f"{_text(v)} at {_at(p)}" for v, p in outs[:3]))
