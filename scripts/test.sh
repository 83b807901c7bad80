#!/usr/bin/env bash
# The test command: lint (ruff), type check (mypy) and the whole pytest suite, unit and integration.
#
#   bash scripts/test.sh                          # everything
#   bash scripts/test.sh -m 'not slow'            # skip the slow tier
#   bash scripts/test.sh tests/integration/test_kcat.py -k gzip    # one file / one test
#
# Extra arguments go to pytest. Exit status is non-zero if any of the three steps failed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export DEBIAN_FRONTEND=noninteractive PYTHONDONTWRITEBYTECODE=1

# shellcheck source=scripts/_setup.sh
source scripts/_setup.sh
moldau_setup
PY="$MOLDAU_VENV/bin/python"

failed=()

echo "== ruff check ."
"$PY" -m ruff check . || failed+=(ruff)

echo "== mypy"
moldau_typecheck_tree
"$PY" -m mypy || failed+=(mypy)

echo "== pytest"
rc=0
# Two pytest-xdist workers by default (MOLDAU_TEST_WORKERS=N for N, 0 for one process): the first runs the
# integration modules that start brokers, one after another as a serial run would; the other runs the unit tier,
# the docker-compose run and the wheel-install test beside it (tests/conftest.py). No two broker clusters run at
# once: parallel clusters make kafka-python 3.0.12's group race (README, "Running tests") far likelier.
workers="${MOLDAU_TEST_WORKERS:-2}"
"$PY" -m pytest -q -p no:cacheprovider --durations=15 -rfEs -n "$workers" "$@" </dev/null || rc=$?
if [ "$rc" -eq 5 ]; then
    echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!" >&2
    echo "!! pytest collected NO tests (exit 5). That is a failure, not a pass. !!" >&2
    echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!" >&2
    failed+=("pytest (no tests collected)")
elif [ "$rc" -ne 0 ]; then
    failed+=("pytest (exit $rc)")
fi

if [ "${#failed[@]}" -gt 0 ]; then
    printf 'FAILED steps: %s\n' "${failed[*]}" >&2
    exit 1
fi
# Nothing is printed after pytest on success: its summary stays the closing line.
