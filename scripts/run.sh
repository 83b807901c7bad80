#!/usr/bin/env bash
# Starts a local Moldau cluster: ZooKeeper on 127.0.0.1:2181 and three brokers on 127.0.0.1:9092-9094 (ids 1-3,
# metrics on 9404-9406), everything under ./data (ZooKeeper in data/zookeeper, broker N in data/broker-N, each
# process's output in data/<name>.log). It prints the addresses and kcat commands to try.
# Extra arguments go to the launcher, e.g.: bash scripts/run.sh --brokers 1 --override num.partitions=3
# Every port is checked first: a busy one is refused with its name, nothing starts (--port 0 picks free ports).
# Stop it with Ctrl-C, SIGTERM or SIGHUP (or by closing the pipe it writes to): brokers shut down one by one
# (controlled shutdown), then ZooKeeper. If any process exits on its own, the launcher says so and stops the rest;
# the processes die with the launcher even if it is SIGKILLed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export DEBIAN_FRONTEND=noninteractive

# shellcheck source=scripts/_setup.sh
source scripts/_setup.sh
moldau_setup

mkdir -p data
exec "$MOLDAU_VENV/bin/python" -m moldau.broker.launcher --brokers 3 --data "$PWD/data" "$@"
