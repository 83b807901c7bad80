"""The transactional checker on hand-made histories: a correct one passes, and each broken one (aborted read, torn
transaction, lost or duplicated committed write, last stable offset going backwards or stuck, consume-transform-
produce output missing or duplicated) is flagged, with a message that says where, and nothing else is."""

from __future__ import annotations

from pathlib import Path

from moldau.broker.verify.txn_checker import TXN_ANOMALIES, check_txn
from moldau.broker.verify.txn_history import (
    ABORTED,
    COMMITTED,
    FINAL_RC,
    FINAL_RU,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    UNKNOWN,
    TxnHistory,
    make_output,
    make_value,
    output_source,
)

IN, DATA, OUT = "t-input", "t-data", "t-output"


class Log:
    """Appends records to partitions as a broker would, giving offsets (markers take one each)."""

    def __init__(self) -> None:
        self.next: dict[tuple[str, int], int] = {}
        self.records: list[tuple[str, int, int, bytes]] = []  # every data record, any outcome

    def append(self, topic: str, partition: int, value: bytes) -> int:
        offset = self.next.get((topic, partition), 0)
        self.next[(topic, partition)] = offset + 1
        self.records.append((topic, partition, offset, value))
        return offset

    def marker(self, topic: str, partition: int) -> None:
        self.next[(topic, partition)] = self.next.get((topic, partition), 0) + 1


def clean() -> TxnHistory:
    """Two committed transactions and one aborted over two topics; one consume-transform-produce transaction that
    turns the committed input records into outputs; reads at both isolation levels; LSO samples rising."""
    h = TxnHistory(topics={IN: "input", DATA: "data", OUT: "output"})
    log = Log()
    outcome_of: dict[bytes, str] = {}

    def txn(txn_id: str, kind: str, outcome: str, writes: list[tuple[str, int, bytes]]) -> None:
        t = h.begin(txn_id, txn_id.rsplit(":", 1)[0], kind)
        t.outcome = outcome
        touched = set()
        for topic, partition, value in writes:
            t.writes.append((topic, partition, value))
            h.ack(value, topic, partition, log.append(topic, partition, value))
            outcome_of[value] = outcome
            touched.add((topic, partition))
        for topic, partition in sorted(touched):
            log.marker(topic, partition)

    txn("p:1", "produce", COMMITTED, [(IN, 0, make_value("p", 1, 0)), (DATA, 1, make_value("p", 1, 1))])
    txn("p:2", "produce", ABORTED, [(IN, 0, make_value("p", 2, 2)), (DATA, 0, make_value("p", 2, 3))])
    txn("p:3", "produce", COMMITTED, [(IN, 1, make_value("p", 3, 4)), (DATA, 0, make_value("p", 3, 5)),
                                      (DATA, 0, make_value("p", 3, 6))])
    txn("c:1", "ctp", COMMITTED, [(OUT, 0, make_output("c", 1, 0, make_value("p", 1, 0))),
                                  (OUT, 1, make_output("c", 1, 1, make_value("p", 3, 4)))])
    committed = [r for r in log.records if outcome_of[r[3]] == COMMITTED]
    h.read("reader-committed", READ_COMMITTED, committed)
    h.read("reader-uncommitted", READ_UNCOMMITTED, log.records)
    h.read("c", READ_COMMITTED, [r for r in committed if r[0] == IN])
    h.read(FINAL_RC, READ_COMMITTED, committed)
    h.read(FINAL_RU, READ_UNCOMMITTED, log.records)
    for second, (topic, partition) in enumerate(sorted(log.next)):
        h.lso_samples.append((float(second), topic, partition, 0))
        h.lso_samples.append((second + 0.5, topic, partition, log.next[(topic, partition)]))
        h.final_offsets[(topic, partition)] = (log.next[(topic, partition)], log.next[(topic, partition)])
    return h


def only(counts: dict[str, int], kind: str | None) -> bool:
    return all(n == 0 for k, n in counts.items() if k != kind) and (kind is None or counts[kind] > 0)


def drop(h: TxnHistory, reader: str, value: bytes) -> None:
    h.reads[reader] = [r for r in h.reads[reader] if r[3] != value]


def remove_output(h: TxnHistory, source: bytes) -> None:
    """As if the consume-transform-produce worker had never made the output of ``source``."""
    for t in h.txns.values():
        t.writes = [w for w in t.writes if output_source(w[2]) != source]
    h.acks = {k: pos for k, pos in h.acks.items() if output_source(k) != source}
    for reader, records in h.reads.items():
        h.reads[reader] = [r for r in records if r[3] is None or output_source(r[3]) != source]


