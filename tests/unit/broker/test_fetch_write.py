"""How a Fetch answer's record bytes reach the socket (broker/network.py), over a real socket server in-process:
small file regions (many partitions with a little data each, as a follower's answer over thousands of
partitions) are read into the bytes around them and written together; large ones go by sendfile, unless the
answer's regions together are small (a replication round's batches: read in, one write). Either way the client
gets exactly the log's bytes, in order."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path

import pytest

from moldau.broker import network
from moldau.broker.metrics import BrokerMetrics
from moldau.broker.network import COPY_BELOW, COPY_WHOLE_BELOW
from moldau.protocol.api import REGISTRY, ApiKey
from moldau.protocol.records import build_batch
from tests.unit.broker.apis.handler_env import make_env
from tests.unit.broker.test_produce_pipelining import _frame, serving

SMALL = 30


@pytest.mark.parametrize("flush_at", [None, 100])
@pytest.mark.parametrize("large", [600, 100])
async def test_small_regions_are_copied_and_large_ones_sent_with_sendfile(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flush_at: int | None, large: int) -> None:
    """``flush_at`` 100: the copied bytes are written out every ~100 bytes instead of gathered whole. ``large``
    100: the large region (~25 KiB) and the small ones add up to less than ``COPY_WHOLE_BELOW``: all copied."""
    if flush_at is not None:
        monkeypatch.setattr(network, "FLUSH_AT", flush_at)
    env = make_env(tmp_path)
    await env.create_topic("t", partitions=SMALL + 1)
    rm = env.replica_manager
    for p in range(SMALL):
        rm.append("t", p, bytearray(build_batch([(None, b"v%d" % p, [], None)])), 1)
    rm.append("t", SMALL, bytearray(build_batch([(None, bytes(range(256)) * large, [], None)])), 1)
    expected = {p: rm.read("t", p, 0, 1 << 20, consumer=True).records for p in range(SMALL + 1)}
    small_bytes = sum(expected[p].size for p in range(SMALL))
    assert all(expected[p].size < COPY_BELOW for p in range(SMALL)) and expected[SMALL].size >= COPY_BELOW
    whole = small_bytes + expected[SMALL].size < COPY_WHOLE_BELOW
    assert whole == (large == 100)
    metrics = BrokerMetrics()
    async with serving(env, workers=1, metrics=metrics) as (reader, writer):
        writer.write(_frame(ApiKey.FETCH, 12, 7, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 24, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
            "topics": [{"topic": "t", "partitions": [
                {"partition": p, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 20} for p in range(SMALL + 1)]}]}))
        size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 5))[0]
        frame = await asyncio.wait_for(reader.readexactly(size), 5)
    assert struct.unpack_from(">i", frame)[0] == 7
    # Response header v1 (flexible): correlation id + an empty tagged-field section.
    body, end = REGISTRY[ApiKey.FETCH].response_decoder(12)(memoryview(frame), 5)
    assert end == len(frame)
    got = {p["partition_index"]: bytes(p["records"]) for p in body["responses"][0]["partitions"]}
    assert got == {p: b"".join(r.read() for r in expected[p].regions) for p in expected}

    def sample(name: str) -> float | None:
        return metrics.registry.get_sample_value(name, {})

    if whole:
        assert sample("moldau_fetch_copied_bytes_total") == small_bytes + expected[SMALL].size
        assert sample("moldau_fetch_sendfile_bytes_total") == 0
    else:
        assert sample("moldau_fetch_copied_bytes_total") == small_bytes
        assert sample("moldau_fetch_sendfile_bytes_total") == expected[SMALL].size
