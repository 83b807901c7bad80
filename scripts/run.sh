#!/usr/bin/env bash
# Starts one Moldau broker on 127.0.0.1:9092 with its data under ./data (config/server.properties).
# Extra arguments are passed to the broker, e.g.: bash scripts/run.sh --override num.partitions=3
# Stop it with Ctrl-C (or SIGTERM): it shuts down cleanly.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export DEBIAN_FRONTEND=noninteractive

# shellcheck source=scripts/_setup.sh
source scripts/_setup.sh
moldau_setup

mkdir -p data
cat >&2 <<'USAGE'
Starting Moldau on 127.0.0.1:9092 (data in ./data, metrics on http://127.0.0.1:9404/metrics).
Try it from another terminal:
  produce (key:value per line, Ctrl-D ends):  kcat -b 127.0.0.1:9092 -P -t test -K:
  consume from the beginning:                  kcat -b 127.0.0.1:9092 -C -t test -o beginning -e -f '%k:%s @%o\n'
  list brokers and topics:                     kcat -b 127.0.0.1:9092 -L
USAGE
exec "$MOLDAU_VENV/bin/python" -m broker config/server.properties --override "log.dirs=$PWD/data" "$@"
