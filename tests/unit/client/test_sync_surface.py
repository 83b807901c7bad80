"""The blocking Consumer and AdminClient spell out every public method of the asyncio ones (no __getattr__
forwarding), with the same parameters, so IDEs and mypy see them and nothing is silently missing."""

from __future__ import annotations

import inspect

import pytest

from moldau import admin, consumer, sync

# asyncio-only: the constructor starts the blocking clients; poll() and iteration stand for getone()
ASYNC_ONLY = {"start", "getone"}


@pytest.mark.parametrize(("blocking", "asynchronous"), [(sync.Consumer, consumer.Consumer),
                                                        (sync.AdminClient, admin.AdminClient)])
def test_every_async_method_has_a_typed_blocking_twin(blocking: type, asynchronous: type) -> None:
    assert "__getattr__" not in vars(blocking)
    for name, method in inspect.getmembers(asynchronous, callable):
        if name.startswith("_") or name in ASYNC_ONLY:
            continue
        twin = getattr(blocking, name, None)
        assert twin is not None, f"{blocking.__name__}.{name} is missing"
        want = [(p.name, p.kind, p.default) for p in inspect.signature(method).parameters.values()]
        got = [(p.name, p.kind, p.default) for p in inspect.signature(twin).parameters.values()]
        assert got == want, f"{blocking.__name__}.{name}"
        assert inspect.signature(twin).return_annotation != inspect.Signature.empty, name
        assert not inspect.iscoroutinefunction(twin), name
