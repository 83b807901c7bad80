"""The client loop thread behind the blocking API (client/sync.py, client/sync_admin.py): one daemon thread per
process runs an asyncio loop; ``run()`` hands it a coroutine and blocks for the result, refusing on that thread
itself (a delivery callback or rebalance listener), where waiting would deadlock.

The loop is uvloop's when uvloop is installed (a dependency of the package, as for the broker), else asyncio's;
the environment variable ``MOLDAU_CLIENT_LOOP=asyncio`` (read when the loop starts) chooses asyncio's. uvloop's
transports keep a large written request as it is until the socket has taken it; asyncio's selector transport
(Python 3.11) copies what a partial send left into its own buffer, twice, and shifts that buffer after every later
send: 16-20 ms of CPU for each 8 MB Produce request against ~2 ms with uvloop (issue #21)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from moldau.errors import BlockingCallOnLoopError

T = TypeVar("T")
P = ParamSpec("P")

LOOP_ENV = "MOLDAU_CLIENT_LOOP"
_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_loop_thread: threading.Thread | None = None


def new_client_loop() -> asyncio.AbstractEventLoop:
    """A new loop of the kind ``MOLDAU_CLIENT_LOOP`` names: ``uvloop`` (the default; asyncio's loop if uvloop is
    not installed) or ``asyncio``. Any other value raises ``ValueError``."""
    kind = os.environ.get(LOOP_ENV, "uvloop").strip().lower() or "uvloop"
    if kind not in ("uvloop", "asyncio"):
        raise ValueError(f"{LOOP_ENV}={os.environ[LOOP_ENV]!r}: expected 'uvloop' or 'asyncio'")
    if kind == "uvloop":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def background_loop() -> asyncio.AbstractEventLoop:
    """The process-wide client loop (``new_client_loop()``), started on first use."""
    global _loop, _loop_thread
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = new_client_loop()
            thread = threading.Thread(target=loop.run_forever, name="moldau-client-loop", daemon=True)
            thread.start()
            _loop, _loop_thread = loop, thread
        return _loop


def on_loop_thread() -> bool:
    """True on the client loop's thread (inside a delivery callback or a rebalance listener)."""
    return _loop_thread is not None and threading.current_thread() is _loop_thread


def refuse_on_loop(what: str) -> None:
    if on_loop_thread():
        raise BlockingCallOnLoopError(
            f"{what} blocks until the client's event loop has done the work, and was called on that loop's own "
            "thread (from a delivery callback or a rebalance listener), where it would deadlock: call it from "
            "another thread, or use the asyncio API (moldau.aio) inside the loop")


def run(coro: Coroutine[Any, Any, T], timeout: float | None = None, what: str | None = None) -> T:
    """Runs ``coro`` on the client loop and blocks for its result (cancels it on timeout)."""
    try:
        refuse_on_loop(f"{what or getattr(coro, '__qualname__', 'a blocking call')}()")
    except BlockingCallOnLoopError:
        coro.close()  # never started: no "was never awaited" warning
        raise
    future = asyncio.run_coroutine_threadsafe(coro, background_loop())
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise TimeoutError(f"no result within {timeout}s") from None


def call(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Runs the plain (non-async) method ``fn`` of an async client on the client loop, blocking for its result:
    the async core is only ever touched from its own thread."""
    async def on_loop() -> T:
        return fn(*args, **kwargs)
    return run(on_loop(), what=getattr(fn, "__name__", "call"))
