"""InitProducerId (key 22): v0-v4, flexible from v2.

Idempotent producers call it with a null transactional id to get a producer id and epoch; v3 lets a producer pass
its current id/epoch so the broker can bump the epoch instead of issuing a new id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.schema import Api, F

if TYPE_CHECKING:  # the message shapes are for mypy only
    from moldau.protocol.typed import InitProducerIdRequest, InitProducerIdResponse

INIT_PRODUCER_ID: Api[InitProducerIdRequest, InitProducerIdResponse] = Api(
    22, "InitProducerId", versions=(0, 4), flexible=2,
    request=[
        F("transactional_id", "string", nullable="0+"),
        F("transaction_timeout_ms", "int32"),
        F("producer_id", "int64", "3+", default=-1),
        F("producer_epoch", "int16", "3+", default=-1),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("producer_id", "int64", default=-1),
        F("producer_epoch", "int16"),
    ],
)
