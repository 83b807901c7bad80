"""Every command in a README.md or docs/*.md code block that runs a Moldau tool parses with that tool's own
argument parser (and its flag checks), so the docs cannot drift from the flags. Nothing connects: each tool's
parse step is called, or its body is replaced by a stub that stops right after parsing. A file the command names
(a properties file, a JSON plan) need not exist: only the command line is checked."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from moldau import consumer_groups
from moldau.broker import __main__ as server
from moldau.broker.security import scram_tool
from moldau.broker.verify import cli as verify
from moldau.tools import (
    acls,
    configs,
    console_consumer,
    console_producer,
    consumer_perf_test,
    delete_records,
    dump_log,
    leader_election,
    log_dirs,
    producer_perf_test,
    reassign_partitions,
    topics,
    transactions,
)
from moldau.tools.common import ToolError, UsageError

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TOOL_RE = re.compile(r"(?:^|/)(moldau-[a-z-]+)$")
SHELL_OPS = {"|", "||", "&&", ";", ">", ">>", "<", "2>", "&", "2>&1"}


class Parsed(Exception):
    """Raised by a stubbed tool body: the command line got past the parser."""


def _stop(*_args: Any, **_kwargs: Any) -> Any:
    raise Parsed


def _verify(argv: Sequence[str]) -> None:
    verify.validate(verify.parser().parse_args(list(argv)))


PARSERS: dict[str, Callable[[Sequence[str]], Any]] = {
    "moldau-topics": topics.parse_args,
    "moldau-console-producer": console_producer.parse_args,
    "moldau-console-consumer": console_consumer.parse_args,
    "moldau-producer-perf-test": producer_perf_test.parse_args,
    "moldau-consumer-perf-test": consumer_perf_test.parse_args,
    "moldau-dump-log": dump_log.parse_args,
    "moldau-configs": configs.parse_args,
    "moldau-leader-election": leader_election.parse_args,
    "moldau-delete-records": delete_records.parse_args,
    "moldau-log-dirs": log_dirs.parse_args,
    "moldau-reassign-partitions": reassign_partitions.parse_args,
    "moldau-acls": acls.parse_args,
    "moldau-transactions": transactions.parse_args,
    "moldau-verify": _verify,
    "moldau-consumer-groups": consumer_groups.main,  # body stubbed: consumer_groups._run
    "moldau-scram": scram_tool.main,  # body stubbed: scram_tool._run
    "moldau-server": server.main,  # body stubbed: BrokerConfig.from_sources
}


def _blocks(text: str) -> Iterator[str]:
    for match in re.finditer(r"^```[^\n]*\n(.*?)^```", text, re.S | re.M):
        yield match.group(1)


LAUNCHERS = {"docker-compose", "docker", "sudo", "time", "env", "timeout", "exec"}


def doc_commands() -> Iterator[tuple[str, str, list[str]]]:
    """(where, tool, argv) for every tool invocation in a code block: continuation lines joined, ``$VAR`` set in
    the block expanded, optional ``[...]`` parts left out; a synopsis (``a|b``, ``(x | y)``) and prose that
    names a tool are not commands."""
    for doc in DOCS:
        for block in _blocks(doc.read_text(encoding="utf-8")):
            variables: dict[str, str] = {}
            for line in block.replace("\\\n", " ").splitlines():
                line = re.sub(r"^\s*\$\s+", "", line)  # a shell prompt
                assignment = re.match(r"^\s*(?:export\s+)?([A-Za-z_]\w*)=(.*)$", line)
                if assignment:
                    # an unquoted $VAR splits into words, as the shell does
                    variables[assignment.group(1)] = " ".join(shlex.split(assignment.group(2), comments=True))
                    continue
                for name, value in variables.items():
                    line = re.sub(rf"\$\{{?{name}\b}}?", lambda _m, v=value: v, line)
                line = re.sub(r"\[[^\]]*\]", " ", line)  # [--optional part]
                try:
                    words = shlex.split(line, comments=True)
                except ValueError:
                    continue  # not shell (JSON, output)
                for i, word in enumerate(words):
                    match = TOOL_RE.search(word)
                    if not (match and match.group(1) in PARSERS):
                        continue
                    if i > 0 and words[0] not in LAUNCHERS:
                        break  # prose or a tree that names the tool
                    argv: list[str] = []
                    for w in words[i + 1:]:
                        if w in SHELL_OPS:
                            break
                        argv.append(w)
                    if any("|" in w or w.startswith("(") or w.endswith(")") for w in argv):
                        break  # a synopsis
                    yield f"{doc.relative_to(ROOT)}: {line.strip()}", match.group(1), argv
                    break


COMMANDS = list(doc_commands())


def test_the_docs_have_tool_commands() -> None:
    tools = {tool for _, tool, _ in COMMANDS}
    assert len(COMMANDS) >= 30 and {"moldau-topics", "moldau-acls", "moldau-configs"} <= tools, tools


@pytest.mark.parametrize("where, tool, argv", COMMANDS, ids=[f"{w[:70]}" for w, _, _ in COMMANDS])
def test_doc_command_parses(where: str, tool: str, argv: list[str], monkeypatch: pytest.MonkeyPatch,
                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(consumer_groups, "_run", _stop)
    monkeypatch.setattr(scram_tool, "_run", _stop)
    monkeypatch.setattr(server.BrokerConfig, "from_sources", _stop)
    try:
        PARSERS[tool](argv)
    except (Parsed, SystemExit) as exc:
        if isinstance(exc, SystemExit):
            pytest.fail(f"{where}\n-> exit {exc.code}: {capsys.readouterr().err.strip()}")
    except UsageError as exc:
        pytest.fail(f"{where}\n-> {exc}")
    except ToolError as exc:
        assert "cannot read" in str(exc), f"{where}\n-> {exc}"  # a file the example names; the flags parsed


def test_a_wrong_flag_would_be_caught() -> None:
    with pytest.raises(SystemExit):
        PARSERS["moldau-topics"](["--bootstrap-server", "h:1", "--list", "--partition-count", "3"])