def test_a_correct_history_passes() -> None:
    report = check_txn(clean())
    assert report.ok and only(report.counts, None), report.table()
    assert (report.committed, report.aborted, report.unknown, report.ctp_committed) == (3, 1, 0, 1)
    assert (report.records_committed, report.final_read_committed, report.final_read_uncommitted) == (7, 7, 9)
    assert report.to_json()["ok"] and "OK" in report.table()
    assert set(report.to_json()["anomalies"]) == set(TXN_ANOMALIES)


def test_a_record_of_an_aborted_transaction_read_committed_is_an_aborted_read() -> None:
    h = clean()
    aborted = make_value("p", 2, 2)
    h.read("reader-committed", READ_COMMITTED, [(IN, 0, 2, aborted)])
    report = check_txn(h)
    assert only(report.counts, "aborted_read") and report.counts["aborted_read"] == 1, report.table()
    assert "reader-committed read p:2:2 at t-input/0/2 of aborted transaction p:2" in report.examples["aborted_read"][0]
    assert not report.ok and "FAILED" in report.table()


def test_read_uncommitted_may_see_aborted_records() -> None:
    h = clean()  # reader-uncommitted and the final read_uncommitted read hold the aborted transaction already
    assert any(r[3] == make_value("p", 2, 2) for r in h.reads[FINAL_RU])
    assert check_txn(h).ok


def test_an_aborted_transaction_visible_in_the_final_read_committed_read_is_flagged() -> None:
    h = clean()
    h.reads[FINAL_RC].append((DATA, 0, 0, make_value("p", 2, 3)))
    report = check_txn(h)
    assert only(report.counts, "aborted_read"), report.table()
    assert f"{FINAL_RC} read p:2:3" in report.examples["aborted_read"][0]


def test_a_committed_transaction_partly_visible_is_torn_and_its_missing_record_lost() -> None:
    h = clean()
    missing = make_value("p", 3, 5)
    for reader in ("reader-committed", FINAL_RC):
        drop(h, reader, missing)
    report = check_txn(h)
    assert report.counts["torn"] == 1 and report.counts["lost"] == 1, report.table()
    assert only({k: n for k, n in report.counts.items() if k != "lost"}, "torn")
    assert "committed transaction p:3: 2 of 3 records visible to read_committed, missing p:3:5 (t-data/0)" \
        in report.examples["torn"][0]
    assert "p:3:5 of committed transaction p:3 (acked at t-data/0/2)" in report.examples["lost"][0]


def test_an_unknown_transaction_may_be_all_or_nothing_but_not_partly_visible() -> None:
    for visible, expect in ((2, "torn"), (3, None), (0, None)):
        h = clean()
        h.txns["p:3"].outcome = UNKNOWN
        for _, _, value in h.txns["p:3"].writes[visible:]:
            for reader in ("reader-committed", FINAL_RC):
                drop(h, reader, value)
        if visible == 0:  # invisible: nobody read the input record, so no consume-transform-produce output either
            remove_output(h, make_value("p", 3, 4))
            drop(h, "c", make_value("p", 3, 4))
        report = check_txn(h)
        assert only(report.counts, expect), (visible, report.table())
        assert report.unknown_visible == (1 if visible == 3 else 0)


def test_a_committed_transaction_missing_entirely_is_lost() -> None:
    h = clean()
    for _, _, value in h.txns["p:1"].writes:
        for reader in ("reader-committed", FINAL_RC, "c"):
            drop(h, reader, value)
    remove_output(h, make_value("p", 1, 0))  # no output made from it either
    report = check_txn(h)
    assert only(report.counts, "lost") and report.counts["lost"] == 2, report.table()


def test_a_record_read_committed_during_the_run_that_vanished_is_lost() -> None:
    h = clean()
    h.txns["p:1"].outcome = UNKNOWN  # its commit failed, yet a read_committed reader saw it: committed
    for value in [w[2] for w in h.txns["p:1"].writes]:
        drop(h, FINAL_RC, value)
    remove_output(h, make_value("p", 1, 0))
    report = check_txn(h)
    assert only(report.counts, "lost") and report.counts["lost"] == 2, report.table()
    assert "p:1:0 read by reader-committed (read_committed) during the run, absent from the final read_committed read" \
        in report.examples["lost"]


def test_an_acknowledged_record_gone_from_the_log_is_lost_whatever_its_transaction() -> None:
    h = clean()
    drop(h, FINAL_RU, make_value("p", 2, 2))  # of the aborted transaction: still must be in the log
    report = check_txn(h)
    assert only(report.counts, "lost"), report.table()
    assert "p:2:2 acked at t-input/0/2, absent from the final read_uncommitted read" in report.examples["lost"][0]


