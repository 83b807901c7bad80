"""CreateTopics (key 19): v0-v7, flexible from v5.

From v5 the response echoes the resulting partition count, replication factor and configs; v7 adds topic IDs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.schema import Api, F

if TYPE_CHECKING:  # the message shapes are for mypy only
    from moldau.protocol.typed import CreateTopicsRequest, CreateTopicsResponse

CREATE_TOPICS: Api[CreateTopicsRequest, CreateTopicsResponse] = Api(
    19, "CreateTopics", versions=(0, 7), flexible=5,
    request=[
        F("topics", [
            F("name", "string"),
            F("num_partitions", "int32"),
            F("replication_factor", "int16"),
            F("assignments", [
                F("partition_index", "int32"),
                F("broker_ids", "[]int32"),
            ]),
            F("configs", [
                F("name", "string"),
                F("value", "string", nullable="0+"),
            ]),
        ]),
        F("timeout_ms", "int32", default=60000),
        F("validate_only", "bool", "1+"),
    ],
    response=[
        F("throttle_time_ms", "int32", "2+"),
        F("topics", [
            F("name", "string"),
            F("topic_id", "uuid", "7+"),
            F("error_code", "int16"),
            F("error_message", "string", "1+", nullable="0+"),
            F("topic_config_error_code", "int16", "5+", tag=0, tagged="5+"),
            F("num_partitions", "int32", "5+", default=-1),
            F("replication_factor", "int16", "5+", default=-1),
            F("configs", [
                F("name", "string", "5+"),
                F("value", "string", "5+", nullable="5+"),
                F("read_only", "bool", "5+"),
                F("config_source", "int8", "5+", default=-1),
                F("is_sensitive", "bool", "5+"),
            ], "5+", nullable="5+"),
        ]),
    ],
)
