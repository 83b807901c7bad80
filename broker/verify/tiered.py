"""``--tiered``: the check with tiered storage on (KIP-405, docs/tiered-storage.md). The topic gets
``remote.storage.enable=true`` with small segments and a small local retention, so most of each partition moves
to remote storage during the run and the final read from the beginning goes through it; a launched cluster gets
a filesystem store under its directory (unless ``--override`` chooses a storage manager, e.g. S3)."""

from __future__ import annotations

import argparse
from pathlib import Path

SEGMENT_BYTES = 8192  # a few seconds of the default workload (100 records/s over 6 partitions)
TOPIC_CONFIGS = {"remote.storage.enable": "true", "segment.bytes": str(SEGMENT_BYTES),
                 "local.retention.bytes": str(SEGMENT_BYTES)}
REMOTE_DIR = "remote-storage"


def topic_configs(args: argparse.Namespace) -> dict[str, str]:
    """The topic's settings: --tiered's, then every --topic-config (which win)."""
    configs = dict(TOPIC_CONFIGS) if args.tiered else {}
    for item in args.topic_config:
        key, _, value = item.partition("=")
        configs[key.strip()] = value
    return configs


def broker_overrides(args: argparse.Namespace, workdir: Path) -> list[str]:
    """Settings for a launched cluster with --tiered, before the user's --override (which win)."""
    if not args.tiered:
        return []
    chosen = any(o.partition("=")[0].strip() == "remote.log.storage.manager.class.name" for o in args.override)
    store = [] if chosen else ["remote.log.storage.manager.class.name=filesystem",
                               f"rsm.config.dir={workdir / REMOTE_DIR}"]
    return ["remote.log.storage.system.enable=true", *store, "remote.log.manager.task.interval.ms=1000",
            "rlmm.config.remote.log.metadata.topic.num.partitions=5",
            f"rlmm.config.remote.log.metadata.topic.replication.factor={min(3, args.launch)}"]


def remote_segments(workdir: Path) -> int:
    """Segments in a launched cluster's filesystem store (0 for another store)."""
    return sum(1 for _ in (workdir / REMOTE_DIR).rglob("*.log"))
