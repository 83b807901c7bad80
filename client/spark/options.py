"""Options of the ``moldau`` Spark data source, by the names and rules of Spark's Kafka source.

Pure parsing (no Spark, no network), so every rule is unit-testable. Spark's options are case-insensitive:
keys are compared lower-cased; ``kafka.*`` keys keep their case after the prefix (Kafka's names are lower-case).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

EARLIEST = -2  # Spark's JSON offsets use Kafka's ListOffsets specials
LATEST = -1

# kafka.* settings Spark's Kafka source rejects because the source itself manages them.
_REJECTED_KAFKA = ("group.id", "auto.offset.reset", "key.deserializer", "value.deserializer",
                   "enable.auto.commit", "interceptor.classes")


class SourceOptionError(ValueError):
    """A bad data source option; the message names the option."""


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Where a range starts or ends: ``earliest``/``latest``, per-partition offsets, or timestamps.

    ``offsets``: {topic: {partition: offset}} (offset may be EARLIEST/LATEST); ``timestamps`` likewise with
    millisecond timestamps; ``timestamp``: one timestamp for every partition.
    """

    kind: str  # "earliest" | "latest" | "offsets" | "timestamps" | "timestamp"
    offsets: dict[str, dict[int, int]] = field(default_factory=dict)
    timestamp: int = 0


@dataclass(frozen=True, slots=True)
class Subscription:
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assign: dict[str, tuple[int, ...]] | None = None


@dataclass(frozen=True, slots=True)
class SourceOptions:
    bootstrap_servers: str
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    fail_on_data_loss: bool
    include_headers: bool
    min_partitions: int | None
    max_offsets_per_trigger: int | None
    timestamp_strategy: str  # startingOffsetsByTimestampStrategy: "error" | "latest"
    commit_group: str | None
    client_config: dict[str, str]


