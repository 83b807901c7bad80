"""The broker's fetch path alone: how fast one Moldau broker serves stored records (sendfile, zero-copy).

    .venv/bin/python bench/fetch_path.py                      # 1,000,000 x 100 B, fetched 1 MiB per request
    .venv/bin/python bench/fetch_path.py --records 200000 --fetch-bytes 4194304
    .venv/bin/python bench/fetch_path.py --tls                # an SSL listener: no sendfile, bytes copied

Starts its own broker, writes the records with our own connection layer (batches just under 1 MB built with
protocol.records.build_batch), then fetches them back sequentially from offset 0 with Fetch v11 requests over
client.connection.BrokerConnection, without decoding records (only batch headers, to find the next offset). This
isolates the broker from client-library costs; `bench/produce_consume.py` measures the end-to-end figure with
librdkafka. Reports MB/s, records/s, fetches/s, and the sendfile byte counter from /metrics. Not part of the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from moldau.connection import BrokerConnection  # noqa: E402
from moldau.protocol.api import REGISTRY, ApiKey  # noqa: E402
from moldau.protocol.records import build_batch, iter_headers  # noqa: E402
from moldau.security import ClientSecurity, security_from_config  # noqa: E402
from tests.integration.harness import BrokerProcess  # noqa: E402

PRODUCE, FETCH, CREATE = REGISTRY[ApiKey.PRODUCE], REGISTRY[ApiKey.FETCH], REGISTRY[ApiKey.CREATE_TOPICS]
TOPIC = "fetch-bench"


def sendfile_bytes(metrics_url: str, name: str = "moldau_fetch_sendfile_bytes_total") -> float:
    text = urllib.request.urlopen(metrics_url, timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


async def run(host: str, port: int, records: int, size: int, fetch_bytes: int,
              security: ClientSecurity | None = None) -> tuple[float, int, int]:
    conn = BrokerConnection(host, port, security=security)
    await conn.connect()
    try:
        await conn.send(CREATE, {"topics": [{"name": TOPIC, "num_partitions": 1, "replication_factor": 1}],
                                 "timeout_ms": 10000})
        value = b"v" * size
        per_batch = max(1, 900_000 // (size + 20))  # stay under the default max.message.bytes
        for start in range(0, records, per_batch):
            n = min(per_batch, records - start)
            batch = build_batch([(None, value, [], None)] * n)
            r = await conn.send(PRODUCE, {"acks": 1, "timeout_ms": 30000, "topic_data": [
                {"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]})
            error = r["responses"][0]["partition_responses"][0]["error_code"]
            if error:
                raise RuntimeError(f"produce failed with error {error}")
        offset = fetches = total = 0
        t0 = time.perf_counter()
        while offset < records:
            r = await conn.send(FETCH, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": fetch_bytes, "session_epoch": -1,
                "topics": [{"topic": TOPIC, "partitions": [{"partition": 0, "fetch_offset": offset,
                                                           "log_start_offset": -1, "current_leader_epoch": -1,
                                                           "partition_max_bytes": fetch_bytes}]}]}, version=11)
            data = r["responses"][0]["partitions"][0]["records"]
            fetches += 1
            total += len(data)
            for _, header in iter_headers(data):
                offset = header.next_offset
        return time.perf_counter() - t0, fetches, total
    finally:
        await conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--fetch-bytes", type=int, default=1_048_576)
    parser.add_argument("--tls", action="store_true", help="serve over an SSL listener (throwaway CA)")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="moldau-fetch-bench-"))
    broker = BrokerProcess(workdir)
    security = None
    if args.tls:
        from tests.integration.secure import make_certs

        certs = make_certs(workdir / "certs")
        broker.overrides.update({"listeners": f"SSL://127.0.0.1:{broker.port}", "security.inter.broker.protocol":
                                 "SSL", "ssl.keystore.type": "PEM", "ssl.truststore.type": "PEM",
                                 "ssl.keystore.location": str(certs.broker_pem)})
        security = security_from_config({"security.protocol": "SSL", "ssl.ca.location": str(certs.ca)})
    try:
        broker.start()
        before = sendfile_bytes(broker.metrics_url)
        copied_before = sendfile_bytes(broker.metrics_url, "moldau_fetch_copied_bytes_total")
        seconds, fetches, total = asyncio.run(run("127.0.0.1", broker.port, args.records, args.size,
                                                  args.fetch_bytes, security))
        by_sendfile = sendfile_bytes(broker.metrics_url) - before
        copied = sendfile_bytes(broker.metrics_url, "moldau_fetch_copied_bytes_total") - copied_before
        broker.stop()
    finally:
        broker.kill()
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"fetched {args.records:,} records of {args.size} B in {fetches} fetches of <= {args.fetch_bytes:,} B: "
          f"{seconds:.3f} s, {total / seconds / 1e6:.0f} MB/s, {args.records / seconds:,.0f} records/s, "
          f"{fetches / seconds:,.0f} fetches/s; {by_sendfile / max(total, 1):.0%} of the bytes went by sendfile, "
          f"{copied / max(total, 1):.0%} copied{' (TLS)' if args.tls else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
