"""``send_many`` / ``send_many_partitions`` cut each partition's records into batches with one bisection over
their cumulative sizes per batch (issue #21: a step per record cost the client ~10% of its append time over
10,000 partitions); the batches must be exactly those that filling batch.size one record at a time makes."""

from __future__ import annotations

import random
from itertools import accumulate

from moldau.producer import Producer

PARTITIONS = 12


class _Topic:
    """The cluster as the append path asks it: a topic of PARTITIONS partitions."""

    metadata_version = 1

    def partitions_for(self, topic: str) -> list[int] | None:
        return list(range(PARTITIONS))


def _greedy(sizes: list[int], batch_size: int) -> list[int]:
    """Record counts per batch as batch.size fills them one record at a time: a record that does not fit in a
    batch with records starts the next one; a batch at batch.size or more is closed."""
    counts: list[int] = []
    used = closed = 0
    for s in sizes:
        if not counts or closed or (used + s > batch_size and used):
            counts.append(0)
            used = closed = 0
        counts[-1] += 1
        used += s
        closed = used >= batch_size
    return counts


async def test_send_many_partitions_fills_batches_as_one_record_at_a_time_would() -> None:
    rng = random.Random(7)
    for batch_size in (1, 50, 300, 4096):
        producer = Producer(bootstrap_servers="127.0.0.1:9", enable_idempotence=False, acks=1, linger_ms=0,
                            batch_size=batch_size)  # never started: no I/O, no sender
        producer._cluster = _Topic()  # type: ignore[assignment]  # noqa: SLF001
        producer._started = True  # noqa: SLF001 - the batches stay queued for the test to read
        values = {p: [b"v" * rng.choice((0, 1, 5, 40, 200, 5000)) for _ in range(rng.randint(1, 60))]
                  for p in range(PARTITIONS)}
        await producer.send_many_partitions("t", values)
        for p, vals in values.items():
            queue = producer._queues[("t", p)]  # noqa: SLF001
            assert [r[1] for b in queue for r in b.records] == vals  # every record once, in order
            sizes = [22 + len(v) for v in vals]  # RECORD_OVERHEAD + value
            assert [len(b.records) for b in queue] == _greedy(sizes, batch_size)
            starts = [0, *accumulate(len(b.records) for b in queue)]
            assert [b.size for b in queue] == [sum(sizes[a:z]) for a, z in zip(starts, starts[1:])]
            assert all(not b.open for b in list(queue)[:-1])  # only the last batch takes more records
    assert producer._buffered == sum(22 + len(v) for vals in values.values() for v in vals)  # noqa: SLF001
