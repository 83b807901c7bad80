"""What the transactional workload (``--workload txn``) did and saw: every transaction with its writes and its
outcome, every acknowledgement and failure, every read (with the reader's isolation level), the last stable
offsets sampled during the run and the (LSO, high watermark) of every partition at its end.

Values are ``<producer>:<transaction>:<counter>`` (ASCII, unique in the run); a consume-transform-produce output
is ``<worker>:<transaction>:<counter>><input value>``, so it names the input it was made from. Nothing here judges
the history: txn_checker.py does, as a pure function of it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Transaction outcomes, as the producer knows them.
COMMITTED = "committed"  # commit_transaction() returned
ABORTED = "aborted"  # aborted before any commit was asked for: it can never become visible
UNKNOWN = "unknown"  # a commit was asked for and failed (or the producer died meanwhile): either outcome is legal
OPEN = "open"  # not ended yet (the checker takes it as unknown)
OUTCOMES = (COMMITTED, ABORTED, UNKNOWN, OPEN)

READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"
FINAL_RC = "final-read_committed"
FINAL_RU = "final-read_uncommitted"

Position = tuple[str, int, int]  # topic, partition, offset
Record = tuple[str, int, int, bytes | None]  # topic, partition, offset, value


def make_value(producer: str, txn: int, counter: int) -> bytes:
    return f"{producer}:{txn}:{counter}".encode()


def make_output(producer: str, txn: int, counter: int, source: bytes) -> bytes:
    return make_value(producer, txn, counter) + b">" + source


def output_source(value: bytes) -> bytes | None:
    """The input value a consume-transform-produce output was made from, or None for any other value."""
    _, sep, source = value.partition(b">")
    return source if sep else None


@dataclass(slots=True)
class Txn:
    producer: str  # the transactional.id
    kind: str  # "produce" or "ctp" (consume-transform-produce)
    writes: list[tuple[str, int, bytes]] = field(default_factory=list)  # (topic, partition, value) sent
    outcome: str = OPEN
    note: str = ""  # why it was aborted or is unknown


@dataclass(slots=True)
class TxnHistory:
    txns: dict[str, Txn] = field(default_factory=dict)  # "<producer>:<n>" -> the transaction
    acks: dict[bytes, Position] = field(default_factory=dict)
    failures: dict[bytes, str] = field(default_factory=dict)
    reads: dict[str, list[Record]] = field(default_factory=dict)
    isolation: dict[str, str] = field(default_factory=dict)  # reader -> READ_COMMITTED / READ_UNCOMMITTED
    # (seconds since the start, topic, partition, last stable offset) in the order the sampler saw them
    lso_samples: list[tuple[float, str, int, int]] = field(default_factory=list)
    # (topic, partition) -> (last stable offset, high watermark) once every transaction had ended
    final_offsets: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)
    # topic -> its role: "data" (written by the transactional producers), "input" (also read by the
    # consume-transform-produce stage) or "output" (written by it)
    topics: dict[str, str] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------------------------------------- recording
    def begin(self, txn_id: str, producer: str, kind: str) -> Txn:
        txn = self.txns[txn_id] = Txn(producer, kind)
        return txn

    def ack(self, value: bytes, topic: str, partition: int, offset: int) -> None:
        self.acks[value] = (topic, partition, offset)

    def fail(self, value: bytes, error: str) -> None:
        self.failures[value] = error

    def read(self, reader: str, isolation: str, records: Iterable[Record]) -> None:
        self.isolation[reader] = isolation
        self.reads.setdefault(reader, []).extend(records)

    def read_count(self) -> int:
        return sum(len(r) for name, r in self.reads.items() if name not in (FINAL_RC, FINAL_RU))

    def count(self, outcome: str, kind: str | None = None) -> int:
        return sum(1 for t in self.txns.values() if t.outcome == outcome and (kind is None or t.kind == kind))

    # ------------------------------------------------------------------------------------- file form (JSON)
    def to_json(self) -> dict[str, Any]:
        def v(value: bytes | None) -> str | None:
            return None if value is None else value.decode("latin-1")
        return {"workload": "txn",
                "txns": {k: {"producer": t.producer, "kind": t.kind, "outcome": t.outcome, "note": t.note,
                             "writes": [[tp, p, v(val)] for tp, p, val in t.writes]} for k, t in self.txns.items()},
                "acks": {v(k): list(pos) for k, pos in self.acks.items()},
                "failures": {v(k): e for k, e in self.failures.items()},
                "reads": {name: [[t, p, o, v(val)] for t, p, o, val in recs] for name, recs in self.reads.items()},
                "isolation": self.isolation, "lso_samples": [list(s) for s in self.lso_samples],
                "final_offsets": [[t, p, lso, hw] for (t, p), (lso, hw) in self.final_offsets.items()],
                "topics": self.topics, "meta": self.meta}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TxnHistory:
        def b(value: str | None) -> bytes | None:
            return None if value is None else value.encode("latin-1")
        h = cls()
        for k, t in data["txns"].items():
            h.txns[k] = Txn(t["producer"], t["kind"], [(tp, int(p), val.encode("latin-1")) for tp, p, val in t["writes"]],
                            t["outcome"], t.get("note", ""))
        h.acks = {k.encode("latin-1"): (str(pos[0]), int(pos[1]), int(pos[2])) for k, pos in data["acks"].items()}
        h.failures = {k.encode("latin-1"): str(e) for k, e in data["failures"].items()}
        h.reads = {name: [(str(t), int(p), int(o), b(val)) for t, p, o, val in recs]
                   for name, recs in data["reads"].items()}
        h.isolation = dict(data["isolation"])
        h.lso_samples = [(float(s[0]), str(s[1]), int(s[2]), int(s[3])) for s in data["lso_samples"]]
        h.final_offsets = {(str(t), int(p)): (int(lso), int(hw)) for t, p, lso, hw in data["final_offsets"]}
        h.topics = dict(data["topics"])
        h.meta = dict(data.get("meta", {}))
        return h

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json()))

    @classmethod
    def load(cls, path: Path) -> TxnHistory:
        return cls.from_json(json.loads(path.read_text()))
