"""moldau-verify --workload txn end to end, kept short: a launched single broker is killed (kill -9) and restarted
under transactional producers and consume-transform-produce workers, and the run checks clean on non-trivial
counts. The checker's verdicts on broken histories are unit-tested (tests/unit/broker/verify/test_txn_checker.py);
the 120 s three-broker run with kill, pause and partition faults is in docs/reliability.md.
"""

from __future__ import annotations

import pytest

from moldau.broker.verify.txn_checker import TXN_ANOMALIES

from .test_verify_tool import verify

pytestmark = pytest.mark.integration


@pytest.mark.slow
def test_transactions_through_a_broker_kill_check_clean() -> None:
    # One kill -9 six seconds in, after transactions committed and aborted, with transactions open: on restart
    # the coordinator must load them (it once read its unopened replica and forgot every transactional id).
    code, result, err = verify("--launch", "1", "--workload", "txn", "--duration", "10", "--faults", "kill",
                               "--fault-interval", "8", "--fault-duration", "2", "--rate", "200",
                               "--abort-ratio", "0.5", "--seed", "3", timeout=300)
    print(err[-2000:])
    assert result["anomalies"] == dict.fromkeys(TXN_ANOMALIES, 0), result.get("examples")
    assert code == 0 and result["ok"] and result["workload"] == "txn"
    assert result["faults"] == {"kill": 1} and "fault: kill -9 broker-1" in err
    # non-trivial: transactions committed and aborted on purpose by both producers, consume-transform-produce
    # commits, records read back at both isolation levels, the last stable offset sampled
    assert result["committed"] >= 2 and result["aborted"] >= 2 and result["ctp_committed"] >= 1
    assert result["records_committed"] >= 200
    assert result["final_read_committed"] >= result["records_committed"]
    assert result["final_read_uncommitted"] >= result["final_read_committed"]
    assert result["lso_samples"] > 0
