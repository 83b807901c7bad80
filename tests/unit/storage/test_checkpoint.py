from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moldau.storage.checkpoint import (
    CheckpointError,
    read_leader_epochs,
    read_offsets,
    write_atomically,
    write_leader_epochs,
    write_offsets,
)
from moldau.storage.leader_epoch import LeaderEpochCache


def test_offsets_format(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    write_offsets(path, {("b.topic-x", 1): 42, ("a", 0): 7})
    assert path.read_text() == "0\n2\na 0 7\nb.topic-x 1 42\n"
    assert read_offsets(path) == {("a", 0): 7, ("b.topic-x", 1): 42}
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()


def test_missing_file_is_empty(tmp_path: Path) -> None:
    assert read_offsets(tmp_path / "nope") == {}
    assert read_leader_epochs(tmp_path / "nope") == []


@pytest.mark.parametrize(
    "text",
    ["", "0\n", "1\n0\n", "0\n2\na 0 1\n", "0\n1\na 0\n", "0\n1\na x 1\n", "0\nx\n"],
)
def test_malformed_files_raise(tmp_path: Path, text: str) -> None:
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(CheckpointError):
        read_offsets(path)


@settings(max_examples=50, deadline=None)
@given(
    st.dictionaries(
        st.tuples(st.from_regex(r"[a-zA-Z0-9._-]{1,20}", fullmatch=True), st.integers(0, 10_000)),
        st.integers(0, 2**63 - 1),
        max_size=30,
    )
)
def test_offsets_round_trip(
    tmp_path_factory: pytest.TempPathFactory, offsets: dict[tuple[str, int], int]
) -> None:
    path = tmp_path_factory.mktemp("cp") / "replication-offset-checkpoint"
    write_offsets(path, offsets)
    assert read_offsets(path) == offsets


def test_leader_epochs_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    write_leader_epochs(path, [(0, 0), (3, 100), (7, 250)])
    assert path.read_text() == "0\n3\n0 0\n3 100\n7 250\n"
    assert read_leader_epochs(path) == [(0, 0), (3, 100), (7, 250)]


@pytest.mark.parametrize("durable", [True, False])
def test_write_atomically_replaces_the_whole_file(tmp_path: Path, durable: bool) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    (tmp_path / "leader-epoch-checkpoint.tmp").write_text("a stale temporary file of a crashed write, longer\n")
    write_atomically(path, "0\n2\n0 0\n3 100\n", durable)
    assert path.read_bytes() == b"0\n2\n0 0\n3 100\n"
    first = path.stat().st_ino
    write_atomically(path, "0\n1\n3 7\n", durable)  # shorter: nothing of the old contents is left
    assert path.read_bytes() == b"0\n1\n3 7\n"
    assert path.stat().st_ino != first  # a new file renamed over the old one, not rewritten in place
    assert sorted(p.name for p in tmp_path.iterdir()) == ["leader-epoch-checkpoint"]
    # The permissions open() would have given a new file (0o666 less the umask).
    (tmp_path / "by-open").write_text("")
    assert path.stat().st_mode == (tmp_path / "by-open").stat().st_mode


def test_leader_epoch_cache(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    assert cache.end_offset_for(0, 10) == (-1, -1)
    cache.assign(1, 0)
    cache.assign(1, 5)  # same epoch, later offset: no change
    cache.assign(3, 10)
    cache.assign(5, 20)
    assert cache.entries == [(1, 0), (3, 10), (5, 20)]
    assert LeaderEpochCache(tmp_path).entries == cache.entries  # persisted
    assert cache.end_offset_for(5, 30) == (5, 30)
    assert cache.end_offset_for(3, 30) == (3, 20)
    assert cache.end_offset_for(4, 30) == (3, 20)  # unknown epoch: the largest below it
    assert cache.end_offset_for(0, 30) == (0, 0)  # below the earliest
    assert cache.end_offset_for(6, 30) == (-1, -1)
    assert [cache.epoch_for_offset(o) for o in (0, 9, 10, 19, 20, 99)] == [1, 1, 3, 3, 5, 5]
    cache.truncate_from_end(15)
    assert cache.entries == [(1, 0), (3, 10)]
    cache.truncate_from_start(12)
    assert cache.entries == [(3, 12)]
    cache.assign(2, 11)  # a lower epoch replaces what is above it (non-monotonic entries go)
    assert cache.entries == [(2, 11)]
