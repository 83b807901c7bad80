"""Moldau's own consumer against a real broker: interop with confluent-kafka, groups, commits, console tool."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import struct
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
from confluent_kafka import Consumer as CkConsumer
from confluent_kafka import Producer as CkProducer
from confluent_kafka.admin import AdminClient, NewTopic

from moldau.consumer import Consumer, ConsumerRebalanceListener, TopicPartition
from moldau.errors import RequestTimeoutError

from .clients import CODECS, make_records
from .harness import REPO_ROOT, BrokerProcess, wait_until
from .test_confluent import produce

pytestmark = pytest.mark.integration


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result is in
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                                  operation_timeout=10)
    futures[topic].result(timeout=30)


def produce_spread(bootstrap: str, topic: str, start: int, count: int, partitions: int) -> None:
    producer = CkProducer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + count):
        producer.produce(topic, value=str(i).encode(), partition=i % partitions)
    assert producer.flush(30) == 0


async def consume_n(consumer: Consumer, count: int, timeout: float = 30.0) -> list[Any]:
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(out) < count:
        assert time.monotonic() < deadline, f"got {len(out)} of {count} records in {timeout}s"
        for records in (await consumer.getmany(timeout_ms=500)).values():
            out.extend(records)
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_reads_what_confluent_produced(broker: BrokerProcess, topic: str, codec: str) -> None:
    records = make_records(80, tag=f"mc-{codec}")
    stamps = [1_700_000_000_000 + i for i in range(len(records))]
    produce(broker.bootstrap, topic, records, stamps, **{"compression.type": codec})

    async def run() -> list[Any]:
        async with Consumer({"bootstrap.servers": broker.bootstrap}, max_poll_records=7) as consumer:
            consumer.assign([TopicPartition(topic, 0)])
            consumer.seek_to_beginning()
            return await consume_n(consumer, len(records))

    got = asyncio.run(run())
    assert [r.offset for r in got] == list(range(len(records)))
    for r, want, ts in zip(got, records, stamps, strict=True):
        assert (r.key, r.value, r.headers, r.timestamp, r.timestamp_type) == (want.key, want.value, want.headers,
                                                                             ts, 0), r.offset


def test_offsets_lookups_seek_and_pause(broker: BrokerProcess, topic: str) -> None:
    records = make_records(20, tag="seek", with_nulls=False)
    produce(broker.bootstrap, topic, records, [1000 + 10 * i for i in range(20)])
    tp = TopicPartition(topic, 0)

    async def run() -> None:
        async with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="latest") as consumer:
            consumer.assign([tp])
            assert await consumer.position(tp) == 20  # latest
            assert await consumer.beginning_offsets([tp]) == {tp: 0}
            assert await consumer.end_offsets([tp]) == {tp: 20}
            assert await consumer.offsets_for_times({tp: 1055}) == {tp: (6, 1060)}
            assert await consumer.offsets_for_times({tp: 99999}) == {tp: None}
            consumer.seek(tp, 15)
            got = await consume_n(consumer, 5)
            assert [r.offset for r in got] == [15, 16, 17, 18, 19]
            consumer.seek(tp, 3)
            consumer.pause(tp)
            assert await consumer.getmany(timeout_ms=300) == {}
            consumer.resume(tp)
            assert (await consume_n(consumer, 1))[0].offset == 3

    asyncio.run(run())


def test_commits_survive_a_restart(broker: BrokerProcess, topic: str) -> None:
    produce(broker.bootstrap, topic, make_records(50, tag="commit", with_nulls=False))
    tp = TopicPartition(topic, 0)
    group = f"g-{topic}"
    conf = {"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "heartbeat.interval.ms": 500}

    async def first() -> None:
        async with Consumer(conf) as consumer:
            consumer.subscribe([topic])
            got = await consume_n(consumer, 30)
            await consumer.commit({tp: (got[29].offset + 1, "half")})
            committed = await consumer.committed_offsets([tp])
            assert committed[tp] is not None and (committed[tp].offset, committed[tp].metadata) == (30, "half")

    async def second() -> list[Any]:
        async with Consumer(conf) as consumer:
            consumer.subscribe([topic])
            got = await consume_n(consumer, 20)
            assert await consumer.committed(tp) == 30
            return got

    asyncio.run(first())
    got = asyncio.run(second())
    assert got[0].offset == 30 and got[-1].offset == 49


class _Log(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.events: list[tuple[str, set[TopicPartition]]] = []

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.events.append(("revoked", revoked))

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.events.append(("assigned", assigned))


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_group_shared_with_confluent_consumer(broker: BrokerProcess, topic: str, strategy: str) -> None:
    """A Moldau member and a librdkafka member (same assignor) split 4 partitions; every record is seen once."""
    partitions = 4
    create_topic(broker.bootstrap, topic, partitions)
    group = f"mixed-{topic}"
    seen: list[tuple[str, int, int]] = []  # (who, partition, offset), only after the commit succeeded
    lock = threading.Lock()
    stop = threading.Event()
    moldau_assignment: list[set[TopicPartition]] = []
    listener = _Log()
    errors: list[BaseException] = []

    async def moldau_member() -> None:
        conf = {"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
                "auto.offset.reset": "earliest", "partition.assignment.strategy": strategy,
                "heartbeat.interval.ms": 300, "session.timeout.ms": 10000}
        async with Consumer(conf) as consumer:
            consumer.subscribe([topic], listener=listener)
            while not stop.is_set():
                batch = await consumer.getmany(timeout_ms=200)
                if batch:
                    await consumer.commit({tp: rs[-1].offset + 1 for tp, rs in batch.items()})
                    with lock:
                        seen.extend(("moldau", r.partition, r.offset) for rs in batch.values() for r in rs)
                moldau_assignment[:] = [consumer.assignment()]

    def run_moldau() -> None:
        try:
            asyncio.run(moldau_member())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run_moldau, daemon=True)
    thread.start()
    try:
        produce_spread(broker.bootstrap, topic, 0, 200, partitions)
        wait_until(lambda: len(seen) >= 200 or errors, 60, "the Moldau member alone reads the first 200")
        assert not errors, errors
        ck = CkConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "partition.assignment.strategy": strategy,
                         "heartbeat.interval.ms": 300, "session.timeout.ms": 10000})
        ck.subscribe([topic])
        produced_second = False
        deadline = time.monotonic() + 90
        try:
            while True:
                assert time.monotonic() < deadline, f"only {len(seen)} of 400 records seen"
                assert not errors, errors
                msg = ck.poll(0.2)
                if msg is not None and msg.error() is None:
                    ck.commit(message=msg, asynchronous=False)
                    with lock:
                        seen.append(("confluent", msg.partition(), msg.offset()))
                split = len(ck.assignment()) == 2 and moldau_assignment and len(moldau_assignment[0]) == 2
                if split and not produced_second:
                    produce_spread(broker.bootstrap, topic, 200, 200, partitions)
                    produced_second = True
                if produced_second and len(seen) >= 400:
                    break
        finally:
            ck.close()
    finally:
        stop.set()
        thread.join(30)
    keys = [(p, o) for _, p, o in seen]
    assert len(keys) == len(set(keys)) == 400, "duplicates or losses"
    assert sorted(keys) == sorted((p, o) for p in range(partitions) for o in range(100))
    assert {who for who, _, o in seen if o >= 50} == {"moldau", "confluent"}  # both served the second half
    assert [e for e, _ in listener.events][:1] == ["assigned"] and ("revoked", set()) not in listener.events
    revoked = [tps for e, tps in listener.events if e == "revoked"]
    if strategy == "cooperative-sticky":  # KIP-429: only the partitions that moved were revoked
        assert revoked and all(len(tps) == 2 for tps in revoked), listener.events
    else:  # eager: everything was revoked before the rejoin
        assert revoked and len(revoked[0]) == partitions, listener.events


def test_pattern_subscription(broker: BrokerProcess, topic: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a machine booted less than metadata.max.age.ms (5 min) ago, too: time.monotonic() counts from boot, and
    the consumer once took its 0.0 "never matched" mark for a recent match, so it joined nothing for minutes (CI
    on a fresh machine: 0 of 10 records in 30 s). The test process's clock is set back to read 1 s since boot."""
    for suffix in ("a", "b"):
        produce(broker.bootstrap, f"{topic}-{suffix}", make_records(5, tag=suffix, with_nulls=False))
    real_monotonic = time.monotonic
    shift = real_monotonic() - 1.0
    monkeypatch.setattr(time, "monotonic", lambda: real_monotonic() - shift)  # asyncio's loop reads it too

    async def run() -> set[str]:
        async with Consumer(bootstrap_servers=broker.bootstrap, group_id=f"p-{topic}",
                            auto_offset_reset="earliest") as consumer:
            consumer.subscribe(pattern=f"{topic}-[ab]")
            return {r.topic for r in await consume_n(consumer, 10)}

    assert asyncio.run(run()) == {f"{topic}-a", f"{topic}-b"}


