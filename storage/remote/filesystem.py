"""A remote storage manager over a directory, meant for a mount every broker shares (NFS, a cloud file system)
and for tests.

Layout: ``<dir>/<topic>-<partition>/<start offset, 20 digits>-<segment id>.<kind>``, one file per kind (``log``,
``index``, ``timeindex``, ``txnindex``, ``snapshot``, ``leader_epoch_checkpoint``). Each file is written under a
``.tmp`` name, fsynced and renamed, the ``.log`` last, so a reader that finds the ``.log`` finds the rest.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from moldau.storage.checkpoint import fsync_dir, write_leader_epochs
from moldau.storage.remote.api import (
    IndexType,
    LogSegmentData,
    RemoteLogSegmentMetadata,
    RemoteResourceNotFoundError,
    RemoteStorageError,
)

LOG_KIND = ".log"


class FileSystemRemoteStorageManager:
    """Configured with ``rsm.config.dir`` (the shared directory; created if missing)."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root

    def configure(self, configs: Mapping[str, str]) -> None:
        if "dir" in configs:
            self.root = Path(configs["dir"])
        if self.root is None:
            raise ValueError("the filesystem remote storage manager needs rsm.config.dir")
        self.root.mkdir(parents=True, exist_ok=True)

    def _base(self, metadata: RemoteLogSegmentMetadata) -> Path:
        if self.root is None:
            raise RemoteStorageError("remote storage manager not configured")
        sid = metadata.segment_id
        return self.root / f"{sid.topic}-{sid.partition}" / f"{metadata.start_offset:020d}-{sid.id}"

    def _path(self, metadata: RemoteLogSegmentMetadata, kind: str) -> Path:
        base = self._base(metadata)
        return base.with_name(base.name + kind)

    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata, data: LogSegmentData) -> None:
        target = self._path(metadata, LOG_KIND)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            sources: list[tuple[str, Path | None]] = [
                (IndexType.OFFSET.value, data.offset_index),
                (IndexType.TIMESTAMP.value, data.time_index),
                (IndexType.TRANSACTION.value, data.transaction_index),
                (IndexType.PRODUCER_SNAPSHOT.value, data.producer_snapshot),
            ]
            for kind, src in sources:
                self._copy_file(src, self._path(metadata, kind))
            epochs = self._path(metadata, IndexType.LEADER_EPOCH.value)
            write_leader_epochs(epochs, data.leader_epochs)
            self._copy_file(data.log_segment, target)
            fsync_dir(target.parent)
        except OSError as exc:
            raise RemoteStorageError(f"copying {metadata.segment_id} to {target.parent}: {exc}") from exc

    @staticmethod
    def _copy_file(src: Path | None, dst: Path) -> None:
        tmp = dst.with_name(dst.name + ".tmp")
        with open(tmp, "wb") as out:
            if src is not None:
                with open(src, "rb") as f:
                    shutil.copyfileobj(f, out, 1024 * 1024)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, dst)

    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None) -> bytes:
        path = self._path(metadata, LOG_KIND)
        try:
            with open(path, "rb") as f:
                f.seek(start_position)
                if end_position is None:
                    return f.read()
                return f.read(max(end_position - start_position + 1, 0))
        except FileNotFoundError:
            raise RemoteResourceNotFoundError(f"remote segment {metadata.segment_id} not found") from None
        except OSError as exc:
            raise RemoteStorageError(f"reading {path}: {exc}") from exc

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        path = self._path(metadata, index_type.value)
        try:
            return path.read_bytes()
        except FileNotFoundError:
            raise RemoteResourceNotFoundError(
                f"{index_type.name} index of remote segment {metadata.segment_id} not found") from None
        except OSError as exc:
            raise RemoteStorageError(f"reading {path}: {exc}") from exc

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        try:
            self._path(metadata, LOG_KIND).unlink(missing_ok=True)  # first: the segment is gone for readers
            for kind in IndexType:
                self._path(metadata, kind.value).unlink(missing_ok=True)
                self._path(metadata, kind.value + ".tmp").unlink(missing_ok=True)
            self._path(metadata, LOG_KIND + ".tmp").unlink(missing_ok=True)
        except OSError as exc:
            raise RemoteStorageError(f"deleting {metadata.segment_id}: {exc}") from exc

    def close(self) -> None:
        pass
