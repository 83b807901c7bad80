"""The pipeline's event stream: page views as JSON, keyed by user, with event times that are mostly in order,
some out of order (within the watermark), some late (far behind it) and some malformed.

Event i happens at ``base_ms + i * step_ms`` minus a jitter of up to ``JITTER_MS`` (so the stream arrives out of
order, by less than the watermark). Late events (about 1 in 50, only in the last third of the stream, where the
query's watermark has moved on) are ``LATE_BY_MS`` older: Spark drops them from the windowed aggregates. About 1 in
25 records is malformed (not JSON, a field missing, a negative dwell time, an unreadable time): the job sends them
to the dead-letter topic. Everything is drawn from ``random.Random(seed)``, so a run can be checked exactly.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from moldau import Producer

PAGES = ("/", "/search", "/product", "/cart", "/checkout")
JITTER_MS = 3_000
LATE_BY_MS = 120_000
WINDOW_MS = 10_000  # the job's tumbling window (pipeline.WINDOW)


@dataclass(frozen=True)
class Event:
    kind: str  # "ok", "late" or "bad"
    key: bytes
    value: bytes
    event_ms: int | None  # None for a malformed record
    page: str | None
    dwell_ms: int | None
    error: str | None = None  # what the job must say about a malformed record


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _bad(rng: random.Random, i: int, user: str, at: int) -> tuple[bytes, str]:
    flavour = rng.randrange(4)
    if flavour == 0:
        return f"GET /product?id={i} HTTP/1.1".encode(), "not JSON"
    doc: dict[str, object] = {"event_id": i, "user": user, "page": rng.choice(PAGES), "event_time": iso(at),
                              "dwell_ms": rng.randrange(100, 5000)}
    if flavour == 1:
        del doc["page"]
        error = "missing field"
    elif flavour == 2:
        doc["dwell_ms"] = -rng.randrange(1, 1000)
        error = "negative dwell_ms"
    else:
        doc["event_time"] = "yesterday afternoon"
        error = "unreadable event_time"
    return json.dumps(doc).encode(), error


def make_events(n: int, *, base_ms: int, step_ms: int, seed: int = 7) -> list[Event]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        user = f"user-{rng.randrange(40)}"
        at = base_ms + i * step_ms - rng.randrange(JITTER_MS)
        roll = rng.random()
        if roll < 0.04:
            value, error = _bad(rng, i, user, at)
            out.append(Event("bad", user.encode(), value, None, None, None, error))
            continue
        late = roll < 0.06 and i >= 2 * n // 3
        if late:
            at -= LATE_BY_MS
        page, dwell = rng.choice(PAGES), rng.randrange(100, 30_000)
        doc = {"event_id": i, "user": user, "page": page, "event_time": iso(at), "dwell_ms": dwell}
        out.append(Event("late" if late else "ok", user.encode(), json.dumps(doc).encode(), at, page, dwell))
    return out


def windows(events: Iterable[Event]) -> dict[tuple[int, str], tuple[int, int]]:
    """(window start ms, page) -> (views, total dwell ms) over the on-time events: what the job must compute."""
    out: dict[tuple[int, str], tuple[int, int]] = {}
    for e in events:
        if e.kind == "ok" and e.event_ms is not None and e.page is not None and e.dwell_ms is not None:
            start = e.event_ms - e.event_ms % WINDOW_MS
            views, dwell = out.get((start, e.page), (0, 0))
            out[(start, e.page)] = (views + 1, dwell + e.dwell_ms)
    return out


def produce(bootstrap: str, topic: str, events: list[Event], rate: float = 0.0) -> dict[int, int]:
    """Produces the events (``rate`` per second, 0 = as fast as possible); returns partition -> end offset."""
    ends: dict[int, int] = {}
    start = time.monotonic()
    with Producer(bootstrap_servers=bootstrap, linger_ms=5, acks="all") as producer:
        futures = []
        for i, e in enumerate(events):
            if rate > 0 and i % 100 == 0:  # pace in steps of 100 records
                ahead = start + i / rate - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
            futures.append(producer.send(topic, e.value, e.key))
        producer.flush()
        for fut in futures:
            meta = fut.result()
            ends[meta.partition] = max(ends.get(meta.partition, 0), meta.offset + 1)
    return ends
