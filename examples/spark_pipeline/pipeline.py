"""A Structured Streaming pipeline on Moldau topics through the ``moldau`` data source (docs/spark.md).

    bash scripts/run.sh &                                            # the three-broker cluster on :9092-9094
    .venv/bin/python examples/spark_pipeline/pipeline.py --bootstrap 127.0.0.1:9092

1. A generator (events.py) produces page views as JSON to ``<prefix>``: keyed by user, some out of order, some
   late, some malformed.
2. Streaming queries read the topic, parse and validate each record, and
   * send malformed records to ``<prefix>-dead-letter`` (the original bytes, the reason in an ``error`` header);
   * count views and dwell time per page in 10 s event-time windows with a 10 s watermark, written
     (a) to the compacted topic ``<prefix>-by-window``, keyed by window start + page (update mode: the latest
     record per key is the window's current total) and (b) as parquet under ``<work-dir>/windows`` (append
     mode: a window is written once the watermark has passed its end).
3. A batch job reads the offset range this run produced back into a DataFrame.

Progress (rows/s, batch durations, lag behind the topic's end) is printed as micro-batches complete.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import events as ev  # noqa: E402  (beside this file)

from moldau import AdminClient, KafkaError, NewTopic  # noqa: E402
from moldau.protocol.errors import ErrorCode  # noqa: E402

WINDOW = "10 seconds"
WATERMARK = "10 seconds"
SCHEMA = "event_id BIGINT, user STRING, page STRING, event_time STRING, dwell_ms BIGINT"
TIME_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSX"
NO_DATA_BATCHES = "spark.sql.streaming.noDataMicroBatches.enabled"


@dataclass
class Config:
    bootstrap: str
    work_dir: Path
    prefix: str = "pageviews"
    trigger: str = "1 second"
    max_offsets_per_trigger: int = 0  # 0: no limit
    events: int = 20_000
    rate: float = 2_000.0  # events/s; 0: as fast as possible
    base_ms: int | None = None  # first event time; None: now
    step_ms: int | None = None  # event-time distance of consecutive events; None: 1000 / rate
    timeout_s: float = 300.0  # bound on the whole streaming part

    @property
    def dead_letter(self) -> str:
        return f"{self.prefix}-dead-letter"

    @property
    def by_window(self) -> str:
        return f"{self.prefix}-by-window"


@dataclass
class Result:
    events: list[ev.Event]
    start: dict[int, int]  # partition -> first offset of this run
    end: dict[int, int]  # partition -> end offset of this run
    batch_rows: int  # rows the batch job read back


def ensure_topics(cfg: Config) -> None:
    wanted = [NewTopic(cfg.prefix, 2), NewTopic(cfg.dead_letter, 1),
              NewTopic(cfg.by_window, 1, config={"cleanup.policy": "compact"})]
    with AdminClient(bootstrap_servers=cfg.bootstrap) as admin:
        for error in admin.create_topics(wanted, raise_errors=False).values():
            if isinstance(error, KafkaError) and error.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise error


def parse(raw: Any) -> Any:
    """Rows of the source -> the parsed event columns plus ``error``: null when valid, else the reason."""
    from pyspark.sql import functions as F

    text = F.col("value").cast("string")
    e = F.from_json(text, SCHEMA)
    ts = F.try_to_timestamp(F.col("e.event_time"), F.lit(TIME_FORMAT))
    missing = F.col("e.event_id").isNull() | F.col("e.user").isNull() | F.col("e.page").isNull() \
        | F.col("e.event_time").isNull() | F.col("e.dwell_ms").isNull()
    error = (F.when(F.try_parse_json(text).isNull(), "not JSON")
             .when(missing, "missing field")
             .when(F.col("ts").isNull(), "unreadable event_time")
             .when(F.col("e.dwell_ms") < 0, "negative dwell_ms"))
    return raw.select("key", "value", e.alias("e")).withColumn("ts", ts).withColumn("error", error)


def windowed(parsed: Any) -> Any:
    from pyspark.sql import functions as F

    good = parsed.where(F.col("error").isNull()).select("e.*", "ts")
    return (good.withWatermark("ts", WATERMARK).groupBy(F.window("ts", WINDOW), "page")
            .agg(F.count("*").alias("views"), F.sum("dwell_ms").alias("dwell_ms"),
                 F.approx_count_distinct("user").alias("users")))


def start_queries(spark: Any, cfg: Config) -> list[Any]:
    from pyspark.sql import functions as F

    reader = (spark.readStream.format("moldau").option("kafka.bootstrap.servers", cfg.bootstrap)
              .option("subscribe", cfg.prefix).option("startingOffsets", "latest"))
    if cfg.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(cfg.max_offsets_per_trigger))
    parsed = parse(reader.load())
    checkpoints = cfg.work_dir / "checkpoints"

    def sink(df: Any, name: str) -> Any:
        return (df.writeStream.queryName(name).trigger(processingTime=cfg.trigger)
                .option("checkpointLocation", str(checkpoints / name)))

    dead = parsed.where(F.col("error").isNotNull()).select(
        "key", "value", F.array(F.struct(F.lit("error").alias("key"),
                                         F.col("error").cast("binary").alias("value"))).alias("headers"))
    agg = windowed(parsed)
    start_ms = F.unix_millis(F.col("window.start"))
    latest = agg.select(
        F.concat_ws("|", start_ms.cast("string"), "page").alias("key"),
        F.to_json(F.struct(start_ms.alias("window_start_ms"), F.unix_millis(F.col("window.end"))
                           .alias("window_end_ms"), "page", "views", "dwell_ms", "users")).alias("value"))
    closed = agg.select(F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
                        "page", "views", "dwell_ms", "users")
    to_topic = {"kafka.bootstrap.servers": cfg.bootstrap}
    return [
        sink(dead, "dead-letter").format("moldau").options(**to_topic, topic=cfg.dead_letter).start(),
        # PySpark 4.3's Python stream writers take append mode only (update mode wants the JVM-side
        # SupportsStreamingUpdateAsAppend); foreachBatch hands each batch's updated windows to the batch writer.
        sink(latest, "windows-to-topic").outputMode("update")
        .foreachBatch(lambda df, _batch: df.write.format("moldau").mode("append")
                      .options(**to_topic, topic=cfg.by_window).save()).start(),
        sink(closed, "windows-to-parquet").format("parquet").outputMode("append")
        .option("path", str(cfg.work_dir / "windows")).start(),
    ]


def _offsets(value: Any) -> dict[int, int]:
    """A progress' source offset (Spark's {"topic": {"0": n}}, as JSON text or parsed) -> partition -> offset."""
    if isinstance(value, str):
        value = json.loads(value)
    return {int(p): int(o) for parts in (value or {}).values() for p, o in parts.items()}


class Monitor:
    """Prints each query's completed micro-batches and tells when a query has taken in everything produced."""

    def __init__(self, queries: list[Any], report: Callable[[str], None]) -> None:
        self.queries = queries
        self.report = report
        self.seen: dict[str, int] = {}  # query -> last batch id reported
        self.done: set[tuple[str, str]] = set()  # (query, progress timestamp) already reported
        self.reached: dict[str, int] = {}  # query -> first batch id whose end offsets were the final ones

    def poll(self, final: dict[int, int] | None) -> None:
        for q in self.queries:
            for p in q.recentProgress:
                doc = json.loads(p.json)
                batch = int(doc["batchId"])
                if (q.name, doc["timestamp"]) in self.done or not doc.get("sources"):
                    continue
                self.done.add((q.name, doc["timestamp"]))
                self.seen[q.name] = max(batch, self.seen.get(q.name, -1))
                src = doc["sources"][0]
                end, latest = _offsets(src.get("endOffset")), _offsets(src.get("latestOffset"))
                lag = sum(max(0, off - end.get(part, 0)) for part, off in latest.items())
                self.report(f"{q.name:>18} batch {batch:>3}: {doc['numInputRows']:>6} rows, "
                            f"{float(doc.get('processedRowsPerSecond') or 0):>9,.0f} rows/s, "
                            f"{doc['durationMs'].get('triggerExecution', 0):>5} ms, lag {lag}")
                if final is not None and end == final and q.name not in self.reached:
                    self.reached[q.name] = batch

    def started(self) -> bool:
        return all(q.name in self.seen for q in self.queries)

    def drained(self) -> bool:
        """Every query read up to the final offsets; the windowed ones also ran the batch after that one, which
        moves the watermark past the last closed windows (so they reach the parquet sink)."""
        for q in self.queries:
            if q.name not in self.reached:
                return False
            if q.name != "dead-letter" and self.seen[q.name] <= self.reached[q.name]:
                return False
        return True

    def first_start(self) -> dict[int, int]:
        """The start offsets batch 0 pinned (its end offsets)."""
        doc = json.loads(self.queries[0].recentProgress[0].json)
        return _offsets(doc["sources"][0]["endOffset"])


