"""Summary log lines for work over many partitions: a count and a few names, instead of a line per partition (a
broker death in a cluster of 10,000 partitions made 10,000 lines per broker, 8-11% of the event loop's time)."""

from __future__ import annotations

from collections.abc import Sequence

from moldau.protocol.types import TopicPartition

EXAMPLES = 5


def partition_examples(tps: Sequence[TopicPartition], count: int = EXAMPLES) -> str:
    """``"t-0, t-1, t-2 and 7 more"``: the first ``count`` partitions, then how many are left unnamed."""
    named = ", ".join(f"{t}-{p}" for t, p in tps[:count])
    return named + (f" and {len(tps) - count} more" if len(tps) > count else "")