def test_a_committed_record_at_two_offsets_is_duplicated() -> None:
    h = clean()
    value = make_value("p", 3, 6)
    h.read(FINAL_RC, READ_COMMITTED, [(DATA, 0, 9, value)])
    h.read(FINAL_RU, READ_UNCOMMITTED, [(DATA, 0, 9, value)])
    report = check_txn(h)
    assert report.counts["duplicated"] == 1, report.table()
    assert "p:3:6 at t-data/0/3, t-data/0/9" in report.examples["duplicated"][0]
    assert only({k: n for k, n in report.counts.items() if k != "changed"}, "duplicated")


def test_one_offset_with_two_values_is_changed() -> None:
    h = clean()
    h.reads[FINAL_RU] = [(t, p, o, make_value("x", 0, 0) if (t, p, o) == (DATA, 0, 0) else v)
                         for t, p, o, v in h.reads[FINAL_RU]]
    report = check_txn(h)
    assert report.counts["changed"] >= 1 and report.counts["unexpected"] == 1, report.table()
    assert any("t-data/0/0 held" in e for e in report.examples["changed"])


def test_a_last_stable_offset_going_backwards_is_flagged() -> None:
    h = clean()
    h.lso_samples.append((10.0, DATA, 0, 2))  # it was 5 at 1.5 s
    report = check_txn(h)
    assert only(report.counts, "lso_backwards") and report.counts["lso_backwards"] == 1, report.table()
    assert "t-data/0: last stable offset 2 at 10.0s after 5 at" in report.examples["lso_backwards"][0]
    # equal samples are fine
    h = clean()
    h.lso_samples.append((10.0, DATA, 0, 5))
    assert check_txn(h).ok


def test_a_last_stable_offset_stuck_below_the_high_watermark_is_flagged() -> None:
    h = clean()
    h.final_offsets[(IN, 0)] = (2, 5)
    report = check_txn(h)
    assert only(report.counts, "lso_stuck"), report.table()
    assert "t-input/0: last stable offset 2 below the high watermark 5" in report.examples["lso_stuck"][0]


def test_a_committed_input_without_output_is_ctp_missing() -> None:
    h = clean()
    output = h.txns["c:1"].writes.pop()[2]  # the worker never made the output of p:3:4
    del h.acks[output]
    for reader in (FINAL_RC, FINAL_RU, "reader-committed", "reader-uncommitted"):
        drop(h, reader, output)
    report = check_txn(h)
    assert only(report.counts, "ctp_missing") and report.counts["ctp_missing"] == 1, report.table()
    assert "committed input p:3:4 at t-input/1/0 has no committed output" in report.examples["ctp_missing"][0]


def test_a_committed_input_output_twice_is_ctp_duplicated() -> None:
    h = clean()
    again = make_output("c", 2, 2, make_value("p", 1, 0))  # a second committed transaction made it again
    t = h.begin("c:2", "c", "ctp")
    t.outcome = COMMITTED
    t.writes.append((OUT, 0, again))
    h.ack(again, OUT, 0, 2)
    for reader, isolation in ((FINAL_RC, READ_COMMITTED), (FINAL_RU, READ_UNCOMMITTED)):
        h.read(reader, isolation, [(OUT, 0, 2, again)])
    report = check_txn(h)
    assert only(report.counts, "ctp_duplicated") and report.counts["ctp_duplicated"] == 1, report.table()
    assert "committed input p:1:0 at t-input/0/0 has 2 committed outputs" in report.examples["ctp_duplicated"][0]


def test_an_output_made_from_an_aborted_input_is_flagged() -> None:
    h = clean()
    bad = make_output("c", 2, 2, make_value("p", 2, 2))  # the worker read the aborted input and committed output
    t = h.begin("c:2", "c", "ctp")
    t.outcome = COMMITTED
    t.writes.append((OUT, 1, bad))
    h.ack(bad, OUT, 1, 2)
    for reader, isolation in ((FINAL_RC, READ_COMMITTED), (FINAL_RU, READ_UNCOMMITTED)):
        h.read(reader, isolation, [(OUT, 1, 2, bad)])
    report = check_txn(h)
    assert only(report.counts, "aborted_read"), report.table()
    assert "was made from p:2:2, which is not a committed input record" in report.examples["aborted_read"][0]


def test_a_value_nobody_wrote_is_unexpected() -> None:
    h = clean()
    h.read("reader-uncommitted", READ_UNCOMMITTED, [(DATA, 1, 7, b"garbage")])
    report = check_txn(h)
    assert only(report.counts, "unexpected"), report.table()


def test_the_history_survives_its_json_form(tmp_path: Path) -> None:
    h = clean()
    h.fail(make_value("p", 2, 3), "TransactionAbortedError: aborted")
    h.txns["p:2"].note = "aborted on purpose"
    path = tmp_path / "h.json"
    h.save(path)
    again = TxnHistory.load(path)
    assert again.to_json() == h.to_json()
    assert check_txn(again).to_json() == check_txn(h).to_json()
