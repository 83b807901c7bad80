"""Micro-benchmark of the config APIs on a standalone broker's real in-process components (tests' handler_env):
DescribeConfigs of a topic (all configs, synonyms, documentation) and of the broker, and an
IncrementalAlterConfigs that rewrites the metadata file and re-applies the config to 10 partitions. Each call
goes through the real request decoder and strict response encoder/decoder, as on the wire (most of the
time: ~115 broker entries with synonyms are encoded and decoded again).

    .venv/bin/python bench/configs.py            # best of 5 rounds, microseconds per request
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from moldau.protocol.api import ApiKey  # noqa: E402
from tests.unit.broker.apis.handler_env import Env, make_env  # noqa: E402

DESCRIBE_TOPIC = {"resources": [{"resource_type": 2, "resource_name": "t", "configuration_keys": None}],
                  "include_synonyms": True, "include_documentation": True}
DESCRIBE_BROKER = {"resources": [{"resource_type": 4, "resource_name": "0", "configuration_keys": None}],
                   "include_synonyms": True, "include_documentation": False}


def alter(i: int) -> dict[str, object]:
    return {"resources": [{"resource_type": 2, "resource_name": "t", "configs": [
        {"name": "retention.ms", "config_operation": 0, "value": str(60000 + i)}]}], "validate_only": False}


async def timed(env: Env, key: int, version: int, bodies: list[dict[str, object]]) -> float:
    start = time.perf_counter()
    for body in bodies:
        await env.call(key, version, body)
    return (time.perf_counter() - start) / len(bodies) * 1e6


async def main(rounds: int, n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = make_env(Path(tmp))
        await env.create_topic("t", partitions=10)
        cases = {
            "DescribeConfigs v4 topic (all, synonyms, docs)": (ApiKey.DESCRIBE_CONFIGS, 4, [DESCRIBE_TOPIC] * n),
            "DescribeConfigs v4 broker (all, synonyms)": (ApiKey.DESCRIBE_CONFIGS, 4, [DESCRIBE_BROKER] * n),
            "IncrementalAlterConfigs v1 topic (10 partitions)": (ApiKey.INCREMENTAL_ALTER_CONFIGS, 1,
                                                                 [alter(i) for i in range(n)]),
        }
        for name, (key, version, bodies) in cases.items():
            best = min([await timed(env, key, version, bodies) for _ in range(rounds)])
            print(f"{name:52s} {best:9.0f} us/request")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("-n", type=int, default=200, help="requests per round")
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.n))
