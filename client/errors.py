"""Exceptions raised by Moldau's client code (the connection layer and everything built on it).

Every exception here derives from :class:`ClientError`. Connection problems also derive from the built-in
``ConnectionError`` (so ``except ConnectionError`` and ``except OSError`` catch them), and request timeouts from
the built-in ``TimeoutError``.
"""

from __future__ import annotations

from moldau.protocol.errors import ErrorCode


class ClientError(Exception):
    """Base class of every error raised by the client package."""


class KafkaError(ClientError):
    """A broker answered with a non-zero error code."""

    def __init__(self, code: ErrorCode | int, message: str | None = None) -> None:
        self.code = ErrorCode.for_code(int(code))
        self.raw_code = int(code)  # kept as sent, even when we do not know the code
        self.detail = message
        text = f"{self.code.name} ({self.raw_code}): {message or self.code.message}"
        super().__init__(text)

    @property
    def retriable(self) -> bool:
        """True when the same request may succeed if sent again (Kafka's RetriableException set)."""
        return self.code.retriable


def raise_for_error(code: int, message: str | None = None) -> None:
    """Raises :class:`KafkaError` unless ``code`` is 0 (NONE)."""
    if code != ErrorCode.NONE:
        raise KafkaError(code, message)


class TransactionError(KafkaError):
    """A transactional producer's operation failed. ``fatal``: the producer cannot continue (it was fenced by a
    newer one with the same ``transactional.id``, or is not authorized): close it. Otherwise
    ``txn_requires_abort`` is True: call ``abort_transaction()`` and start again (Kafka's abortable errors)."""

    def __init__(self, code: ErrorCode | int, message: str | None = None, *, fatal: bool) -> None:
        super().__init__(code, message)
        self.fatal = fatal

    @property
    def txn_requires_abort(self) -> bool:
        return not self.fatal


class TransactionAbortedError(ClientError):
    """A record of a transaction that ``abort_transaction()`` aborted before it was sent (Kafka's
    TransactionAbortedException)."""


class UnsupportedVersionError(ClientError):
    """No version of the API is supported by both this client and the peer (or the one asked for is not)."""


class RequestTimeoutError(ClientError, TimeoutError):
    """No response arrived within the request timeout. The connection stays usable."""


class CorruptResponseError(ClientError):
    """A response frame arrived but its body did not decode as the expected API version."""


class KafkaConnectionError(ClientError, ConnectionError):
    """Base class of connection-level failures: every request pending on the connection fails with one."""


class ConnectFailedError(KafkaConnectionError):
    """The TCP connection or the ApiVersions handshake did not succeed (refused, unreachable, timed out)."""


class ConnectionLostError(KafkaConnectionError):
    """The peer closed or reset the connection, or a write failed."""


class NotConnectedError(KafkaConnectionError):
    """A request was sent before ``connect()`` finished or after the connection closed."""


class ProtocolViolationError(KafkaConnectionError):
    """The peer broke the framing rules (bad size, unknown or out-of-order correlation id); we closed the link."""


class ConfigError(ClientError, ValueError):
    """A client setting is unknown or has an invalid value; ``key`` names it (Kafka's spelling)."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        super().__init__(f"{key}: {message}")


class NoBrokersAvailableError(KafkaConnectionError):
    """None of the bootstrap servers (or known brokers) accepted a connection."""


class KafkaTimeoutError(KafkaError, TimeoutError):
    """An operation did not finish within its bound (Kafka's TimeoutException), e.g. ``send()`` waiting longer
    than ``max.block.ms`` for room in a full buffer. A ``KafkaError`` with code REQUEST_TIMED_OUT."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.REQUEST_TIMED_OUT, message)


class BlockingCallOnLoopError(ClientError, RuntimeError):
    """A blocking call (``flush()``, ``poll()``, an admin request, ...) was made on the client's event-loop thread,
    i.e. from a delivery callback or a rebalance listener. It waits for work only that thread can do, so it would
    deadlock; it raises this instead."""
