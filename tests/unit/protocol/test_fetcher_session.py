"""The fetcher's half of an incremental fetch session (KIP-227), as the consumer and the replica fetcher use it."""

from __future__ import annotations

from moldau.protocol.fetch_session import INITIAL_EPOCH, FetcherSession

A, B, C = ("t", 0), ("t", 1), ("u", 0)


def pos(offset: int) -> tuple[int, int, int, int, int]:
    return (-1, offset, -1, -1, 1 << 20)


def test_full_then_only_what_moved_then_forgotten() -> None:
    s = FetcherSession()
    assert s.build({A: pos(0), B: pos(0)}) == (0, INITIAL_EPOCH, {A: pos(0), B: pos(0)}, [])
    s.on_response(77, INITIAL_EPOCH, {A: pos(0), B: pos(0)}, [])
    assert s.build({A: pos(0), B: pos(0)}) == (77, 1, {}, [])  # nothing moved: an empty request
    s.on_response(77, 1, {}, [])
    assert s.build({A: pos(5), B: pos(0), C: pos(0)}) == (77, 2, {A: pos(5), C: pos(0)}, [])
    s.on_response(77, 2, {A: pos(5), C: pos(0)}, [])
    assert s.build({A: pos(5), C: pos(0)}) == (77, 3, {}, [B])  # B no longer wanted
    s.on_response(77, 3, {}, [B])
    assert s.build({A: pos(5), B: pos(9), C: pos(0)}) == (77, 4, {B: pos(9)}, [])  # back: named again


def test_reset_starts_over_naming_the_old_session_and_id_zero_means_none() -> None:
    s = FetcherSession()
    s.on_response(77, INITIAL_EPOCH, {A: pos(0)}, [])
    s.reset()  # a failed request: the leader may or may not have taken its epoch
    assert s.build({A: pos(3)}) == (77, INITIAL_EPOCH, {A: pos(3)}, [])  # the leader drops 77, opens another
    s.on_response(0, INITIAL_EPOCH, {A: pos(3)}, [])  # the leader keeps none (its cache is full)
    assert s.build({A: pos(3)}) == (0, INITIAL_EPOCH, {A: pos(3)}, [])
    s.on_response(5, INITIAL_EPOCH, {A: pos(3)}, [])
    assert s.build({A: pos(3)})[:2] == (5, 1)


def test_the_epoch_wraps_to_one() -> None:
    s = FetcherSession()
    s.on_response(9, INITIAL_EPOCH, {A: pos(0)}, [])
    s.epoch = (1 << 31) - 1
    assert s.build({A: pos(0)})[:2] == (9, (1 << 31) - 1)
    s.on_response(9, (1 << 31) - 1, {}, [])
    assert s.build({A: pos(0)})[:2] == (9, 1)
