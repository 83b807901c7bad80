"""moldau-transactions: flags and Kafka's table layout (the verbs run against a broker in
tests/integration/test_moldau_transactions.py)."""

from __future__ import annotations

import pytest

from moldau.tools.common import UsageError
from moldau.tools.transactions import LIST_HEADERS, main, parse_args, table

BS = ["--bootstrap-server", "127.0.0.1:9092"]


def test_verbs_and_their_flags() -> None:
    assert parse_args(BS + ["list"]).verb == "list"
    args = parse_args(BS + ["describe", "--transactional-id", "app"])
    assert (args.verb, args.transactional_id) == ("describe", "app")
    args = parse_args(BS + ["describe-producers", "--topic", "t", "--partition", "2", "--broker-id", "3"])
    assert (args.topic, args.partition, args.broker_id) == ("t", 2, 3)
    with pytest.raises(UsageError, match="command"):
        parse_args(BS)


@pytest.mark.parametrize("argv", [BS + ["describe"], BS + ["describe-producers", "--topic", "t"],
                                  BS + ["describe-producers", "--topic", "t", "--partition", "x"]])
def test_missing_or_bad_flags_exit_2_with_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("moldau-transactions "), err
    assert main(BS) == 2  # no command


def test_table_pads_columns_to_the_widest_cell() -> None:
    out = table(LIST_HEADERS, [["app-1", "1", "4000", "Ongoing"], ["a-much-longer-id", "2", "7", "Empty"]])
    assert out.splitlines() == [
        "TransactionalId \tCoordinator\tProducerId\tTransactionState",
        "app-1           \t1          \t4000      \tOngoing",
        "a-much-longer-id\t2          \t7         \tEmpty",
    ]
