import inspect
from typing import Any

import kafka.errors as kafka_errors
import pytest

from moldau.protocol.errors import ErrorCode

# Kafka's current names where kafka-python still uses an older one.
_KAFKA_PYTHON_ALIASES = {
    "UNKNOWN": "UNKNOWN_SERVER_ERROR",
    "NO_ERROR": "NONE",
    "NOT_LEADER_FOR_PARTITION": "NOT_LEADER_OR_FOLLOWER",
    "MESSAGE_SIZE_TOO_LARGE": "MESSAGE_TOO_LARGE",
    "INVALID_TOPIC": "INVALID_TOPIC_EXCEPTION",
    "INVALID_REPLICATION_ASSIGNMENT": "INVALID_REPLICA_ASSIGNMENT",
}


def _kafka_python_table() -> dict[int, tuple[str, bool]]:
    table: dict[int, tuple[str, bool]] = {}
    for obj in vars(kafka_errors).values():
        if (
            inspect.isclass(obj)
            and issubclass(obj, kafka_errors.BrokerResponseError)
            and isinstance(getattr(obj, "errno", None), int)
        ):
            entry: Any = obj  # kafka-python's error classes are untyped
            table[entry.errno] = (entry.message, entry.retriable)
    return table


def test_well_known_numbers() -> None:
    # From the protocol guide's error table.
    assert ErrorCode.NONE == 0
    assert ErrorCode.UNKNOWN_SERVER_ERROR == -1
    assert ErrorCode.OFFSET_OUT_OF_RANGE == 1
    assert ErrorCode.CORRUPT_MESSAGE == 2
    assert ErrorCode.UNKNOWN_TOPIC_OR_PARTITION == 3
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER == 6
    assert ErrorCode.MESSAGE_TOO_LARGE == 10
    assert ErrorCode.STALE_CONTROLLER_EPOCH == 11
    assert ErrorCode.NOT_COORDINATOR == 16
    assert ErrorCode.INVALID_TOPIC_EXCEPTION == 17
    assert ErrorCode.NOT_ENOUGH_REPLICAS == 19
    assert ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND == 20
    assert ErrorCode.INVALID_REQUIRED_ACKS == 21
    assert ErrorCode.REBALANCE_IN_PROGRESS == 27
    assert ErrorCode.UNSUPPORTED_VERSION == 35
    assert ErrorCode.TOPIC_ALREADY_EXISTS == 36
    assert ErrorCode.INVALID_PARTITIONS == 37
    assert ErrorCode.INVALID_REPLICATION_FACTOR == 38
    assert ErrorCode.INVALID_CONFIG == 40
    assert ErrorCode.NOT_CONTROLLER == 41
    assert ErrorCode.INVALID_REQUEST == 42
    assert ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT == 43
    assert ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER == 45
    assert ErrorCode.DUPLICATE_SEQUENCE_NUMBER == 46
    assert ErrorCode.INVALID_PRODUCER_EPOCH == 47
    assert ErrorCode.UNKNOWN_PRODUCER_ID == 59
    assert ErrorCode.FENCED_LEADER_EPOCH == 74
    assert ErrorCode.TRANSACTION_ABORTABLE == 120


@pytest.mark.parametrize(
    ("code", "retriable"),
    [
        (ErrorCode.NONE, False),
        (ErrorCode.UNKNOWN_SERVER_ERROR, False),
        (ErrorCode.OFFSET_OUT_OF_RANGE, False),
        (ErrorCode.CORRUPT_MESSAGE, True),
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, True),
        (ErrorCode.LEADER_NOT_AVAILABLE, True),
        (ErrorCode.NOT_LEADER_OR_FOLLOWER, True),
        (ErrorCode.REQUEST_TIMED_OUT, True),
        (ErrorCode.BROKER_NOT_AVAILABLE, False),
        (ErrorCode.MESSAGE_TOO_LARGE, False),
        (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, True),
        (ErrorCode.NOT_ENOUGH_REPLICAS, True),
        (ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, True),
        (ErrorCode.TOPIC_ALREADY_EXISTS, False),
        (ErrorCode.NOT_CONTROLLER, True),
        (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, False),
        (ErrorCode.KAFKA_STORAGE_ERROR, True),
        (ErrorCode.FENCED_LEADER_EPOCH, True),
        (ErrorCode.REBALANCE_IN_PROGRESS, False),
    ],
)
def test_retriable_flags(code: ErrorCode, retriable: bool) -> None:
    assert code.retriable is retriable


def test_for_code() -> None:
    assert ErrorCode.for_code(3) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert ErrorCode.for_code(0) is ErrorCode.NONE
    assert ErrorCode.for_code(-1) is ErrorCode.UNKNOWN_SERVER_ERROR
    assert ErrorCode.for_code(9999) is ErrorCode.UNKNOWN_SERVER_ERROR
    assert ErrorCode.for_code(-42) is ErrorCode.UNKNOWN_SERVER_ERROR
    with pytest.raises(ValueError):
        ErrorCode(9999)


def test_codes_are_contiguous_and_described() -> None:
    values = sorted(e.value for e in ErrorCode)
    assert values == list(range(-1, values[-1] + 1))
    assert values[-1] >= 120
    for e in ErrorCode:
        assert e.message and e.message[0].isupper(), e


def test_matches_kafka_python_table() -> None:
    """Numbers, names and retriable flags agree with kafka-python's independent table."""
    table = _kafka_python_table()
    assert len(table) > 100
    for errno, (name, retriable) in table.items():
        ours = ErrorCode.for_code(errno)
        assert ours.value == errno, (errno, name)
        assert ours.name == _KAFKA_PYTHON_ALIASES.get(name, name)
        if ours is ErrorCode.CORRUPT_MESSAGE:
            # Kafka's CorruptRecordException is a RetriableException; kafka-python marks it otherwise.
            continue
        assert ours.retriable is retriable, ours
