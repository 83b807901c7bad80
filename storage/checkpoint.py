"""Kafka's checkpoint files: a version line, a count line, then one entry per line.

Per log dir: ``recovery-point-offset-checkpoint``, ``replication-offset-checkpoint`` (high watermarks) and
``log-start-offset-checkpoint``, entries ``"<topic> <partition> <offset>"``. Per partition dir:
``leader-epoch-checkpoint``, entries ``"<epoch> <start offset>"``. Files are replaced atomically (write a ``.tmp``
sibling, fsync it, rename over the old file, fsync the directory) so a crash leaves the old or the new file, never a
mix. The format is Kafka's, so a Kafka broker can read our directories and we can read its.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from moldau.protocol.types import TopicPartition

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
CHECKPOINT_VERSION = 0


class CheckpointError(ValueError):
    """The checkpoint file is malformed."""


def fsync_dir(path: Path) -> None:
    """Make a rename or file creation in ``path`` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


_SYNCFS: object = None  # libc's syncfs once looked up; False where there is none


def _syncfs() -> object:
    global _SYNCFS
    if _SYNCFS is None:
        _SYNCFS = False
        if sys.platform == "linux":
            try:
                import ctypes

                libc = ctypes.CDLL(None, use_errno=True)
                _SYNCFS = libc.syncfs
            except (OSError, AttributeError):
                pass
    return _SYNCFS


def can_sync_filesystem() -> bool:
    """Whether :func:`sync_filesystem` is available here (Linux's syncfs)."""
    return bool(_syncfs())


def sync_filesystem(path: Path) -> None:
    """Makes everything written to the file system holding ``path`` durable, file data and directory entries, in
    one call (Linux's syncfs: one flush of the device instead of an fsync per file). Raises OSError on failure."""
    syncfs = _syncfs()
    if not syncfs:
        raise OSError("syncfs is not available on this platform")
    fd = os.open(path, os.O_RDONLY)
    try:
        import ctypes

        if syncfs(fd) != 0:  # type: ignore[operator]
            err = ctypes.get_errno()
            raise OSError(err, f"syncfs({path}): {os.strerror(err)}")
    finally:
        os.close(fd)


def write_atomically(path: Path, text: str, durable: bool = True) -> None:
    """Write, rename over ``path``; ``durable`` fsyncs the file before and the directory after the rename (else
    the caller syncs later, see :func:`fsync_file`).

    Plain ``os`` calls on a string path: a broker writes a ``leader-epoch-checkpoint`` per partition replica
    after its epochs change (10,000 after a burst of leader changes, on a worker thread that shares the GIL
    with the event loop), and ``open()`` in text mode of a ``Path`` adds a buffer and a text layer, their system
    calls (fstat, ioctl, lseek) and path objects to each."""
    target = os.fspath(path)
    tmp = target + ".tmp"
    data = memoryview(text.encode("utf-8"))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)  # as open(): 0o666 less the umask
    try:
        while data:
            data = data[os.write(fd, data):]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, target)
    if durable:
        fsync_dir(Path(target).parent)


def fsync_file(path: Path) -> None:
    """Make a file written with ``durable=False`` durable: fsync it and its directory (a missing file is skipped)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(path.parent)


def _format(lines: Iterable[str]) -> str:
    body = list(lines)
    return f"{CHECKPOINT_VERSION}\n{len(body)}\n" + "".join(line + "\n" for line in body)


def _parse(path: Path, fields: int) -> list[list[str]]:
    """Returns the entry lines split into ``fields`` columns; a missing file reads as empty."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    lines = text.splitlines()
    if len(lines) < 2:
        raise CheckpointError(f"{path}: missing version or count line")
    if lines[0].strip() != str(CHECKPOINT_VERSION):
        raise CheckpointError(f"{path}: unsupported checkpoint version {lines[0]!r}")
    try:
        count = int(lines[1])
    except ValueError:
        raise CheckpointError(f"{path}: bad count line {lines[1]!r}") from None
    entries = [line.split() for line in lines[2:] if line.strip()]
    if len(entries) != count:
        raise CheckpointError(f"{path}: expected {count} entries, found {len(entries)}")
    for parts in entries:
        if len(parts) != fields:
            raise CheckpointError(f"{path}: malformed entry {' '.join(parts)!r}")
    return entries


def write_offsets(path: Path, offsets: Mapping[TopicPartition, int]) -> None:
    """Writes a per-log-dir offset checkpoint (recovery points, high watermarks, log start offsets)."""
    lines = (f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items()))
    write_atomically(path, _format(lines))


def read_offsets(path: Path) -> dict[TopicPartition, int]:
    """Reads a per-log-dir offset checkpoint; a missing file is an empty mapping."""
    result: dict[TopicPartition, int] = {}
    for topic, partition, offset in _parse(path, 3):
        try:
            result[(topic, int(partition))] = int(offset)
        except ValueError:
            raise CheckpointError(f"{path}: malformed entry {topic} {partition} {offset}") from None
    return result


def leader_epochs_text(entries: Iterable[tuple[int, int]]) -> str:
    """The ``leader-epoch-checkpoint`` contents (also stored with each remote segment)."""
    return _format(f"{epoch} {start_offset}" for epoch, start_offset in entries)


def write_leader_epochs(path: Path, entries: Iterable[tuple[int, int]], durable: bool = True) -> None:
    """Writes a partition's ``leader-epoch-checkpoint``: (epoch, start offset) pairs in ascending order."""
    write_atomically(path, leader_epochs_text(entries), durable)


def read_leader_epochs(path: Path) -> list[tuple[int, int]]:
    result: list[tuple[int, int]] = []
    for epoch, start_offset in _parse(path, 2):
        try:
            result.append((int(epoch), int(start_offset)))
        except ValueError:
            raise CheckpointError(f"{path}: malformed entry {epoch} {start_offset}") from None
    return result
