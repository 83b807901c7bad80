"""Tiered storage: catch-up read from remote storage against a local catch-up read, in one run on one broker.

Two topics of the same records: ``local`` (untiered) and ``tiered`` (remote.storage.enable, ``--segment-mb`` segments,
local.retention.bytes=1, so once the copies are done everything but the active segment is remote). Each is read
from offset 0 to its end by a confluent-kafka consumer (assigned at offset 0, see ``consume``); the ratio
remote / local is the issue's acceptance figure (>= 0.5).
Also produce throughput into the tiered topic while its segments are being copied, against the untiered topic
with no copy running: ``--rounds`` alternating rounds of ``--mb / --rounds`` each (untiered once the tiered
topic's copies caught up, then tiered, whose copies run during and after it), the median of each side, so the
load of the machine drifting during the run hits both sides alike. Backend: ``--backend filesystem`` (a
directory) or ``--backend s3`` (moto's server on 127.0.0.1).

    .venv/bin/python bench/tiered_read.py [--mb 200] [--rounds 4] [--segment-mb 1] [--backend filesystem|s3]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.integration.harness import BrokerProcess, wait_until  # noqa: E402
from tests.integration.s3server import start_s3_server  # noqa: E402

SIZE = 1024


def produce(bootstrap: str, topic: str, records: int) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 256 * 1024,
                         "acks": 1, "queue.buffering.max.kbytes": 256 * 1024})
    value = b"v" * SIZE
    start = time.monotonic()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=0)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    assert producer.flush(120) == 0
    return time.monotonic() - start


def consume(bootstrap: str, topic: str, records: int) -> float:
    """Seconds to read the topic from offset 0 to ``records`` with a new consumer. An explicit offset, not
    OFFSET_BEGINNING: for that librdkafka waits ~0.55 s after assign() before its first ListOffsets, the same on
    both topics, which pulled the remote / local ratio toward 1 (session 21). The first remote fetch's own cost
    stays in."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                         "fetch.max.bytes": 50 * 1024 * 1024, "max.partition.fetch.bytes": 4 * 1024 * 1024})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    start = time.monotonic()
    try:
        while got < records:
            # at most what is left: librdkafka's batch call waits out its timeout for a short batch (a second
            # added to both reads before session 21)
            for m in consumer.consume(min(10000, records - got), 1.0):
                if m.error() is not None:
                    raise RuntimeError(str(m.error()))
                got += 1
            if time.monotonic() - start > 600:
                raise TimeoutError(f"read {got} of {records}")
        return time.monotonic() - start
    finally:
        consumer.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=200, help="megabytes per topic (200)")
    parser.add_argument("--backend", choices=("filesystem", "s3"), default="filesystem")
    parser.add_argument("--rounds", type=int, default=4, help="alternating produce rounds (4)")
    parser.add_argument("--segment-mb", type=int, default=1, help="segment.bytes of both topics in MiB (1)")
    args = parser.parse_args(argv)
    records = args.mb * 1_000_000 // SIZE
    workdir = Path(tempfile.mkdtemp(prefix="moldau-bench-tiered-"))
    overrides = {"remote.log.storage.system.enable": "true", "remote.log.manager.task.interval.ms": "500",
                 "rlmm.config.remote.log.metadata.topic.num.partitions": "1"}
    s3 = None
    if args.backend == "s3":
        s3 = start_s3_server(workdir / "moto.log")
        overrides.update({"remote.log.storage.manager.class.name": "s3", **s3.rsm_config("bench")})
    else:
        overrides.update({"remote.log.storage.manager.class.name": "filesystem",
                          "rsm.config.dir": str(workdir / "remote")})
    broker = BrokerProcess(workdir / "broker", overrides=overrides)
    try:
        broker.start()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        segment = {"segment.bytes": str(args.segment_mb * 1024 * 1024)}
        for name, configs in (("local", segment), ("tiered", {**segment, "remote.storage.enable": "true",
                                                              "local.retention.bytes": "1"})):
            admin.create_topics([NewTopic(name, 1, 1, config=configs)])[name].result(30)
        tiered_dir = broker.partition_dir("tiered")

        def copied() -> bool:
            return len(list(tiered_dir.glob("*.log"))) <= 2

        per_round = records // args.rounds
        records = per_round * args.rounds
        round_mb = per_round * SIZE / 1e6
        untiered_rates, tiered_rates = [], []
        for _ in range(args.rounds):
            wait_until(copied, 900, "the tiered topic's segments copied")  # no copy runs during the untiered round
            untiered_rates.append(round_mb / produce(broker.bootstrap, "local", per_round))
            tiered_rates.append(round_mb / produce(broker.bootstrap, "tiered", per_round))
        wait_until(copied, 900, "the tiered topic's segments copied")
        local_read = consume(broker.bootstrap, "local", records)
        remote_read = consume(broker.bootstrap, "tiered", records)
        mb = records * SIZE / 1e6
        untiered, tiered = statistics.median(untiered_rates), statistics.median(tiered_rates)
        print(f"backend {args.backend}, {records} x {SIZE} B ({mb:.0f} MB) per topic, {args.segment_mb} MiB segments")
        print(f"| read from offset 0 | local {mb / local_read:.1f} MB/s | remote {mb / remote_read:.1f} MB/s | "
              f"remote / local {local_read / remote_read:.2f} |")
        print(f"| produce, median of {args.rounds} rounds | untiered {untiered:.1f} MB/s | tiered while copying "
              f"{tiered:.1f} MB/s | ratio {tiered / untiered:.2f} |")
        print(f"rounds untiered {' '.join(f'{r:.1f}' for r in untiered_rates)}; tiered "
              f"{' '.join(f'{r:.1f}' for r in tiered_rates)} MB/s")
        broker.stop()
    finally:
        broker.kill()
        if s3 is not None:
            s3.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
