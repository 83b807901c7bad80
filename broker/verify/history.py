"""What the workload did and saw: every attempt, every acknowledgement, every failure and every read.

Values are ``<producer>:<counter>`` in ASCII: unique across the run and, per producer, increasing in the order
the producer sent them, which is what lets the checker tell loss, duplication and reordering apart.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FINAL_READ = "final"


def make_value(producer: str, counter: int) -> bytes:
    return f"{producer}:{counter}".encode()


def parse_value(value: bytes | None) -> tuple[str, int] | None:
    """(producer, counter) of a value this tool wrote, or None for anything else."""
    if value is None:
        return None
    producer, sep, counter = value.decode("ascii", "replace").rpartition(":")
    if not sep or not producer or not counter.isdigit():
        return None
    return producer, int(counter)


@dataclass(slots=True)
class History:
    # value -> partition it was sent to
    attempts: dict[bytes, int] = field(default_factory=dict)
    # value -> (partition, offset) the broker acknowledged
    acks: dict[bytes, tuple[int, int]] = field(default_factory=dict)
    # value -> the error the producer reported (the write may or may not have happened: indeterminate)
    failures: dict[bytes, str] = field(default_factory=dict)
    # reader name -> [(partition, offset, value)] in the order read; FINAL_READ is the full read after the run
    reads: dict[str, list[tuple[int, int, bytes | None]]] = field(default_factory=dict)
    # what was run: topic, partitions, ... (kept with the history so a saved one can be checked again)
    meta: dict[str, Any] = field(default_factory=dict)

    def attempt(self, value: bytes, partition: int) -> None:
        self.attempts[value] = partition

    def ack(self, value: bytes, partition: int, offset: int) -> None:
        self.acks[value] = (partition, offset)

    def fail(self, value: bytes, error: str) -> None:
        self.failures[value] = error

    def read(self, reader: str, records: Iterable[tuple[int, int, bytes | None]]) -> None:
        self.reads.setdefault(reader, []).extend(records)

    def read_count(self) -> int:
        return sum(len(r) for name, r in self.reads.items() if name != FINAL_READ)

    # ------------------------------------------------------------------------------------- file form (JSON)
    def to_json(self) -> dict[str, Any]:
        def v(value: bytes | None) -> str | None:
            return None if value is None else value.decode("latin-1")
        return {"attempts": {v(k): p for k, p in self.attempts.items()},
                "acks": {v(k): list(po) for k, po in self.acks.items()},
                "failures": {v(k): e for k, e in self.failures.items()},
                "reads": {name: [[p, o, v(val)] for p, o, val in recs] for name, recs in self.reads.items()},
                "meta": self.meta}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> History:
        def b(value: str | None) -> bytes | None:
            return None if value is None else value.encode("latin-1")
        h = cls()
        h.attempts = {k.encode("latin-1"): int(p) for k, p in data["attempts"].items()}
        h.acks = {k.encode("latin-1"): (int(po[0]), int(po[1])) for k, po in data["acks"].items()}
        h.failures = {k.encode("latin-1"): str(e) for k, e in data["failures"].items()}
        h.reads = {name: [(int(p), int(o), b(val)) for p, o, val in recs] for name, recs in data["reads"].items()}
        h.meta = dict(data.get("meta", {}))
        return h

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json()))

    @classmethod
    def load(cls, path: Path) -> History:
        return cls.from_json(json.loads(path.read_text()))
