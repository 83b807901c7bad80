"""The checker on hand-made histories: each anomaly is flagged where it happened and nowhere else."""

from __future__ import annotations

from pathlib import Path

from moldau.broker.verify.checker import ANOMALIES, check
from moldau.broker.verify.history import FINAL_READ, History, make_value, parse_value


def v(n: int, producer: str = "p") -> bytes:
    return make_value(producer, n)


def clean(n: int = 6, partitions: int = 2) -> History:
    """n values round-robin over the partitions, every one acknowledged and read where it was acknowledged."""
    h = History()
    for i in range(n):
        partition, offset = i % partitions, i // partitions
        h.attempt(v(i), partition)
        h.ack(v(i), partition, offset)
    records = [(i % partitions, i // partitions, v(i)) for i in range(n)]
    h.read("consumer-0", records)
    h.read(FINAL_READ, records)
    return h


def only(report_counts: dict[str, int], kind: str | None) -> bool:
    return all(count == 0 for k, count in report_counts.items() if k != kind) and \
        (kind is None or report_counts[kind] > 0)


def test_a_clean_history_has_no_anomaly() -> None:
    report = check(clean())
    assert report.ok and only(report.counts, None)
    assert (report.attempted, report.acked, report.final_read, report.consumed) == (6, 6, 6, 6)
    assert "result" in report.table() and "OK" in report.table()


def test_an_acknowledged_value_missing_from_the_final_read_is_lost() -> None:
    h = clean()
    h.reads[FINAL_READ] = [r for r in h.reads[FINAL_READ] if r[2] != v(3)]
    report = check(h)
    assert report.counts["lost"] == 1 and only(report.counts, "lost")
    assert "p:3 acked at 1/1" in report.examples["lost"][0]
    assert not report.ok and "FAILED" in report.table()


def test_a_value_a_consumer_read_that_the_final_read_lacks_is_lost_even_unacknowledged() -> None:
    h = clean()
    h.attempt(v(6), 0)  # its answer never came (indeterminate), yet a consumer saw it committed
    h.read("consumer-0", [(0, 3, v(6))])
    report = check(h)
    assert report.counts["lost"] == 1 and only(report.counts, "lost")


def test_unacknowledged_writes_that_vanished_or_survived_are_not_anomalies() -> None:
    h = clean()
    h.attempt(v(6), 0)
    h.fail(v(6), "RequestTimeoutError")  # never written
    h.attempt(v(7), 1)
    h.fail(v(7), "RequestTimeoutError")  # written after all: recovered
    h.read(FINAL_READ, [(1, 3, v(7))])
    report = check(h)
    assert report.ok
    assert (report.failed, report.never_written, report.recovered) == (2, 1, 1)


def test_values_never_attempted_are_unexpected() -> None:
    h = clean()
    h.read(FINAL_READ, [(0, 3, v(0, producer="stranger")), (0, 4, b"not ours"), (0, 5, None)])
    report = check(h)
    assert report.counts["unexpected"] == 3 and only(report.counts, "unexpected")


def test_a_value_at_two_offsets_is_duplicated_not_reordered() -> None:
    h = clean()
    h.read(FINAL_READ, [(0, 3, v(2))])  # p:2 again, after p:4 in partition 0
    report = check(h)
    assert report.counts["duplicated"] == 1 and only(report.counts, "duplicated")
    assert report.examples["duplicated"] == ["p:2 at 0/1, 0/3"]


def test_reading_the_same_record_again_is_no_duplicate() -> None:
    h = clean()
    h.read("consumer-1", h.reads["consumer-0"])  # a rebalance hands the partitions over: read again
    h.read("consumer-0", h.reads["consumer-0"][:2])
    assert check(h).ok


def test_one_producers_values_going_backwards_in_a_partition_are_reordered() -> None:
    h = History()
    for i in range(3):
        h.attempt(v(i), 0)
    h.read(FINAL_READ, [(0, 0, v(0)), (0, 1, v(2)), (0, 2, v(1))])
    report = check(h)
    assert report.counts["reordered"] == 1 and only(report.counts, "reordered")
    assert "p:1 at 0/2 after p:2 at 0/1" in report.examples["reordered"][0]


def test_interleaved_producers_and_separate_partitions_are_in_order() -> None:
    h = History()
    for value, partition in [(v(5), 0), (v(0, "q"), 0), (v(6), 0), (v(1), 1), (v(1, "q"), 0)]:
        h.attempt(value, partition)
    # p:1 in partition 1 is older than p:5 in partition 0: order only holds within a partition
    h.read(FINAL_READ, [(0, 0, v(5)), (0, 1, v(0, "q")), (0, 2, v(6)), (0, 3, v(1, "q")), (1, 0, v(1))])
    assert check(h).ok


def test_one_offset_with_two_values_across_reads_is_changed() -> None:
    h = clean()
    h.attempt(v(9), 1)  # unacknowledged; a consumer read it at 1/2, where the final read finds p:5
    h.reads["consumer-0"] = [(p, o, v(9) if (p, o) == (1, 2) else val) for p, o, val in h.reads["consumer-0"]]
    report = check(h)
    assert any("1/2 held p:5, p:9" in e for e in report.examples["changed"])
    # The rewritten record is gone, which is a loss too; nothing else is flagged.
    assert report.counts["lost"] == 1 and report.counts["duplicated"] == report.counts["unexpected"] == 0
    assert report.counts["reordered"] == 0


def test_a_value_read_at_another_offset_than_acknowledged_is_changed() -> None:
    h = clean()
    h.acks[v(4)] = (0, 7)  # the broker said offset 7; every read found it at offset 2
    report = check(h)
    assert report.counts["changed"] >= 1 and only(report.counts, "changed")
    assert any("p:4 acked at 0/7, read at 0/2" in e for e in report.examples["changed"])


def test_every_anomaly_is_counted_but_examples_are_capped() -> None:
    h = clean(n=40, partitions=1)
    h.reads[FINAL_READ] = []
    report = check(h)
    assert report.counts["lost"] == 40 and len(report.examples["lost"]) == 5
    assert report.to_json()["anomalies"] == {**dict.fromkeys(ANOMALIES, 0), "lost": 40}


def test_values_parse_and_histories_survive_a_round_trip_through_a_file(tmp_path: Path) -> None:
    assert parse_value(v(12, "ab:cd")) == ("ab:cd", 12)
    assert parse_value(b"p:x") is None and parse_value(None) is None and parse_value(b"12") is None
    h = clean()
    h.fail(v(0), "boom")
    h.read(FINAL_READ, [(0, 9, None)])
    h.meta = {"topic": "t", "partitions": 2}
    h.save(tmp_path / "h.json")
    again = History.load(tmp_path / "h.json")
    assert (again.attempts, again.acks, again.failures, again.reads, again.meta) == \
        (h.attempts, h.acks, h.failures, h.reads, h.meta)
