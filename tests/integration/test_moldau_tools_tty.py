"""The seeds' ch 2.4 walkthrough typed into a real terminal (tmux send-keys / capture-pane): the console producer
prompts with '>' and Ctrl-C ends it cleanly; the console consumer prints ``key-value`` lines."""

from __future__ import annotations

import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from .harness import BrokerProcess, wait_until

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux for a real terminal")]
BIN = Path(sys.executable).parent


@pytest.fixture
def tmux() -> Iterator[list[str]]:
    base = ["tmux", "-L", f"moldau-{uuid.uuid4().hex[:8]}", "-f", "/dev/null"]
    subprocess.run([*base, "new-session", "-d", "-s", "w", "-x", "200", "-y", "50"], check=True)
    try:
        yield base
    finally:
        subprocess.run([*base, "kill-server"], check=False)


def pane(base: list[str]) -> str:
    return subprocess.run([*base, "capture-pane", "-p", "-t", "w"], capture_output=True, text=True).stdout


def keys(base: list[str], *items: str) -> None:
    subprocess.run([*base, "send-keys", "-t", "w", *items], check=True)


def test_walkthrough_in_a_terminal(broker: BrokerProcess, topic: str, tmux: list[str]) -> None:
    bs = f"--bootstrap-server {broker.bootstrap}"
    created = subprocess.run([str(BIN / "moldau-topics"), "--bootstrap-server", broker.bootstrap, "--create",
                              "--topic", topic], capture_output=True, text=True, timeout=60)
    assert created.returncode == 0, created.stderr
    keys(tmux, f"{BIN}/moldau-console-producer {bs} --topic {topic} --property parse.key=true "
               f"--property key.separator=: ; echo EXIT=$?", "Enter")
    wait_until(lambda: pane(tmux).rstrip().endswith(">"), 30, "the producer's prompt")
    for line in ("key:my first message", "key:my second message", "key:my third message"):
        keys(tmux, line, "Enter")
    wait_until(lambda: pane(tmux).count(">") >= 4, 30, "a prompt after every line")
    keys(tmux, "C-c")
    wait_until(lambda: "EXIT=" in pane(tmux), 30, "the producer to exit on Ctrl-C")
    screen = pane(tmux)
    assert "Traceback" not in screen, screen
    keys(tmux, "clear", "Enter")
    wait_until(lambda: "EXIT=" not in pane(tmux), 10, "a clear screen")
    keys(tmux, f"{BIN}/moldau-console-consumer {bs} --topic {topic} --from-beginning --property print.key=true "
               "--property key.separator=- --max-messages 3", "Enter")
    wait_until(lambda: "Processed a total of 3 messages" in pane(tmux), 60, "the consumer's summary")
    screen = pane(tmux)
    for line in ("key-my first message", "key-my second message", "key-my third message"):
        assert line in screen.splitlines(), screen
