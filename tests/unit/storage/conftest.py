from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from moldau.protocol.records import build_batch, iter_headers
from moldau.storage import Log, LogConfig, ManualClock


def batch(
    n: int = 1,
    *,
    ts: int = 1_000,
    value_size: int = 10,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    compression: int = 0,
    ts_step: int = 0,
) -> bytes:
    """A v2 batch of ``n`` records with timestamps ts, ts + ts_step, ..."""
    return build_batch(
        [(b"k%d" % i, bytes([65 + i % 26]) * value_size, None, ts + i * ts_step) for i in range(n)],
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        compression=compression,
    )


def batch_offsets(data: bytes) -> list[tuple[int, int]]:
    """(base offset, last offset) of every batch in ``data``."""
    return [(h.base_offset, h.last_offset) for _, h in iter_headers(data)]


def small_config(**overrides: int | str) -> LogConfig:
    cfg = LogConfig(segment_bytes=4096, index_interval_bytes=256, file_delete_delay_ms=0)
    for k, v in overrides.items():
        setattr(cfg, k, v)
    return cfg


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "my.topic-name-0"


@pytest.fixture
def make_log(log_dir: Path, clock: ManualClock) -> Iterator:
    opened: list[Log] = []

    def _make(config: LogConfig | None = None, **kwargs: object) -> Log:
        log = Log(log_dir, config or small_config(), clock, **kwargs)  # type: ignore[arg-type]
        opened.append(log)
        return log

    yield _make
    for log in opened:
        try:
            log.close(take_snapshot=False)
        except Exception:
            pass
