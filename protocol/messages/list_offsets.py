"""ListOffsets (key 2): v0-v8, flexible from v6.

v0 answers with a list of offsets (``old_style_offsets``) instead of one timestamp/offset pair; v1 onwards return a
single pair. v7 adds no fields: it lets a client ask for the offset of the largest timestamp (-3); v8 neither: it
lets a client ask for the local log start offset of a tiered partition (-4, earliest-local, KIP-405/KIP-1005).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.schema import Api, F

if TYPE_CHECKING:  # the message shapes are for mypy only
    from moldau.protocol.typed import ListOffsetsRequest, ListOffsetsResponse

LIST_OFFSETS: Api[ListOffsetsRequest, ListOffsetsResponse] = Api(
    2, "ListOffsets", versions=(0, 8), flexible=6,
    request=[
        F("replica_id", "int32"),
        F("isolation_level", "int8", "2+"),
        F("topics", [
            F("name", "string"),
            F("partitions", [
                F("partition_index", "int32"),
                F("current_leader_epoch", "int32", "4+", default=-1),
                F("timestamp", "int64"),
                F("max_num_offsets", "int32", "0", default=1),
            ]),
        ]),
    ],
    response=[
        F("throttle_time_ms", "int32", "2+"),
        F("topics", [
            F("name", "string"),
            F("partitions", [
                F("partition_index", "int32"),
                F("error_code", "int16"),
                F("old_style_offsets", "[]int64", "0"),
                F("timestamp", "int64", "1+", default=-1),
                F("offset", "int64", "1+", default=-1),
                F("leader_epoch", "int32", "4+", default=-1),
            ]),
        ]),
    ],
)
