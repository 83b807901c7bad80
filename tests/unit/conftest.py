"""The unit tier starts no process (README: ``-m 'not integration'``). Every unit test not marked
``pytest.mark.integration`` runs its setup, body and teardown with process creation refused, so a test that
starts a broker, ZooKeeper or any other program fails here, naming itself, instead of quietly slowing the tier."""

from __future__ import annotations

import multiprocessing.process
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

UNIT = Path(__file__).resolve().parent


def _refuse(item: pytest.Item) -> Any:
    def refuse(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError(f"{item.nodeid} starts a process: mark it pytest.mark.integration "
                             "(or move it to tests/integration/)")
    return refuse


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    # pytest calls this hook of every conftest for every item: act on tests/unit only.
    if item.get_closest_marker("integration") is not None or UNIT not in item.path.resolve().parents:
        yield
        return
    with pytest.MonkeyPatch.context() as mp:
        # Popen covers subprocess.run and asyncio's subprocesses; BaseProcess.start covers multiprocessing.
        mp.setattr(subprocess.Popen, "_execute_child", _refuse(item))
        mp.setattr(multiprocessing.process.BaseProcess, "start", _refuse(item))
        yield
