"""The producer's record and batch types (split from producer.py): RecordMetadata, the per-partition batch, and
the conversions of keys, values and headers to bytes."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from moldau.batch_builder import Record

Headers = Sequence[tuple[str, bytes | str | None]] | Mapping[str, bytes | str | None] | None
RECORD_OVERHEAD = 22  # varints and attributes of one record, roughly (for batch.size / buffer.memory)


class RecordMetadata(NamedTuple):
    topic: str
    partition: int
    offset: int  # -1 when unknown (acks=0, or a duplicate the broker had already written)
    timestamp: int


@dataclass(slots=True, eq=False)
class Batch:
    topic: str
    partition: int
    created: float
    records: list[Record]
    futures: list[tuple[int, asyncio.Future[RecordMetadata]]]
    done: asyncio.Future[None]
    size: int = 0
    open: bool = True
    data: bytes | None = None
    base_sequence: int = -1
    attempts: int = 0
    error: BaseException | None = None
    last_error: BaseException | None = None  # of the latest attempt that will be retried


def to_bytes(value: Any, what: str) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"{what} must be bytes, str or None (or set {what}.serializer), not {type(value).__name__}")


def encode_headers(headers: Headers) -> list[tuple[str, bytes | None]]:
    if not headers:
        return []
    items = headers.items() if isinstance(headers, Mapping) else headers
    return [(k, to_bytes(v, "header value")) for k, v in items]
