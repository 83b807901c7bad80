"""kcat (librdkafka 2.0.2, Debian's package) as a subprocess against a real broker."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from .clients import CODECS, kp_consume, norm_headers
from .harness import BrokerProcess

pytestmark = pytest.mark.integration

KCAT_TIMEOUT_S = 60


def kcat(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    exe = shutil.which("kcat")
    assert exe, "kcat is not installed (apt-get install kcat); scripts/test.sh installs it when run as root"
    proc = subprocess.run(
        [exe, *args],
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        timeout=KCAT_TIMEOUT_S,
    )
    assert proc.returncode == 0, (
        f"kcat {' '.join(args)} exited {proc.returncode}\nstdout: {proc.stdout[-2000:]!r}\n"
        f"stderr: {proc.stderr[-4000:].decode(errors='replace')}"
    )
    return proc


@pytest.mark.parametrize("codec", CODECS)
def test_produce_consume_every_codec(broker: BrokerProcess, topic: str, codec: str) -> None:
    n = 100
    lines = b"".join(b"key-%d:value %d %s\n" % (i, i, b"abcdefgh" * (i % 5)) for i in range(n))
    kcat(
        "-b", broker.bootstrap, "-P", "-t", topic, "-p", "0", "-z", codec, "-K:",
        "-H", "source=kcat", "-H", f"codec={codec}",
        "-X", "linger.ms=20",
        stdin=lines,
    )  # fmt: skip
    out = kcat(
        "-b", broker.bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q",
        "-f", "%k|%s|%o|%p|%h\n",
    ).stdout  # fmt: skip
    rows = out.decode().splitlines()
    assert len(rows) == n, rows[-5:]
    for i, row in enumerate(rows):
        key, value, offset, partition, headers = row.split("|")
        assert key == f"key-{i}"
        assert value == f"value {i} " + "abcdefgh" * (i % 5)
        assert (int(offset), int(partition)) == (i, 0)
        assert headers == f"source=kcat,codec={codec}"


def test_kcat_records_read_by_kafka_python(broker: BrokerProcess, topic: str) -> None:
    kcat(
        "-b", broker.bootstrap, "-P", "-t", topic, "-p", "0", "-z", "zstd", "-K:", "-H", "h1=one",
        stdin=b"a:1\nb:2\nc:3\n",
    )  # fmt: skip
    got = kp_consume(broker.bootstrap, topic, 3)
    assert [(m.offset, m.key, m.value) for m in got] == [(0, b"a", b"1"), (1, b"b", b"2"), (2, b"c", b"3")]
    assert all(norm_headers(m.headers) == [("h1", b"one")] for m in got)


def test_kcat_metadata_listing(broker: BrokerProcess, topic: str) -> None:
    kcat("-b", broker.bootstrap, "-P", "-t", topic, "-p", "0", stdin=b"hello\n")

    text = kcat("-b", broker.bootstrap, "-L").stdout.decode()
    assert f"broker {broker.broker_id} at {broker.bootstrap}" in text, text
    assert f'topic "{topic}" with 1 partitions' in text, text

    meta = json.loads(kcat("-b", broker.bootstrap, "-L", "-J", "-t", topic).stdout)
    assert meta["brokers"] == [{"id": broker.broker_id, "name": broker.bootstrap}]
    assert meta["controllerid"] == broker.broker_id
    (t,) = meta["topics"]
    assert t["topic"] == topic and "error" not in t
    (p,) = t["partitions"]
    assert p["partition"] == 0 and p["leader"] == broker.broker_id
    assert p["replicas"] == [{"id": broker.broker_id}] and p["isrs"] == [{"id": broker.broker_id}]
