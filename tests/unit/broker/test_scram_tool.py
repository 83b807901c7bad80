"""moldau-scram --log-dir before a standalone broker's first start: the log dir does not exist yet."""

from __future__ import annotations

from pathlib import Path

import pytest

from moldau.broker.security.scram_tool import main


def test_alter_creates_a_missing_log_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log_dir = tmp_path / "new" / "logs"
    assert main(["--log-dir", str(log_dir), "--alter", "--entity-name", "alice", "--add-config",
                 "SCRAM-SHA-256=[iterations=4096,password=secret]"]) == 0
    assert "Completed updating config for user alice." in capsys.readouterr().out
    assert main(["--log-dir", str(log_dir), "--describe"]) == 0
    assert "user-principal 'alice' are SCRAM-SHA-256=iterations=4096" in capsys.readouterr().out


def test_an_uncreatable_log_dir_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("")
    assert main(["--log-dir", str(tmp_path / "file" / "logs"), "--alter", "--entity-name", "alice",
                 "--add-config", "SCRAM-SHA-256=[password=secret]"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("moldau-scram: error: --log-dir: cannot create ") and err.count("\n") == 1
