"""Fetch (key 1): v4-v12, flexible from v12.

v4 is the first version whose responses carry the v2 record-batch format and the last stable offset; v13 replaces
topic names with topic IDs, which we do not assign yet. Records decode to a memoryview; on encode the records value
may be a file region that the network layer sends with sendfile.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.schema import Api, F, Struct

if TYPE_CHECKING:  # the message shapes are for mypy only
    from moldau.protocol.typed import FetchRequest, FetchResponse

FETCH: Api[FetchRequest, FetchResponse] = Api(
    1, "Fetch", versions=(4, 12), flexible=12,
    request=[
        F("cluster_id", "string", "12+", nullable="12+", default=None, tag=0, tagged="12+"),
        F("replica_id", "int32", "0-14", default=-1),
        F("max_wait_ms", "int32"),
        F("min_bytes", "int32"),
        F("max_bytes", "int32", "3+", default=0x7FFFFFFF),
        F("isolation_level", "int8", "4+"),
        F("session_id", "int32", "7+"),
        F("session_epoch", "int32", "7+", default=-1),
        F("topics", [
            F("topic", "string", "0-12"),
            F("partitions", [
                F("partition", "int32"),
                F("current_leader_epoch", "int32", "9+", default=-1),
                F("fetch_offset", "int64"),
                F("last_fetched_epoch", "int32", "12+", default=-1),
                F("log_start_offset", "int64", "5+", default=-1),
                F("partition_max_bytes", "int32"),
            ]),
        ]),
        F("forgotten_topics_data", [
            F("topic", "string", "7-12"),
            F("partitions", "[]int32", "7+"),
        ], "7+"),
        F("rack_id", "string", "11+"),
    ],
    response=[
        F("throttle_time_ms", "int32", "1+"),
        F("error_code", "int16", "7+"),
        F("session_id", "int32", "7+"),
        F("responses", [
            F("topic", "string", "0-12"),
            F("partitions", [
                F("partition_index", "int32"),
                F("error_code", "int16"),
                F("high_watermark", "int64"),
                F("last_stable_offset", "int64", "4+", default=-1),
                F("log_start_offset", "int64", "5+", default=-1),
                F("diverging_epoch", Struct([
                    F("epoch", "int32", "12+", default=-1),
                    F("end_offset", "int64", "12+", default=-1),
                ]), "12+", tag=0, tagged="12+"),
                F("current_leader", Struct([
                    F("leader_id", "int32", "12+", default=-1),
                    F("leader_epoch", "int32", "12+", default=-1),
                ]), "12+", tag=1, tagged="12+"),
                F("snapshot_id", Struct([
                    F("end_offset", "int64", default=-1),
                    F("epoch", "int32", default=-1),
                ]), "12+", tag=2, tagged="12+"),
                F("aborted_transactions", [
                    F("producer_id", "int64", "4+"),
                    F("first_offset", "int64", "4+"),
                ], "4+", nullable="4+"),
                F("preferred_read_replica", "int32", "11+", default=-1),
                F("records", "records", nullable="0+"),
            ]),
        ]),
    ],
)
