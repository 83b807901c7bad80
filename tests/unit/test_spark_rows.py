"""Fetched records to the source's Arrow record batches and tuples (Spark's Kafka-source schema)."""

from __future__ import annotations

import datetime as dt

import pytest

from moldau.fetcher import ConsumerRecord

pa = pytest.importorskip("pyarrow", reason="pyarrow comes with the spark extra: pip install -e '.[test,spark]'")

from moldau.spark.rows import arrow_schema, schema_ddl, to_arrow, to_tuples  # noqa: E402

RECORDS = [ConsumerRecord("t", 3, 10, 1_700_000_000_123, 0, b"k", b"v", [("h", b"x"), ("n", None)]),
           ConsumerRecord("t", 3, 12, 1_700_000_000_456, 1, None, None, [])]


def test_arrow_batch_has_sparks_kafka_schema_and_values() -> None:
    schema = arrow_schema(True)
    batch = to_arrow(RECORDS, True, schema)
    assert batch.schema == schema
    assert [f.name for f in schema] == [c.split()[0] for c in schema_ddl(True).split(", ")][:7] + ["headers"]
    rows = batch.to_pylist()
    assert [(r["key"], r["value"], r["topic"], r["partition"], r["offset"], r["timestampType"]) for r in rows] == \
        [(b"k", b"v", "t", 3, 10, 0), (None, None, "t", 3, 12, 1)]
    assert rows[0]["timestamp"] == dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=dt.UTC)
    assert rows[0]["headers"] == [{"key": "h", "value": b"x"}, {"key": "n", "value": None}]
    assert rows[1]["headers"] == []


def test_tuples_match_the_arrow_rows() -> None:
    rows = list(to_tuples(RECORDS, False))
    assert rows[0][:5] == (b"k", b"v", "t", 3, 10) and len(rows[0]) == 7
    assert rows[0][5] == dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=dt.UTC)
    assert list(to_tuples(RECORDS, True))[0][7] == [("h", b"x"), ("n", None)]
