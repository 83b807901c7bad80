"""Where the time of loading the logs at start-up goes (the recovery breakdown the broker logs, issue #21)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class LoadStats:
    logs: int = 0
    segments_trusted: int = 0  # indexes opened as they are (below the recovery point, or a clean shutdown)
    segments_lazy: int = 0  # sealed segments left unopened after a clean shutdown (opened on first use)
    segments_recovered: int = 0  # re-scanned: every batch validated (CRC32C) and the indexes rebuilt
    bytes_recovered: int = 0
    checkpoints_s: float = 0.0  # recovery-point and log-start-offset checkpoint files
    open_s: float = 0.0  # directories listed, segment files and their (trusted) indexes opened
    recover_s: float = 0.0  # segment scans with index rebuilds
    flush_s: float = 0.0  # fsync of the re-scanned segments (and their rebuilt indexes) past the recovery point
    producer_state_s: float = 0.0  # producer-state snapshot load and replay of the batches past it
    total_s: float = 0.0  # wall time; the other times are summed over the logs (and threads)

    def add(self, other: LoadStats) -> None:
        """Adds one log's figures (logs load on several threads, each with its own LoadStats)."""
        self.logs += other.logs
        self.segments_trusted += other.segments_trusted
        self.segments_lazy += other.segments_lazy
        self.segments_recovered += other.segments_recovered
        self.bytes_recovered += other.bytes_recovered
        self.open_s += other.open_s
        self.recover_s += other.recover_s
        self.flush_s += other.flush_s
        self.producer_state_s += other.producer_state_s

    def summary(self) -> str:
        return (f"log loading: {self.logs} logs in {self.total_s:.2f} s: checkpoints {self.checkpoints_s:.2f} s, "
                f"opening segments and trusted indexes {self.open_s:.2f} s ({self.segments_trusted} segments; "
                f"{self.segments_lazy} left to open on first use), "
                f"segment scan and index rebuild {self.recover_s:.2f} s ({self.segments_recovered} segments, "
                f"{self.bytes_recovered / 2**20:.1f} MiB), fsync of the re-scanned segments {self.flush_s:.2f} s, "
                f"producer state {self.producer_state_s:.2f} s")
