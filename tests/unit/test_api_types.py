"""Types bind end to end: each API's ``Api[Request, Response]`` declaration types the broker's route table and the
client's ``send``, so a handler under the wrong API, another API's request, a misspelt field or a response field
that does not exist is a mypy error.

mypy runs with the project's own configuration (pyproject.toml, the build/typecheck tree scripts/test.sh builds)
on two small snippets: one deliberately wrong, one right. It runs in-process (the unit tier starts no process)
against the project's mypy cache, which scripts/test.sh's mypy step has just filled, so it checks only the
snippets (~1 s; a cold cache costs a full check of broker/ and client/ once, ~20-40 s on a loaded machine).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

WRONG = '''\
from moldau.broker.apis import _replicas, route
from moldau.broker.apis.fetch import handle_fetch
from moldau.connection import BrokerConnection
from moldau.protocol.messages.produce import PRODUCE
from moldau.protocol.typed import FetchRequest

FETCH_HANDLER_UNDER_PRODUCE = route(PRODUCE, _replicas, handle_fetch)


async def produce(conn: BrokerConnection, fetch: FetchRequest) -> int:
    await conn.send(PRODUCE, fetch)
    await conn.send(PRODUCE, {"acks": 1, "timeout_ms": 100, "topic_dta": []})
    response = await conn.send(PRODUCE, {"acks": 1, "timeout_ms": 100, "topic_data": []})
    return response["responses"][0]["high_watermark"]
'''

RIGHT = '''\
from moldau.broker.apis import _replicas, route
from moldau.broker.apis.fetch import handle_fetch
from moldau.broker.apis.produce import handle_produce
from moldau.connection import BrokerConnection
from moldau.protocol.messages.fetch import FETCH
from moldau.protocol.messages.produce import PRODUCE
from moldau.protocol.typed import ProduceRequest

ROUTES = [route(PRODUCE, _replicas, handle_produce), route(FETCH, _replicas, handle_fetch)]


async def produce(conn: BrokerConnection, body: ProduceRequest) -> int:
    await conn.send(PRODUCE, body, 9)
    response = await conn.send(PRODUCE, {"acks": 1, "timeout_ms": 100, "topic_data": []})
    return response["responses"][0]["partition_responses"][0]["base_offset"]
'''


def _typecheck_tree() -> None:
    """scripts/_setup.sh's moldau_typecheck_tree (the installed package's shape as symlinks), made only where
    missing: scripts/test.sh builds it before mypy runs, a plain pytest run may not have."""
    tree = REPO / "build" / "typecheck" / "moldau"
    tree.mkdir(parents=True, exist_ok=True)
    entries = [(p.name, f"../../../client/{p.name}") for p in (REPO / "client").iterdir() if p.name != "__pycache__"]
    entries += [(name, f"../../../{name}") for name in ("broker", "protocol", "storage", "testing")]
    for name, target in entries:
        link = tree / name
        if not link.is_symlink() and not link.exists():
            link.symlink_to(target)


@pytest.fixture(scope="module")
def mypy_errors(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[tuple[int, str]]]:
    from mypy import api as mypy_api

    _typecheck_tree()
    where = tmp_path_factory.mktemp("api_types")
    (where / "wrong_api_use.py").write_text(WRONG, encoding="utf-8")
    (where / "right_api_use.py").write_text(RIGHT, encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(REPO)  # pyproject's mypy_path is relative to the repository
        out, err, status = mypy_api.run([str(where / "wrong_api_use.py"), str(where / "right_api_use.py"),
                                         "--config-file", str(REPO / "pyproject.toml"), "--no-error-summary",
                                         "--show-error-codes"])
    assert status in (0, 1), out + err  # 2: mypy itself failed (bad config, crash)
    errors: dict[str, list[tuple[int, str]]] = {"wrong_api_use.py": [], "right_api_use.py": []}
    for line in out.splitlines():
        m = re.match(r".*?(\w+\.py):(\d+): error: (.*)", line)
        assert m is not None or ": note:" in line, line
        if m is not None:
            assert m.group(1) in errors, line  # nothing else in the project may fail to type check
            errors[m.group(1)].append((int(m.group(2)), m.group(3)))
    return errors


@pytest.mark.timeout(300)
def test_a_handler_or_request_of_another_api_fails_mypy(mypy_errors: dict[str, list[tuple[int, str]]]) -> None:
    wrong: dict[int, str] = {}
    for line, message in mypy_errors["wrong_api_use.py"]:
        wrong[line] = wrong.get(line, "") + message + "\n"
    # The Fetch handler registered under Produce: its body and answer are Fetch's, the route wants Produce's.
    assert 'Argument 3 to "route" has incompatible type' in wrong[7], wrong
    assert "FetchRequest" in wrong[7] and "ProduceRequest" in wrong[7], wrong
    # A FetchRequest sent as a Produce request.
    assert 'Argument 2 to "send" of "BrokerConnection" has incompatible type "FetchRequest"; expected ' \
           '"ProduceRequest"' in wrong[11], wrong
    # A misspelt field of a literal body is caught at the call (the body's type comes from the Api).
    assert 'Extra key "topic_dta" for TypedDict "ProduceRequest"' in wrong[12], wrong
    # Reading a field the response does not have.
    assert '"high_watermark"' in wrong[14] and "typeddict" in wrong[14].lower(), wrong
    assert sorted(wrong) == [7, 11, 12, 14], wrong


@pytest.mark.timeout(300)
def test_the_right_handler_and_request_pass_mypy(mypy_errors: dict[str, list[tuple[int, str]]]) -> None:
    assert mypy_errors["right_api_use.py"] == []
