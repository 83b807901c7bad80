"""Produce (key 0): v0-v9, flexible from v9.

v0-v2 carry legacy message sets, which the broker refuses (UNSUPPORTED_FOR_MESSAGE_FORMAT); they are advertised
only because clients probe for them (see docs/protocol.md). The records field is never parsed here: it decodes to a
memoryview over the request and is validated batch by batch by the log.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.schema import Api, F

if TYPE_CHECKING:  # the message shapes are for mypy only
    from moldau.protocol.typed import ProduceRequest, ProduceResponse

PRODUCE: Api[ProduceRequest, ProduceResponse] = Api(
    0, "Produce", versions=(0, 9), flexible=9,
    request=[
        F("transactional_id", "string", "3+", nullable="3+", default=None),
        F("acks", "int16"),
        F("timeout_ms", "int32"),
        F("topic_data", [
            F("name", "string"),
            F("partition_data", [
                F("index", "int32"),
                F("records", "records", nullable="0+"),
            ]),
        ]),
    ],
    response=[
        F("responses", [
            F("name", "string"),
            F("partition_responses", [
                F("index", "int32"),
                F("error_code", "int16"),
                F("base_offset", "int64"),
                F("log_append_time_ms", "int64", "2+", default=-1),
                F("log_start_offset", "int64", "5+", default=-1),
                F("record_errors", [
                    F("batch_index", "int32", "8+"),
                    F("batch_index_error_message", "string", "8+", nullable="8+", default=None),
                ], "8+"),
                F("error_message", "string", "8+", nullable="8+", default=None),
            ]),
        ]),
        F("throttle_time_ms", "int32", "1+"),
    ],
)