def _lower(options: Mapping[str, Any]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def client_config(options: Mapping[str, str]) -> dict[str, str]:
    """The ``kafka.*`` options without the prefix: settings for Moldau's client."""
    out: dict[str, str] = {}
    for key, value in options.items():
        if not key.startswith("kafka."):
            continue
        name = key[len("kafka."):]
        if name in _REJECTED_KAFKA:
            raise SourceOptionError(f"Kafka option 'kafka.{name}' is not supported: the moldau source manages it"
                                    " (as Spark's Kafka source does)")
        out[name] = value
    if not out.get("bootstrap.servers"):
        raise SourceOptionError("Option 'kafka.bootstrap.servers' must be specified for configuring the moldau "
                                "source (host:port[,host:port...])")
    return out


def _bool(options: Mapping[str, str], key: str, default: bool) -> bool:
    value = options.get(key.lower())
    if value is None:
        return default
    if value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise SourceOptionError(f"Option '{key}' must be true or false, got {value!r}")


def _positive_int(options: Mapping[str, str], key: str) -> int | None:
    value = options.get(key.lower())
    if value is None:
        return None
    try:
        n = int(value)
    except ValueError:
        raise SourceOptionError(f"Option '{key}' must be a positive integer, got {value!r}") from None
    if n <= 0:
        raise SourceOptionError(f"Option '{key}' must be a positive integer, got {value!r}")
    return n


def _json_object(key: str, text: str) -> dict[str, Any]:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SourceOptionError(f"Option '{key}' is not valid JSON ({exc.msg}): {text!r}") from None
    if not isinstance(obj, dict):
        raise SourceOptionError(f"Option '{key}' must be a JSON object, got {text!r}")
    return obj


def parse_subscription(options: Mapping[str, str]) -> Subscription:
    given = [k for k in ("subscribe", "subscribepattern", "assign") if k in options]
    if len(given) != 1:
        raise SourceOptionError("Exactly one of the options 'subscribe', 'subscribePattern', 'assign' must be "
                                f"specified for the moldau source (got {len(given)})")
    key = given[0]
    value = options[key]
    if key == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise SourceOptionError(f"No topics to subscribe to in option 'subscribe': {value!r}")
        return Subscription(topics=topics)
    if key == "subscribepattern":
        if not value.strip():
            raise SourceOptionError("Pattern to subscribe is empty in option 'subscribePattern'")
        try:
            re.compile(value)
        except re.error as exc:
            raise SourceOptionError(f"Option 'subscribePattern' is not a valid regex: {exc}") from None
        return Subscription(pattern=value)
    obj = _json_object("assign", value)
    assign: dict[str, tuple[int, ...]] = {}
    for topic, parts in obj.items():
        if not isinstance(parts, list) or not all(isinstance(p, int) for p in parts):
            raise SourceOptionError(f"Option 'assign' expects {{\"topic\":[0,1]}}, got {value!r}")
        assign[topic] = tuple(parts)
    return Subscription(assign=assign)


def _offsets_json(key: str, text: str) -> dict[str, dict[int, int]]:
    out: dict[str, dict[int, int]] = {}
    for topic, parts in _json_object(key, text).items():
        if not isinstance(parts, dict):
            raise SourceOptionError(f"Option '{key}' expects {{\"topic\":{{\"0\":23}}}}, got {text!r}")
        try:
            out[topic] = {int(p): int(o) for p, o in parts.items()}
        except (TypeError, ValueError):
            raise SourceOptionError(f"Option '{key}' expects integer partitions and offsets, got {text!r}") from None
    return out


def parse_offset_spec(options: Mapping[str, str], which: str, default: str, *, streaming: bool) -> OffsetSpec:
    """``which`` is "starting" or "ending". Timestamp options win over offsets, as in Spark."""
    ts_key, by_ts_key, off_key = f"{which}Timestamp", f"{which}OffsetsByTimestamp", f"{which}Offsets"
    if ts_key.lower() in options:
        try:
            return OffsetSpec("timestamp", timestamp=int(options[ts_key.lower()]))
        except ValueError:
            raise SourceOptionError(f"Option '{ts_key}' must be a timestamp in milliseconds, "
                                    f"got {options[ts_key.lower()]!r}") from None
    if by_ts_key.lower() in options:
        return OffsetSpec("timestamps", offsets=_offsets_json(by_ts_key, options[by_ts_key.lower()]))
    text = options.get(off_key.lower(), default).strip()
    if text.lower() in ("earliest", "latest"):
        spec = OffsetSpec(text.lower())
    else:
        spec = OffsetSpec("offsets", offsets=_offsets_json(off_key, text))
    _check_spec(spec, which, off_key, streaming)
    return spec


def _check_spec(spec: OffsetSpec, which: str, key: str, streaming: bool) -> None:
    # Spark's rules: a batch query cannot start at latest nor end at earliest.
    if streaming or (which == "starting" and spec.kind == "earliest") or (which == "ending" and spec.kind == "latest"):
        return
    bad = "latest" if which == "starting" else "earliest"
    special = LATEST if which == "starting" else EARLIEST
    if spec.kind == bad:
        raise SourceOptionError(f"{key} for batch queries cannot be {bad}")
    for topic, parts in spec.offsets.items():
        for p, off in parts.items():
            if off == special:
                raise SourceOptionError(f"{key} for {topic}-{p} for batch queries cannot be {bad} ({special})")


def parse(options: Mapping[str, Any], *, streaming: bool) -> SourceOptions:
    """All read options; ``streaming`` picks the defaults (streaming starts at latest, batch at earliest)."""
    opts = _lower(options)
    if streaming and ("endingoffsets" in opts or "endingtimestamp" in opts or "endingoffsetsbytimestamp" in opts):
        raise SourceOptionError("Ending offset options (endingOffsets, endingTimestamp, endingOffsetsByTimestamp) "
                                "are not valid in streaming queries")
    if not streaming and "maxoffsetspertrigger" in opts:
        raise SourceOptionError("Option 'maxOffsetsPerTrigger' is only valid in streaming queries")
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").lower()
    if strategy not in ("error", "latest"):
        raise SourceOptionError(f"Option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', "
                                f"got {strategy!r}")
    cfg = client_config({k: v for k, v in _raw_kafka(options).items()})
    return SourceOptions(
        bootstrap_servers=cfg["bootstrap.servers"],
        subscription=parse_subscription(opts),
        starting=parse_offset_spec(opts, "starting", "latest" if streaming else "earliest", streaming=streaming),
        ending=parse_offset_spec(opts, "ending", "latest", streaming=streaming),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        include_headers=_bool(opts, "includeHeaders", False),
        min_partitions=_positive_int(opts, "minPartitions"),
        max_offsets_per_trigger=_positive_int(opts, "maxOffsetsPerTrigger"),
        timestamp_strategy=strategy,
        commit_group=opts.get("commitoffsetstogroup") or None,
        client_config=cfg,
    )


def _raw_kafka(options: Mapping[str, Any]) -> dict[str, str]:
    # kafka.* keys keep their case after the prefix (only the prefix is matched case-insensitively).
    return {"kafka." + str(k)[6:]: str(v) for k, v in options.items() if str(k).lower().startswith("kafka.")}


@dataclass(frozen=True, slots=True)
class SinkOptions:
    topic: str | None
    client_config: dict[str, str]


def parse_sink(options: Mapping[str, Any]) -> SinkOptions:
    opts = _lower(options)
    cfg = client_config(_raw_kafka(options))
    return SinkOptions(topic=opts.get("topic") or None, client_config=cfg)