def test_pattern_match_that_failed_is_retried_on_the_next_poll(broker: BrokerProcess, topic: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A Metadata request for the match that times out (a loaded machine) is retried on the next poll, not after
    metadata.max.age.ms (5 min): the mark "matched at" is set only once the match succeeded."""
    produce(broker.bootstrap, f"{topic}-a", make_records(5, tag="a", with_nulls=False))

    async def run() -> int:
        async with Consumer(bootstrap_servers=broker.bootstrap, group_id=f"pr-{topic}",
                            auto_offset_reset="earliest") as consumer:
            real = consumer._cluster.any_connection
            failed: list[bool] = []

            async def first_one_times_out() -> Any:
                if not failed:
                    failed.append(True)
                    raise RequestTimeoutError("injected: the pattern's Metadata request timed out")
                return await real()

            monkeypatch.setattr(consumer._cluster, "any_connection", first_one_times_out)
            consumer.subscribe(pattern=f"{topic}-[ab]")
            assert await consumer.getmany(timeout_ms=100) == {} and failed  # logged, not raised (as Kafka's poll)
            monkeypatch.undo()
            return len(await consume_n(consumer, 5, timeout=20))

    assert asyncio.run(run()) == 5


def test_pattern_picks_up_a_topic_created_after_subscribe(broker: BrokerProcess, topic: str) -> None:
    """metadata.max.age.ms later the new match makes the member rejoin; the new partition starts at
    auto.offset.reset=earliest, so its first records are read too."""
    produce(broker.bootstrap, f"{topic}-a", make_records(3, tag="a", with_nulls=False))

    async def run() -> dict[str, int]:
        async with Consumer(bootstrap_servers=broker.bootstrap, group_id=f"pn-{topic}", metadata_max_age_ms=500,
                            auto_offset_reset="earliest") as consumer:
            consumer.subscribe(pattern=f"{topic}-[ab]")
            got = await consume_n(consumer, 3)
            produce(broker.bootstrap, f"{topic}-b", make_records(4, tag="b", with_nulls=False))  # creates it
            got += await consume_n(consumer, 4)
            assert consumer.subscription() == {f"{topic}-a", f"{topic}-b"}
            return {t: sum(1 for r in got if r.topic == t) for t in sorted({r.topic for r in got})}

    assert asyncio.run(run()) == {f"{topic}-a": 3, f"{topic}-b": 4}


def console(*args: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-m", "moldau.tools.console_consumer", *args], cwd=REPO_ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def test_console_consumer_process(broker: BrokerProcess, topic: str) -> None:
    producer = CkProducer({"bootstrap.servers": broker.bootstrap})
    for i in range(1, 4):
        producer.produce(topic, key=b"key", value=f"my message {i}".encode(), partition=0)
    assert producer.flush(30) == 0
    proc = console("--bootstrap-server", broker.bootstrap, "--topic", topic, "--from-beginning",
                   "--property", "print.key=true", "--property", "key.separator=-", "--max-messages", "3")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out.decode().splitlines() == ["key-my message 1", "key-my message 2", "key-my message 3"]
    assert err.decode().strip().splitlines()[-1] == "Processed a total of 3 messages"


def test_console_consumer_ctrl_c(broker: BrokerProcess, topic: str) -> None:
    produce(broker.bootstrap, topic, make_records(4, tag="c", with_nulls=False))
    proc = console("--bootstrap-server", broker.bootstrap, "--topic", topic, "--partition", "0", "--offset", "1",
                   "--property", "print.offset=true")
    assert proc.stdout is not None
    lines = [proc.stdout.readline() for _ in range(3)]
    assert [ln.split(b"\t")[0] for ln in lines] == [b"Offset:1", b"Offset:2", b"Offset:3"]
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert err.decode().strip().splitlines() == ["Processed a total of 3 messages"]


def groups_tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "moldau.consumer_groups", *args], cwd=REPO_ROOT,
                          capture_output=True, timeout=60, text=True)


def test_consumer_groups_list_and_delete(broker: BrokerProcess, topic: str) -> None:
    produce(broker.bootstrap, topic, make_records(3, tag="del", with_nulls=False))
    group = f"del-{topic}"

    async def commit_and_leave() -> None:
        async with Consumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False) as c:
            await c.commit({TopicPartition(topic, 0): 2})

    asyncio.run(commit_and_leave())
    listed = groups_tool("--bootstrap-server", broker.bootstrap, "--list")
    assert listed.returncode == 0 and group in listed.stdout.split()
    described = groups_tool("--bootstrap-server", broker.bootstrap, "--describe", "--group", group)
    assert f"{topic}  0          2               3               1" in described.stdout
    deleted = groups_tool("--bootstrap-server", broker.bootstrap, "--delete", "--group", group)
    assert deleted.returncode == 0, deleted.stderr
    assert group not in groups_tool("--bootstrap-server", broker.bootstrap, "--list").stdout.split()
    bad = groups_tool("--bootstrap-server", broker.bootstrap, "--describe")
    assert bad.returncode == 2 and "--group" in bad.stderr and "Traceback" not in bad.stderr


def test_consumer_groups_reset_offsets(broker: BrokerProcess, topic: str) -> None:
    produce(broker.bootstrap, topic, make_records(10, tag="reset", with_nulls=False))
    group = f"reset-{topic}"
    tp = TopicPartition(topic, 0)

    async def commit(offset: int) -> int | None:
        async with Consumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False) as c:
            if offset >= 0:
                await c.commit({tp: offset})
            return await c.committed(tp)

    asyncio.run(commit(6))
    base = ["--bootstrap-server", broker.bootstrap, "--reset-offsets", "--group", group]
    dry = groups_tool(*base, "--topic", topic, "--shift-by", "-4")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines()[1].split() == [group, topic, "0", "2"]
    assert asyncio.run(commit(-1)) == 6  # dry run: nothing committed
    done = groups_tool(*base, "--all-topics", "--to-earliest", "--execute")
    assert done.returncode == 0, done.stderr
    assert asyncio.run(commit(-1)) == 0
    assert groups_tool(*base, "--topic", f"{topic}:0", "--to-offset", "99", "--execute").returncode == 0
    assert asyncio.run(commit(-1)) == 10  # clamped to the log end


def test_consumer_groups_views_files_and_offset_deletion(broker: BrokerProcess, topic: str, tmp_path: Any,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """--members [--verbose], --state, --list --state, --all-groups, --export / --from-file, --delete-offsets and
    --command-config, with the tool in this process (main()) and a live blocking consumer in the group."""
    import moldau
    from moldau.consumer_groups import main

    produce(broker.bootstrap, topic, make_records(10, tag="views", with_nulls=False))
    group, tp = f"views-{topic}", TopicPartition(topic, 0)
    base = ["--bootstrap-server", broker.bootstrap]

    def tool(*args: str, code: int = 0) -> str:
        assert main([*base, *args]) == code, capsys.readouterr()
        out, err = capsys.readouterr()
        return out if code == 0 else err

    member = moldau.Consumer(bootstrap_servers=broker.bootstrap, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False, client_id="views-app")
    try:
        member.subscribe([topic])
        deadline = time.monotonic() + 30
        while not member.assignment() or member.position(tp) < 10:
            assert time.monotonic() < deadline, "never assigned"
            member.poll(timeout_ms=200)
        member.commit()
        members = tool("--describe", "--group", group, "--members").splitlines()
        assert members[0].split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        assert members[1].split()[0] == group and members[1].split()[-2:] == ["views-app", "1"]
        assert tool("--describe", "--group", group, "--members", "--verbose").splitlines()[1].split()[-1] == \
            f"{topic}(0)"
        state = tool("--describe", "--group", group, "--state").splitlines()[1].split()
        assert state == [group, f"127.0.0.1:{broker.port}", "(0)", "range", "Stable", "1"]
        assert [group, "Stable"] in [ln.split() for ln in tool("--list", "--state").splitlines()]
        assert group not in tool("--list", "--state", "empty,dead").split()
        refused = tool("--reset-offsets", "--group", group, "--all-topics", "--to-earliest", "--execute", code=1)
        assert "inactive" in refused and "Stable" in refused
    finally:
        member.close()
    assert f"{topic}  0          10              10              0" in tool("--describe", "--all-groups", "--offsets")
    exported = tool("--reset-offsets", "--group", group, "--topic", topic, "--to-offset", "3", "--export")
    assert exported.splitlines() == [f"{topic},0,3"]
    (tmp_path / "plan.csv").write_text(exported)
    tool("--reset-offsets", "--group", group, "--from-file", str(tmp_path / "plan.csv"), "--execute")
    with moldau.AdminClient(bootstrap_servers=broker.bootstrap) as admin:
        assert admin.list_consumer_group_offsets(group) == {tp: moldau.OffsetAndMetadata(3, "")}
        assert "Successful" in tool("--delete-offsets", "--group", group, "--topic", topic)
        assert admin.list_consumer_group_offsets(group) == {}
    (tmp_path / "admin.properties").write_text("# the admin client's settings\nrequest.timeout.ms=soon\n")
    assert "request.timeout.ms" in tool("--list", "--command-config", str(tmp_path / "admin.properties"), code=1)
    (tmp_path / "admin.properties").write_text("security.protocol=PLAINTEXT\nclient.id=cc\n")
    assert group in tool("--list", "--command-config", str(tmp_path / "admin.properties")).split()
    assert f"('{group}') was successful" in tool("--delete", "--group", group)


@pytest.mark.slow
def test_static_member_keeps_its_assignment_across_a_restart(broker: BrokerProcess, topic: str) -> None:
    """group.instance.id: close() sends no LeaveGroup, and the same instance rejoins in place (no new member)."""
    produce(broker.bootstrap, topic, make_records(4, tag="static", with_nulls=False))
    conf = {"bootstrap.servers": broker.bootstrap, "group.id": f"static-{topic}", "group.instance.id": "inst-1",
            "auto.offset.reset": "earliest", "session.timeout.ms": 30000, "enable.auto.commit": False}

    async def session() -> tuple[str, set[TopicPartition]]:
        async with Consumer(conf) as consumer:
            consumer.subscribe([topic])
            await consume_n(consumer, 4)
            assert consumer._group is not None
            return consumer._group.member_id, consumer.assignment()

    first_id, first = asyncio.run(session())
    second_id, second = asyncio.run(session())
    assert first == second == {TopicPartition(topic, 0)}
    described = groups_tool("--bootstrap-server", broker.bootstrap, "--describe", "--group", f"static-{topic}",
                            "--json")
    members = json.loads(described.stdout)[0]["members"]
    assert [m["group_instance_id"] for m in members] == ["inst-1"] and first_id != second_id == members[0][
        "consumer_id"]


def test_sync_consumer(broker: BrokerProcess, topic: str) -> None:
    """The blocking facade (moldau.Consumer) over this consumer: subscribe, poll, commit, committed."""
    import moldau

    records = make_records(25, tag="sync")
    produce(broker.bootstrap, topic, records)
    with moldau.Consumer(bootstrap_servers=broker.bootstrap, group_id=f"sync-{topic}",
                         auto_offset_reset="earliest", enable_auto_commit=False) as consumer:
        consumer.subscribe([topic])
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while len(got) < len(records):
            assert time.monotonic() < deadline, f"got {len(got)} records"
            got += consumer.poll(timeout_ms=500)
        assert [(r.key, r.value, r.headers) for r in got] == [(r.key, r.value, r.headers) for r in records]
        consumer.commit()
        assert consumer.committed(TopicPartition(topic, 0)) == len(records)


def test_console_consumer_group_and_include(broker: BrokerProcess, topic: str) -> None:
    """--include with --group: reads both topics, commits on exit; the next run of the group finds nothing new."""
    for suffix in ("x", "y"):
        produce(broker.bootstrap, f"{topic}-{suffix}", make_records(3, tag=suffix, with_nulls=False))
    args = ["--bootstrap-server", broker.bootstrap, "--include", f"{topic}-[xy]", "--group", f"cc-{topic}",
            "--from-beginning", "--property", "print.partition=true"]
    proc = console(*args, "--max-messages", "6")
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err
    assert sorted(out.decode().splitlines()) == sorted(
        f"Partition:0\t{t} value {i} " + "lorem ipsum dolor sit amet " * (i % 7 + 1)
        for t in ("x", "y") for i in range(3))
    again = console(*args, "--timeout-ms", "3000")
    out, err = again.communicate(timeout=90)
    assert again.returncode == 0 and out == b""
    assert err.decode().strip().splitlines()[-1] == "Processed a total of 0 messages"


class _LostLog(_Log):
    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self.events.append(("lost", lost))


@pytest.mark.slow
def test_member_expelled_after_a_blocked_loop_reports_lost_partitions(broker: BrokerProcess, topic: str) -> None:
    """An application that blocks the event loop past session.timeout.ms is expelled: the listener hears
    on_partitions_lost (not revoked), then the consumer rejoins and continues."""
    produce(broker.bootstrap, topic, make_records(6, tag="lost", with_nulls=False))
    listener = _LostLog()
    tp = TopicPartition(topic, 0)

    async def run() -> None:
        async with Consumer(bootstrap_servers=broker.bootstrap, group_id=f"lost-{topic}", session_timeout_ms=6000,
                            heartbeat_interval_ms=500, auto_offset_reset="earliest",
                            enable_auto_commit=False) as consumer:
            consumer.subscribe([topic], listener=listener)
            await consume_n(consumer, 3)
            first_member = consumer._group.member_id if consumer._group else None
            time.sleep(9)  # blocks the loop: no heartbeats, the coordinator expels the member
            deadline = time.monotonic() + 30
            while ("lost", {tp}) not in listener.events or consumer.assignment() != {tp}:
                assert time.monotonic() < deadline, listener.events
                await consumer.getmany(timeout_ms=200)
            assert consumer._group is not None and consumer._group.member_id != first_member

    asyncio.run(run())
    assert [e for e, _ in listener.events] == ["assigned", "lost", "assigned"]


def test_dump_log_reads_a_live_brokers_segment(broker: BrokerProcess, topic: str) -> None:
    # How librdkafka splits the four records into batches is its own affair (fresh-clone runs saw one batch, and
    # four of one record each even with a 5 s linger), and it sends a batch uncompressed when lz4 would not make
    # it smaller (a lone short record). So the codecs the tool prints are checked against the batch headers in
    # the file itself (attributes, low three bits), and at least one batch must be lz4: records 1-3 repeat their
    # words and always shrink.
    produce(broker.bootstrap, topic, make_records(4, tag="dump", with_nulls=False),
            **{"compression.type": "lz4", "linger.ms": 5000})
    segment = broker.partition_dir(topic, 0) / "00000000000000000000.log"
    proc = subprocess.run([sys.executable, "-m", "moldau.tools.dump_log", "--files", str(segment),
                           "--print-data-log"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:2] == [f"Dumping {segment}", "Log starting offset: 0"]
    batches = [ln for ln in lines if ln.startswith("baseOffset: ")]
    assert batches and all("isvalid: true" in b for b in batches), batches
    raw, pos, in_file = segment.read_bytes(), 0, []
    while pos + 61 <= len(raw):  # baseOffset int64, batchLength int32, ... attributes int16 at byte 21
        length, attributes = struct.unpack_from(">i", raw, pos + 8)[0], struct.unpack_from(">h", raw, pos + 21)[0]
        in_file.append(("none", "gzip", "snappy", "lz4", "zstd")[attributes & 7])
        pos += 12 + length
    assert [b.split("compresscodec: ")[1].split()[0] for b in batches] == in_file, batches
    assert "lz4" in in_file, batches
    data = [ln for ln in lines if ln.startswith("| offset: ")]
    assert [ln.split()[2] for ln in data] == ["0", "1", "2", "3"]
    assert data[1].endswith("headerKeys: [index,tag] key: key-1 payload: dump value 1 "
                            + "lorem ipsum dolor sit amet " * 2)


def test_consumer_perf_test_process(broker: BrokerProcess, topic: str) -> None:
    produce(broker.bootstrap, topic, make_records(50, tag="perf", with_nulls=False))
    proc = subprocess.run([sys.executable, "-m", "moldau.tools.consumer_perf_test", "--bootstrap-server",
                           broker.bootstrap, "--topic", topic, "--messages", "50", "--timeout", "20000"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stderr
    header, line = proc.stdout.strip().splitlines()
    assert header.startswith("start.time, end.time, data.consumed.in.MB")
    assert line.split(", ")[4] == "50"


def test_consumer_survives_a_broker_restart(fresh_broker: BrokerProcess, topic: str) -> None:
    """The connection drops mid-stream: the consumer reconnects (backoff) and continues at its position."""
    produce(fresh_broker.bootstrap, topic, make_records(10, tag="before", with_nulls=False))

    async def run() -> list[int]:
        async with Consumer(bootstrap_servers=fresh_broker.bootstrap, auto_offset_reset="earliest",
                            request_timeout_ms=10000) as consumer:
            consumer.assign([TopicPartition(topic, 0)])
            got = [r.offset for r in await consume_n(consumer, 10)]
            await asyncio.to_thread(fresh_broker.restart)
            await asyncio.to_thread(produce, fresh_broker.bootstrap, topic,
                                    make_records(10, tag="after", with_nulls=False))
            got += [r.offset for r in await consume_n(consumer, 10, timeout=60)]
            return got

    assert asyncio.run(run()) == list(range(20))
