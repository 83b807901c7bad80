"""The example pipeline (examples/spark_pipeline/) end to end on a small stream against a real broker: dead
letters, windowed aggregates in the compacted topic and in parquet, late events dropped, the batch job's range."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from .harness import REPO_ROOT, BrokerProcess
from .spark_session import spark_session  # noqa: F401  (the session-wide Spark fixture, `spark`)
from .test_spark_batch import consume_all, read

sys.path.insert(0, str(REPO_ROOT / "examples" / "spark_pipeline"))

import events as ev  # noqa: E402
import pipeline  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BASE_MS = 1_700_000_000_000
EVENTS = 600
WATERMARK_MS = 10_000


def test_example_pipeline_end_to_end(spark: Any, broker: BrokerProcess, topic: str, tmp_path: Path) -> None:
    # maxOffsetsPerTrigger splits the stream over several micro-batches, so the late events (last third of the
    # stream) arrive after the watermark has moved past them.
    cfg = pipeline.Config(broker.bootstrap, tmp_path, prefix=topic, trigger="500 milliseconds",
                          max_offsets_per_trigger=100, events=EVENTS, rate=0, base_ms=BASE_MS, step_ms=100,
                          timeout_s=240)
    lines: list[str] = []
    result = pipeline.run(spark, cfg, report=lines.append)
    events = result.events
    assert {e.kind for e in events} == {"ok", "late", "bad"}

    assert sum(result.end.values()) - sum(result.start.values()) == EVENTS
    assert result.batch_rows == EVENTS
    assert any("rows/s" in line and "lag" in line and "windows-to-parquet" in line for line in lines), lines

    bad = [e for e in events if e.kind == "bad"]
    dead = consume_all(broker.bootstrap, cfg.dead_letter, len(bad))
    assert sorted((v, h) for _, _, v, h in dead) == sorted((e.value, [("error", e.error.encode())])
                                                           for e in bad if e.error)

    want = ev.windows(events)  # on-time events only: the late ones must be dropped
    latest: dict[str, tuple[int, dict[str, Any]]] = {}
    for r in read(spark, broker.bootstrap, subscribe=cfg.by_window).select("key", "value", "offset").collect():
        key = bytes(r.key).decode()
        if key not in latest or r.offset > latest[key][0]:
            latest[key] = (r.offset, json.loads(bytes(r.value)))
    got = {(doc["window_start_ms"], doc["page"]): (doc["views"], doc["dwell_ms"]) for _, doc in latest.values()}
    assert got == want
    assert all(key == f"{doc['window_start_ms']}|{doc['page']}" for key, (_, doc) in latest.items())

    # Parquet holds the windows the final watermark closed: end <= max event time - 10 s (the boundary window,
    # end == watermark, may go either way), each with its final totals.
    watermark = max(e.event_ms for e in events if e.event_ms is not None) - WATERMARK_MS
    rows = spark.read.parquet(str(tmp_path / "windows")).selectExpr(
        "unix_millis(window_start) AS s", "unix_millis(window_end) AS e", "page", "views", "dwell_ms").collect()
    closed = {(r.s, r.page): (r.views, r.dwell_ms) for r in rows}
    assert len(closed) == len(rows), "a window was written twice"
    assert all(want[k] == v for k, v in closed.items())
    assert {k for k in want if k[0] + ev.WINDOW_MS < watermark} <= set(closed)
    assert all(k[0] + ev.WINDOW_MS <= watermark for k in closed)
    assert set(closed) < set(want)
