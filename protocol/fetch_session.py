"""The fetcher's half of an incremental fetch session (KIP-227), shared by the consumer (``moldau.fetcher``)
and the broker's replica fetcher; the leader's half is ``moldau.broker.fetch_session``.

A session opens with a full Fetch at epoch 0; the answer's session id (0: the leader keeps none, and full
requests go on) is used with epochs 1, 2, ... (wrapping to 1), each request naming only the partitions whose
fields changed since they were last sent, and under "forgotten" those no longer wanted. Any failed request, or
an answer with a session error, starts over with a full request (``reset``).
"""

from __future__ import annotations

from typing import Any

from moldau.protocol.types import TopicPartition

FINAL_EPOCH = -1  # ends a session: the request is a sessionless full fetch
INITIAL_EPOCH = 0  # opens one
INT32_MAX = (1 << 31) - 1


# What a fetch says of one partition: (current_leader_epoch, fetch_offset, last_fetched_epoch,
# log_start_offset, partition_max_bytes). A tuple, compared as one value: building a request dict for each of
# 3,333 partitions on every fetch, only to find most of them unchanged, cost the follower ~10 ms per fetch.
PartitionPosition = tuple[int, int, int, int, int]


def position_fields(index: int, position: PartitionPosition) -> dict[str, Any]:
    """A partition's entry of a Fetch request."""
    epoch, offset, last_epoch, log_start, max_bytes = position
    return {"partition": index, "current_leader_epoch": epoch, "fetch_offset": offset,
            "last_fetched_epoch": last_epoch, "log_start_offset": log_start, "partition_max_bytes": max_bytes}


class FetcherSession:
    """The fetcher's half of a session (Kafka's FetchSessionHandler), a follower's or a consumer's: a full
    request to open it, then only the partitions whose fields changed since they were last sent, and the ones to
    forget."""

    def __init__(self) -> None:
        self.session_id = 0
        self.epoch = INITIAL_EPOCH
        self.sent: dict[TopicPartition, PartitionPosition] = {}

    def reset(self) -> None:
        """Start over: the next request is a full one at epoch 0. It names the old session id, so the leader
        drops that session as it opens the new one (instead of keeping it until its slot is evicted)."""
        self.epoch, self.sent = INITIAL_EPOCH, {}

    def build(self, wanted: dict[TopicPartition, PartitionPosition]
              ) -> tuple[int, int, dict[TopicPartition, PartitionPosition], list[TopicPartition]]:
        """(session id, epoch, partitions to send, partitions to forget) for a fetch of ``wanted``."""
        if self.epoch == INITIAL_EPOCH:
            return self.session_id, INITIAL_EPOCH, dict(wanted), []
        sent = self.sent
        get = sent.get
        changed = {tp: e for tp, e in wanted.items() if get(tp) != e}
        # |sent| + |new| == |wanted| + |sent - wanted|: look for forgotten partitions only when there are some.
        new = sum(1 for tp in changed if tp not in sent)
        forgotten = [tp for tp in sent if tp not in wanted] if len(sent) + new > len(wanted) else []
        return self.session_id, self.epoch, changed, forgotten

    def build_changed(self, wanted: dict[TopicPartition, PartitionPosition]
                      ) -> tuple[int, int, dict[TopicPartition, PartitionPosition], list[TopicPartition]]:
        """``build`` for a fetcher that knows which partitions may have moved: ``wanted`` holds only those (the
        others stay as the session has them; none is forgotten). Only for an open session (epoch > 0)."""
        assert self.epoch != INITIAL_EPOCH
        get = self.sent.get
        return self.session_id, self.epoch, {tp: e for tp, e in wanted.items() if get(tp) != e}, []

    def on_response(self, session_id: int, epoch: int, sent: dict[TopicPartition, PartitionPosition],
                    forgotten: list[TopicPartition]) -> None:
        """A successful answer to the request ``build`` made: the leader's session now holds what was sent."""
        if session_id == 0:  # the leader keeps no session for us: full requests go on
            self.session_id, self.epoch, self.sent = 0, INITIAL_EPOCH, {}
            return
        if epoch == INITIAL_EPOCH:
            self.sent = dict(sent)
        else:
            self.sent.update(sent)
            for tp in forgotten:
                self.sent.pop(tp, None)
        self.session_id = session_id
        self.epoch = 1 if epoch >= INT32_MAX else epoch + 1
