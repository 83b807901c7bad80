"""Which brokers the controller tells about a partition change (the transport is recorded, not sent)."""

from __future__ import annotations

from typing import Any

from moldau.broker.controller import zk_data as Z
from moldau.broker.controller.controller import Controller, ControllerSettings
from moldau.protocol.api import ApiKey


class RecordingChannel:
    def __init__(self) -> None:
        self.sent: list[tuple[int, ApiKey, dict[str, Any]]] = []

    def send(self, broker_id: int, api_key: ApiKey, body: dict[str, Any], on_response: Any) -> None:
        self.sent.append((broker_id, api_key, body))

    def to(self, api_key: ApiKey) -> list[int]:
        return sorted(b for b, key, _ in self.sent if key == api_key)


def _controller(shutting_down: set[int]) -> tuple[Controller, RecordingChannel]:
    controller = Controller(1, None, ControllerSettings(), lambda: 10)  # type: ignore[arg-type]  # never started
    ctx = controller.ctx
    ctx.epoch = 2
    for b in (1, 2, 3):
        ctx.live[b] = Z.BrokerInfo(b, f"h{b}", 9090 + b, None, [("PLAINTEXT", "PLAINTEXT", f"h{b}", 9090 + b)], 100 + b)
    ctx.shutting_down |= shutting_down
    ctx.assignments["t"] = {0: [3, 1, 2], 1: [2, 3, 1]}
    ctx.topic_ids["t"] = b"\x07" * 16
    ctx.states[("t", 0)] = Z.LeaderIsr(1, 1, [1, 2], 2, 1)  # moved away from 3 by its controlled shutdown
    ctx.states[("t", 1)] = Z.LeaderIsr(2, 1, [2, 1], 2, 1)  # 3 taken out of the ISR
    channel = RecordingChannel()
    controller.channel = channel  # type: ignore[assignment]
    return controller, channel


def test_changes_reach_every_live_replica() -> None:
    controller, channel = _controller(set())
    controller._propagate([("t", 0), ("t", 1)])
    assert channel.to(ApiKey.LEADER_AND_ISR) == [1, 2, 3]
    assert channel.to(ApiKey.UPDATE_METADATA) == [1, 2, 3]


def test_a_broker_in_controlled_shutdown_gets_metadata_but_no_leader_and_isr() -> None:
    # Were it told, it would follow the partitions it just handed over, fetch at the new leader epoch and be
    # taken back into their ISR moments before it exits.
    controller, channel = _controller({3})
    controller._propagate([("t", 0), ("t", 1)])
    assert channel.to(ApiKey.LEADER_AND_ISR) == [1, 2]
    assert channel.to(ApiKey.UPDATE_METADATA) == [1, 2, 3]


def test_a_new_controller_sends_leader_and_isr_before_the_metadata_naming_the_leaders_it_elected() -> None:
    # Metadata first would let a client (or a test) see a broker named leader and write to it before it
    # knows: NOT_LEADER_OR_FOLLOWER from the very broker the metadata pointed at.
    controller, channel = _controller(set())
    controller._announce_all()
    for broker in (1, 2, 3):
        keys = [key for b, key, _ in channel.sent if b == broker]
        assert keys == [ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA], (broker, keys)


def test_every_broker_gets_the_same_metadata_under_its_own_broker_epoch() -> None:
    controller, channel = _controller(set())
    controller._propagate([("t", 0), ("t", 1)])
    bodies = {b: body for b, key, body in channel.sent if key == ApiKey.UPDATE_METADATA}
    assert {b: body["broker_epoch"] for b, body in bodies.items()} == {1: 101, 2: 102, 3: 103}
    for body in bodies.values():
        assert [(s["topic_name"], s["partition_index"], s["leader"], s["isr"])
                for s in body["ungrouped_partition_states"]] == [("t", 0, 1, [1, 2]), ("t", 1, 2, [2, 1])]
        assert [b["id"] for b in body["live_brokers"]] == [1, 2, 3]
        assert body["controller_epoch"] == 2