def _wait(cond: Callable[[], bool], monitor: Monitor, final: Callable[[], dict[int, int] | None],
          deadline: float, what: str) -> None:
    while not cond():
        monitor.poll(final())
        for q in monitor.queries:
            if q.exception() is not None:
                raise RuntimeError(f"query {q.name} failed: {q.exception()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the pipeline did not {what} within its timeout")
        time.sleep(0.2)


def read_range(spark: Any, bootstrap: str, topic: str, start: dict[int, int], end: dict[int, int]) -> Any:
    """The batch job: [start, end) of each partition of ``topic`` as a DataFrame."""
    def js(offsets: dict[int, int]) -> str:
        return json.dumps({topic: {str(p): o for p, o in offsets.items()}})

    return (spark.read.format("moldau").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
            .option("startingOffsets", js(start)).option("endingOffsets", js(end)).load())


def run(spark: Any, cfg: Config, report: Callable[[str], None] = print) -> Result:
    """Runs the generator and the streaming queries until every produced event went through, then the batch job.
    ``spark`` must have the moldau data source (installed package, or spark.dataSource.register)."""
    ensure_topics(cfg)
    base_ms = cfg.base_ms if cfg.base_ms is not None else int(time.time() * 1000)
    step_ms = cfg.step_ms if cfg.step_ms is not None else max(1, int(1000 / cfg.rate)) if cfg.rate else 10
    events = ev.make_events(cfg.events, base_ms=base_ms, step_ms=step_ms)
    deadline = time.monotonic() + cfg.timeout_s
    before = spark.conf.get(NO_DATA_BATCHES, None)
    # A batch with no new data still moves the watermark, so the last closed windows reach the parquet sink.
    spark.conf.set(NO_DATA_BATCHES, "true")
    queries = start_queries(spark, cfg)
    produced: dict[int, int] = {}
    producer = threading.Thread(target=lambda: produced.update(ev.produce(cfg.bootstrap, cfg.prefix, events,
                                                                          cfg.rate)), daemon=True)
    start: dict[int, int] = {}

    def final() -> dict[int, int] | None:
        return None if producer.is_alive() or not start else {p: produced.get(p, o) for p, o in start.items()}

    try:
        monitor = Monitor(queries, report)
        _wait(monitor.started, monitor, lambda: None, deadline, "start")  # batch 0 pins startingOffsets=latest
        start.update(monitor.first_start())
        t0 = time.monotonic()
        producer.start()
        report(f"producing {len(events)} events to {cfg.prefix} from offsets {start}")

        _wait(monitor.drained, monitor, final, deadline, "take in every produced event")
        report(f"streamed {len(events)} events in {time.monotonic() - t0:.1f}s")
    finally:
        for q in queries:
            q.stop()
        if before is None:
            spark.conf.unset(NO_DATA_BATCHES)
        else:
            spark.conf.set(NO_DATA_BATCHES, before)
    end = final()
    if end is None:
        raise RuntimeError("the generator did not finish")
    batch = read_range(spark, cfg.bootstrap, cfg.prefix, start, end)
    rows = batch.count()
    report(f"batch job: {rows} records in {cfg.prefix} offsets {start} .. {end}")
    return Result(events, start, end, rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", default="127.0.0.1:9092", help="kafka.bootstrap.servers")
    ap.add_argument("--prefix", default="pageviews", help="topic name prefix")
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--rate", type=float, default=2_000.0, help="events per second (0: as fast as possible)")
    ap.add_argument("--trigger", default="1 second", help="micro-batch interval")
    ap.add_argument("--max-offsets-per-trigger", type=int, default=0)
    ap.add_argument("--work-dir", type=Path, help="checkpoints and parquet (default: a new temporary folder)")
    args = ap.parse_args()
    work_dir = args.work_dir or Path(tempfile.mkdtemp(prefix="moldau-pipeline-"))
    for key, value in {"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}.items():
        os.environ.setdefault(key, value)
    from pyspark.sql import SparkSession

    from moldau.spark import MoldauDataSource

    spark = (SparkSession.builder.master("local[2]").appName("moldau-pipeline")
             .config("spark.ui.enabled", "false").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.host", "127.0.0.1").config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(MoldauDataSource)
    cfg = Config(args.bootstrap, work_dir, prefix=args.prefix, trigger=args.trigger, events=args.events,
                 rate=args.rate, max_offsets_per_trigger=args.max_offsets_per_trigger)
    try:
        run(spark, cfg)
        windows = spark.read.parquet(str(work_dir / "windows"))
        print(f"parquet: {windows.count()} closed windows under {work_dir / 'windows'}; the busiest:")
        windows.orderBy("views", ascending=False).show(5, truncate=False)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
