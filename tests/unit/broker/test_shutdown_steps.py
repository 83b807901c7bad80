"""Shutdown steps under a deadline (broker/server.py `_bounded`) and the controller's broker senders stopping
(broker/controller/channel.py `BrokerSender.stop`), with the faults a red CI run pointed at: a step that swallows
its own cancellation (it used to end "in time" with no warning after taking the whole grace) and a background task
that does not end at the first cancel (Python 3.11's wait_for loses a cancel that arrives as the awaited operation
completes: the task goes back to waiting on its queue).

The stand-in tasks below play those faults; the code under test (`_bounded`, `BrokerSender`) is the real one, and
the last test drives a real sender into that lost cancel against an in-process peer. Every wait is bounded; a
stuck task is released at the end of its test.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import AsyncIterator

import pytest

from moldau.broker.controller.channel import BrokerSender, QueuedRequest
from moldau.broker.controller.zk_data import BrokerInfo
from moldau.broker.server import _bounded
from moldau.connection import api_for
from moldau.protocol.api import ApiKey
from tests.unit.client.test_connection_faults import Peer, metadata_request, metadata_response
from tests.unit.stubborn_tasks import loses_one_cancel, release_all, stubborn


@pytest.fixture
async def release() -> AsyncIterator[asyncio.Event]:
    event = asyncio.Event()
    yield event
    await release_all(event)


def _closed_port() -> int:
    with socket.socket() as s:  # bound, never listening: connects are refused
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _sender() -> BrokerSender:
    return BrokerSender(BrokerInfo(7, "127.0.0.1", _closed_port()), "controller-1", timeout_s=1.0)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


async def test_a_step_that_swallows_its_cancellation_is_reported_with_its_duration(
        caplog: pytest.LogCaptureFixture) -> None:
    async def swallows() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            pass  # returns as if it had finished

    caplog.set_level(logging.INFO, "moldau.server")
    t0 = time.monotonic()
    await _bounded("replica fetchers", swallows(), t0 + 0.2)
    took = time.monotonic() - t0
    assert took < 1.5
    found = [w for w in _warnings(caplog) if "replica fetchers" in w and "did not finish in time" in w]
    assert found, _warnings(caplog)
    assert " s" in found[0] and "swallowed its cancellation" in found[0]


async def test_a_step_that_ignores_its_cancellation_is_left_behind_by_the_deadline(
        caplog: pytest.LogCaptureFixture, release: asyncio.Event) -> None:
    caplog.set_level(logging.INFO, "moldau.server")
    asyncio.get_running_loop().call_later(3.0, release.set)  # bounds the test if the step holds shutdown up
    t0 = time.monotonic()
    await _bounded("client connections", stubborn(release), t0 + 0.2)
    took = time.monotonic() - t0
    assert not release.is_set() and took < 1.5, took
    assert any("client connections" in w and "ignored its cancellation" in w for w in _warnings(caplog)), \
        _warnings(caplog)


async def test_a_step_that_fails_or_is_slow_is_named(caplog: pytest.LogCaptureFixture) -> None:
    async def fails() -> None:
        raise OSError("disk gone")

    async def slow_but_in_time() -> None:
        await asyncio.sleep(0.6)

    caplog.set_level(logging.INFO, "moldau.server")
    await _bounded("remote log manager", fails(), time.monotonic() + 5)
    await _bounded("pending ISR writes", slow_but_in_time(), time.monotonic() + 5)
    messages = [r.getMessage() for r in caplog.records]
    assert any("remote log manager failed" in m for m in messages), messages
    assert any("pending ISR writes took" in m for m in messages), messages
    assert not any("did not finish" in m for m in messages), messages


async def test_the_caller_of_bounded_can_still_be_cancelled(release: asyncio.Event) -> None:
    outer = asyncio.create_task(_bounded("request handlers", stubborn(release), time.monotonic() + 30))
    await asyncio.sleep(0.05)
    outer.cancel()
    done, _ = await asyncio.wait({outer}, timeout=2.0)
    assert done and outer.cancelled()


async def test_a_sender_task_that_lost_a_cancel_still_stops_promptly() -> None:
    sender = _sender()
    sender.task = asyncio.create_task(loses_one_cancel())
    await asyncio.sleep(0)  # the task is inside its first sleep (see below)
    t0 = time.monotonic()
    await asyncio.wait_for(sender.stop(), 3.0)
    took = time.monotonic() - t0
    assert took < 2.0, took  # it used to wait for the caller's deadline (3 s here, the whole grace in a broker)


async def test_stopping_a_sender_never_swallows_the_callers_cancellation(release: asyncio.Event) -> None:
    sender = _sender()
    sender.task = asyncio.create_task(stubborn(release))
    await asyncio.sleep(0)  # the task is inside its wait (a task cancelled before its first step just ends)
    asyncio.get_running_loop().call_later(3.0, release.set)  # bounds the test if stop() holds on
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):  # it used to return normally once the task ended, past the deadline
        await asyncio.wait_for(sender.stop(), 0.2)
    assert time.monotonic() - t0 < 1.5


async def test_a_stuck_sender_is_left_behind_with_a_warning(caplog: pytest.LogCaptureFixture,
                                                            release: asyncio.Event) -> None:
    caplog.set_level(logging.WARNING, "moldau.controller.channel")
    sender = _sender()
    sender.task = asyncio.create_task(stubborn(release))
    await asyncio.sleep(0)  # the task is inside its wait (a task cancelled before its first step just ends)
    asyncio.get_running_loop().call_later(5.0, release.set)
    t0 = time.monotonic()
    await sender.stop()
    assert not release.is_set() and time.monotonic() - t0 < 3.0
    assert any("broker 7" in w and "did not stop" in w for w in _warnings(caplog)), _warnings(caplog)


async def test_a_sender_retrying_a_refused_broker_stops_at_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "moldau.controller.channel")
    sender = _sender()
    sender.start()
    sender.queue.put_nowait(QueuedRequest(api_for(ApiKey.UPDATE_METADATA), {}))
    deadline = time.monotonic() + 5.0
    while not any("failed (attempt 1" in w for w in _warnings(caplog)):  # refused: now in its retry loop
        assert time.monotonic() < deadline, "the sender never tried"
        await asyncio.sleep(0.01)
    task = sender.task
    assert task is not None
    t0 = time.monotonic()
    await asyncio.wait_for(sender.stop(), 3.0)
    assert time.monotonic() - t0 < 2.0 and task.done()


async def test_a_sender_cancelled_as_its_answer_arrives_stops() -> None:
    """The lost cancel itself: the sender task is cancelled in the loop iteration its response completes in (a
    callback on the response future, added before the peer answers). With wait_for around the send, Python 3.11
    returned the response, the sender went back to its queue and stop() waited for its caller's deadline."""
    answer, done = asyncio.Event(), asyncio.Event()

    async def peer_script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = Peer(reader, writer)
        try:
            await peer.handshake()
            req = await peer.read_request()
            await answer.wait()
            peer.respond(req, metadata_response("t"))
            await done.wait()
        finally:
            writer.close()

    server = await asyncio.start_server(peer_script, "127.0.0.1", 0)
    try:
        sender = BrokerSender(BrokerInfo(7, "127.0.0.1", int(server.sockets[0].getsockname()[1])), "controller-1",
                              timeout_s=5.0)
        sender.start()
        task = sender.task
        assert task is not None
        sender.queue.put_nowait(QueuedRequest(api_for(ApiKey.METADATA), metadata_request("t")))
        deadline = time.monotonic() + 5.0
        while sender._conn is None or not sender._conn._pending:  # the request is out, its answer awaited
            assert time.monotonic() < deadline and not task.done(), "the sender never sent its request"
            await asyncio.sleep(0.01)
        (pending,) = sender._conn._pending.values()
        pending.future.add_done_callback(lambda _: task.cancel())
        answer.set()
        ended, _ = await asyncio.wait({task}, timeout=3.0)
        assert ended and task.cancelled()
        await sender.stop()
    finally:
        done.set()
        server.close()
        await server.wait_closed()
