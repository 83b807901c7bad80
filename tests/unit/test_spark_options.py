"""The moldau Spark source's option rules and offset planning (pure functions; no Spark, no broker)."""

from __future__ import annotations

import pytest

from moldau.fetcher import TopicPartition
from moldau.spark.options import EARLIEST, LATEST, SourceOptionError, parse, parse_sink
from moldau.spark.planning import OffsetRange, from_json, rate_limit, split, to_json

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "a,b"}


def test_defaults_follow_sparks_kafka_source() -> None:
    batch = parse(BASE, streaming=False)
    assert batch.starting.kind == "earliest" and batch.ending.kind == "latest"
    assert batch.fail_on_data_loss is True and batch.include_headers is False
    assert batch.subscription.topics == ("a", "b")
    assert parse(BASE, streaming=True).starting.kind == "latest"


def test_options_are_case_insensitive_and_kafka_settings_pass_through() -> None:
    o = parse({"KAFKA.bootstrap.servers": "h:1", "SubscribePattern": "t.*", "FAILONDATALOSS": "false",
               "kafka.fetch.max.wait.ms": "50", "maxOffsetsPerTrigger": "10"}, streaming=True)
    assert o.subscription.pattern == "t.*" and o.fail_on_data_loss is False
    assert o.client_config == {"bootstrap.servers": "h:1", "fetch.max.wait.ms": "50"}
    assert o.max_offsets_per_trigger == 10


@pytest.mark.parametrize("options, message", [
    ({"subscribe": "a"}, "kafka.bootstrap.servers"),
    ({"kafka.bootstrap.servers": "h:1"}, "Exactly one of"),
    ({**BASE, "assign": '{"a":[0]}'}, "Exactly one of"),
    ({**BASE, "kafka.group.id": "g"}, "kafka.group.id"),
    ({**BASE, "startingOffsets": "latest"}, "cannot be latest"),
    ({**BASE, "endingOffsets": "earliest"}, "cannot be earliest"),
    ({**BASE, "startingOffsets": '{"a":{"0":-1}}'}, "cannot be latest"),
    ({**BASE, "endingOffsets": '{"a":{"0":-2}}'}, "cannot be earliest"),
    ({**BASE, "startingOffsets": "{nope"}, "startingOffsets' is not valid JSON"),
    ({**BASE, "minPartitions": "0"}, "minPartitions"),
    ({**BASE, "failOnDataLoss": "maybe"}, "failOnDataLoss"),
    ({**BASE, "maxOffsetsPerTrigger": "5"}, "only valid in streaming"),
    ({**BASE, "startingTimestamp": "yesterday"}, "startingTimestamp"),
    ({**BASE, "startingOffsetsByTimestampStrategy": "closest"}, "startingOffsetsByTimestampStrategy"),
    ({"kafka.bootstrap.servers": "h:1", "assign": '{"a":"0"}'}, "assign"),
    ({"kafka.bootstrap.servers": "h:1", "subscribePattern": "("}, "subscribePattern"),
])
def test_bad_batch_options_fail_naming_the_option(options: dict[str, str], message: str) -> None:
    with pytest.raises(SourceOptionError, match=message):
        parse(options, streaming=False)


def test_streaming_rejects_ending_offsets() -> None:
    with pytest.raises(SourceOptionError, match="not valid in streaming"):
        parse({**BASE, "endingOffsets": "latest"}, streaming=True)


def test_offset_json_and_timestamps() -> None:
    o = parse({**BASE, "startingOffsets": '{"a":{"0":23,"1":-2}}', "endingOffsets": '{"a":{"0":-1,"1":50}}'},
              streaming=False)
    assert o.starting.offsets == {"a": {0: 23, 1: EARLIEST}} and o.ending.offsets == {"a": {0: LATEST, 1: 50}}
    t = parse({**BASE, "startingTimestamp": "1000", "startingOffsets": "earliest",
               "endingOffsetsByTimestamp": '{"a":{"0":2000}}'}, streaming=False)
    assert t.starting.kind == "timestamp" and t.starting.timestamp == 1000  # timestamps win, as in Spark
    assert t.ending.kind == "timestamps" and t.ending.offsets == {"a": {0: 2000}}
    assert parse({"kafka.bootstrap.servers": "h:1", "assign": '{"a":[0,2]}'},
                 streaming=False).subscription.assign == {"a": (0, 2)}


def test_sink_options() -> None:
    s = parse_sink({"kafka.bootstrap.servers": "h:1", "Topic": "out", "kafka.linger.ms": "1"})
    assert s.topic == "out" and s.client_config == {"bootstrap.servers": "h:1", "linger.ms": "1"}


def test_offsets_json_round_trip_in_sparks_format() -> None:
    offsets = {TopicPartition("b", 1): 7, TopicPartition("a", 0): 3, TopicPartition("a", 10): 4}
    js = to_json(offsets)
    assert js == {"a": {"0": 3, "10": 4}, "b": {"1": 7}}
    assert from_json(js) == offsets


def test_split_keeps_ranges_contiguous_and_covers_min_partitions() -> None:
    ranges = [OffsetRange("a", 0, 0, 100), OffsetRange("a", 1, 10, 10), OffsetRange("b", 0, 5, 35)]
    assert split(ranges, None) == [ranges[0], ranges[2]]  # empty ranges dropped
    parts = split(ranges, 8)
    assert len(parts) >= 8
    for tp_range in (ranges[0], ranges[2]):
        mine = [p for p in parts if (p.topic, p.partition) == (tp_range.topic, tp_range.partition)]
        assert mine[0].start == tp_range.start and mine[-1].end == tp_range.end
        assert all(a.end == b.start for a, b in zip(mine, mine[1:]))


def test_rate_limit_shares_in_proportion_and_never_exceeds() -> None:
    a, b, c = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)
    start = {a: 0, b: 100}
    latest = {a: 300, b: 200, c: 0}
    end = rate_limit(start, latest, 40)
    assert sum(end[tp] - start.get(tp, 0) for tp in latest) == 40
    assert end[a] - 0 == 30 and end[b] - 100 == 10 and end[c] == 0
    assert rate_limit(start, latest, 10_000) == latest
    tiny = rate_limit({a: 0, b: 0}, {a: 1, b: 1}, 1)
    assert sum(tiny.values()) == 1  # rounding never stalls the stream
