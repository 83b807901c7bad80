"""Flags and output of moldau-leader-election, moldau-delete-records, moldau-log-dirs and moldau-topics --alter."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from moldau.errors import KafkaError
from moldau.partition_admin import LogDirDescription, ReplicaInfo
from moldau.protocol.errors import ErrorCode
from moldau.tools import delete_records, leader_election, log_dirs, topics
from moldau.tools.common import ToolError

BS = ["--bootstrap-server", "127.0.0.1:9092"]


@pytest.mark.parametrize("argv, message", [
    (["--all-topic-partitions"], "Missing required option(s) [election-type]"),
    (["--election-type", "fast", "--all-topic-partitions"], "expected preferred or unclean"),
    (["--election-type", "preferred"], "One and only one of the following options is required"),
    (["--election-type", "preferred", "--all-topic-partitions", "--topic", "t", "--partition", "0"],
     "One and only one"),
    (["--election-type", "preferred", "--topic", "t"], "--topic and --partition must be given together"),
    (["--election-type", "preferred", "--path-to-json-file", "/nonexistent/x.json"], "cannot read"),
])
def test_leader_election_bad_flags(argv: list[str], message: str) -> None:
    with pytest.raises(ToolError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                       .replace("]", r"\]")):
        leader_election.parse_args(BS + argv)


def test_leader_election_flags(tmp_path: Path) -> None:
    args = leader_election.parse_args(BS + ["--election-type", "PREFERRED", "--all-topic-partitions"])
    assert args.kind == "preferred" and args.partitions is None
    args = leader_election.parse_args(BS + ["--election-type", "unclean", "--topic", "t", "--partition", "2"])
    assert args.kind == "unclean" and args.partitions == [("t", 2)]
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"partitions": [{"topic": "a", "partition": 0}, {"topic": "b", "partition": 1}]}))
    args = leader_election.parse_args(BS + ["--election-type", "preferred", "--path-to-json-file", str(f)])
    assert args.partitions == [("a", 0), ("b", 1)]
    with pytest.raises(ToolError, match="duplicate partitions: a-0"):
        leader_election.parse_partitions_json('{"partitions": [{"topic": "a", "partition": 0}, '
                                              '{"topic": "a", "partition": 0}]}', "x")
    with pytest.raises(ToolError, match="not Kafka's partitions JSON"):
        leader_election.parse_partitions_json('{"topics": []}', "x")


def test_leader_election_output(capsys: pytest.CaptureFixture[str]) -> None:
    out = io.StringIO()
    results = {("t", 0): None, ("t", 1): KafkaError(ErrorCode.ELECTION_NOT_NEEDED), ("t", 2): None}
    assert leader_election.report("preferred", results, out) == 0
    assert out.getvalue().splitlines() == [
        "Successfully completed leader election (PREFERRED) for partitions t-0, t-2",
        "Valid replica already elected for partitions t-1"]
    out = io.StringIO()
    failed = {("t", 0): KafkaError(ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, "Failed to elect leader")}
    assert leader_election.report("unclean", failed, out) == 1
    assert out.getvalue() == ("Error completing leader election (UNCLEAN) for partition: t-0: "
                              "PREFERRED_LEADER_NOT_AVAILABLE (80): Failed to elect leader\n")
    assert "1 replica(s) could not be elected" in capsys.readouterr().err


def test_delete_records_flags_and_output(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match=r"Missing required argument \"\[offset-json-file\]\""):
        delete_records.parse_args(BS)
    f = tmp_path / "o.json"
    f.write_text(json.dumps({"partitions": [{"topic": "t", "partition": 0, "offset": 10},
                                            {"topic": "t", "partition": 1, "offset": -1}], "version": 1}))
    assert delete_records.parse_args(BS + ["--offset-json-file", str(f)]).offsets == {("t", 0): 10, ("t", 1): -1}
    with pytest.raises(ToolError, match="duplicate topic partitions: t-0"):
        delete_records.parse_offsets_json('{"partitions": [{"topic": "t", "partition": 0, "offset": 1}, '
                                          '{"topic": "t", "partition": 0, "offset": 2}]}', "x")
    with pytest.raises(ToolError, match="not supported version field value 2"):
        delete_records.parse_offsets_json('{"partitions": [], "version": 2}', "x")
    with pytest.raises(ToolError, match="not Kafka's offsets JSON"):
        delete_records.parse_offsets_json('{"partitions": [{"topic": "t"}]}', "x")
    out = io.StringIO()
    code = delete_records.report({("t", 1): KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE), ("t", 0): 10}, out)
    assert code == 1
    lines = out.getvalue().splitlines()
    assert lines[:2] == ["Records delete operation completed:", "partition: t-0\tlow_watermark: 10"]
    assert lines[2].startswith("partition: t-1\terror: OFFSET_OUT_OF_RANGE (1)")


def test_log_dirs_flags_and_json() -> None:
    with pytest.raises(ToolError, match=r"\[describe\]"):
        log_dirs.parse_args(BS)
    with pytest.raises(ToolError, match="--broker-list"):
        log_dirs.parse_args(BS + ["--describe", "--broker-list", "1,x"])
    args = log_dirs.parse_args(BS + ["--describe", "--broker-list", "1,2", "--topic-list", "a,b"])
    assert args.brokers == [1, 2] and args.topics == ["a", "b"]
    described = {2: [LogDirDescription("/d2", None, {("a", 0): ReplicaInfo(120, 0, False),
                                                     ("c", 0): ReplicaInfo(5, 0, False)})],
                 1: [LogDirDescription("/d1", KafkaError(ErrorCode.KAFKA_STORAGE_ERROR))]}
    assert json.loads(log_dirs.to_json(described, ["a"])) == {"version": 1, "brokers": [
        {"broker": 1, "logDirs": [{"logDir": "/d1", "error": "org.apache.kafka.common.errors.KafkaStorageException",
                                   "partitions": []}]},
        {"broker": 2, "logDirs": [{"logDir": "/d2", "error": None, "partitions": [
            {"partition": "a-0", "size": 120, "offsetLag": 0, "isFuture": False}]}]}]}


def test_topics_alter_flags() -> None:
    with pytest.raises(ToolError, match=r"\[partitions\]"):
        topics.parse_args(BS + ["--alter", "--topic", "t"])
    args = topics.parse_args(BS + ["--alter", "--topic", "t", "--partitions", "4"])
    assert args.action == "alter" and args.partitions == 4 and args.assignment is None
    args = topics.parse_args(BS + ["--alter", "--topic", "t", "--partitions", "3", "--replica-assignment", "1:2,2:3,3:1"])
    assert args.assignment == {0: [1, 2], 1: [2, 3], 2: [3, 1]}
    with pytest.raises(ToolError, match="cannot be used with --partitions"):
        topics.parse_args(BS + ["--create", "--topic", "t", "--partitions", "3", "--replica-assignment", "1:2"])


def test_reassign_partitions_flags_and_json(tmp_path: Path) -> None:
    import random

    from moldau.tools import reassign_partitions as rp

    with pytest.raises(ToolError, match="exactly one action"):
        rp.parse_args(BS)
    with pytest.raises(ToolError, match="needs --topics-to-move-json-file and --broker-list"):
        rp.parse_args(BS + ["--generate", "--broker-list", "1,2"])
    with pytest.raises(ToolError, match="--execute needs --reassignment-json-file"):
        rp.parse_args(BS + ["--execute"])
    topics_file = tmp_path / "topics.json"
    topics_file.write_text('{"topics": [{"topic": "a"}, {"topic": "b"}], "version": 1}')
    args = rp.parse_args(BS + ["--generate", "--topics-to-move-json-file", str(topics_file), "--broker-list", "3,1,2"])
    assert args.topics == ["a", "b"] and args.brokers == [1, 2, 3]
    plan_file = tmp_path / "plan.json"
    plan_file.write_text('{"version": 1, "partitions": [{"topic": "a", "partition": 0, "replicas": [2, 3, 4], '
                         '"log_dirs": ["any", "any", "any"]}]}')
    assert rp.parse_args(BS + ["--verify", "--reassignment-json-file", str(plan_file)]).plan == {("a", 0): [2, 3, 4]}
    with pytest.raises(ToolError, match="duplicate entries"):
        rp.parse_plan({"partitions": [{"topic": "a", "partition": 0, "replicas": [1, 1]}]}, "x")
    with pytest.raises(ToolError, match="duplicate topic partitions"):
        rp.parse_plan({"partitions": [{"topic": "a", "partition": 0, "replicas": [1]}] * 2}, "x")
    with pytest.raises(ToolError, match="only \"any\" log_dirs"):
        rp.parse_plan({"partitions": [{"topic": "a", "partition": 0, "replicas": [1], "log_dirs": ["/d"]}]}, "x")
    assert rp.plan_json({("a", 0): [2, 3]}) == \
        '{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[2,3],"log_dirs":["any","any"]}]}'
    current = {("a", p): [1, 2] for p in range(6)}
    proposal = rp.propose(current, [2, 3, 4], random.Random(7))
    assert sorted(proposal) == sorted(current)
    assert all(len(r) == 2 and len(set(r)) == 2 and set(r) <= {2, 3, 4} for r in proposal.values())
    assert sorted(r[0] for r in proposal.values()) == [2, 2, 3, 3, 4, 4]  # leaders round-robin
    with pytest.raises(ToolError, match="larger than available brokers"):
        rp.propose(current, [2], random.Random(1))


def test_reassign_throttles_name_kafkas_replicas(tmp_path: Path) -> None:
    from moldau.tools import reassign_partitions as rp

    current = {("a", 0): [1, 2], ("a", 1): [2, 3], ("b", 0): [1]}
    plan = {("a", 0): [1, 4], ("a", 1): [2, 3], ("b", 0): [2]}
    # Leaders: every current replica of a moving partition; followers: the replicas being added.
    assert rp.throttled_replicas(plan, current) == {"a": ("0:1,0:2", "0:4"), "b": ("0:1", "0:2")}
    plan_file = tmp_path / "plan.json"
    plan_file.write_text('{"version": 1, "partitions": [{"topic": "a", "partition": 0, "replicas": [1]}]}')
    assert rp.parse_args(BS + ["--execute", "--reassignment-json-file", str(plan_file), "--throttle", "10"]
                         ).throttle == 10
    with pytest.raises(ToolError, match="only valid with --execute"):
        rp.parse_args(BS + ["--verify", "--reassignment-json-file", str(plan_file), "--throttle", "10"])
    with pytest.raises(ToolError, match="positive"):
        rp.parse_args(BS + ["--execute", "--reassignment-json-file", str(plan_file), "--throttle", "0"])
