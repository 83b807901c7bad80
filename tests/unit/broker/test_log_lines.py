"""Broker log lines carry the broker id once: moldau-server's log format adds ``[broker N]`` to every line, so a
message must not tag itself again."""

from __future__ import annotations

import ast
from pathlib import Path

BROKER = Path(__file__).resolve().parents[3] / "broker"
LEVELS = {"debug", "info", "warning", "error", "exception", "critical", "log"}
# BrokerConfig warns while the config is being read, before setup_logging installs the tagged format.
BEFORE_LOGGING_SETUP = {"config.py"}


def self_tagged(source: str) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in LEVELS:
            texts = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if any(t.startswith("[broker") for t in texts):
                lines.append(node.lineno)
    return lines


def test_the_detector_finds_a_self_tagged_line() -> None:
    assert self_tagged('log.info("[broker %d] loaded %d groups", self.broker_id, n)\nlog.info("x")\n') == [1]


def test_no_broker_log_line_tags_itself() -> None:
    found = {str(p.relative_to(BROKER)): lines for p in sorted(BROKER.rglob("*.py"))
             if p.name not in BEFORE_LOGGING_SETUP or p.parent != BROKER
             if (lines := self_tagged(p.read_text()))}
    assert found == {}
