# shellcheck shell=bash
# Shared setup for scripts/run.sh and scripts/test.sh. Source it from the repository root:
#
#     source scripts/_setup.sh
#     moldau_setup
#
# It installs the system tools the tests use (kcat, ZooKeeper, a Java runtime, docker.io, docker-compose,
# debootstrap, Prometheus) when they are missing and we are root, creates .venv with Python >= 3.11 and runs
# `pip install -e '.[test,spark]'` only when pyproject.toml changed since the last successful install (a stamp
# file inside .venv records its hash).
# Nothing here prompts: it must work with CI=true and no stdin.
# The spark extra's pyspark comes from PyPI as a ~456 MB source archive (no wheel): with an empty pip cache it adds
# ~40 s here (59 s for '.[test,spark]' against 19 s for '.[test]', docs/spark.md); pip keeps the built wheel in its
# cache (~/.cache/pip/wheels), so reinstalls after a pyproject.toml change take seconds.

MOLDAU_VENV="${MOLDAU_VENV:-.venv}"
MOLDAU_STAMP="$MOLDAU_VENV/.moldau-install-stamp"

_moldau_log() { printf '[setup] %s\n' "$*" >&2; }

# Debian package name -> command or file that shows it is installed.
_moldau_missing_system_packages() {
    local missing=()
    command -v kcat >/dev/null 2>&1 || missing+=(kcat)
    [ -x /usr/share/zookeeper/bin/zkServer.sh ] || command -v zkServer.sh >/dev/null 2>&1 || missing+=(zookeeper)
    command -v java >/dev/null 2>&1 || missing+=(default-jre-headless)
    # ops checks: `docker-compose config -q` on docker-compose.yml; promtool and a real Prometheus (tests/ops).
    command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
    # The compose test (tests/ops/test_compose.py): its own dockerd, and a base image made with debootstrap.
    { command -v dockerd && command -v docker; } >/dev/null 2>&1 || missing+=(docker.io)
    command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
    { command -v prometheus && command -v promtool; } >/dev/null 2>&1 || missing+=(prometheus)
    if [ "${#missing[@]}" -gt 0 ]; then
        printf '%s\n' "${missing[@]}"
    fi
}

moldau_system_packages() {
    local missing
    missing="$(_moldau_missing_system_packages | tr '\n' ' ')"
    missing="${missing% }"
    if [ -z "$missing" ]; then
        return 0
    fi
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
        _moldau_log "installing system packages: $missing"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -q </dev/null
        # shellcheck disable=SC2086  # word splitting of the package list is intended
        apt-get install -y -q --no-install-recommends $missing </dev/null
    else
        _moldau_log "WARNING: missing system packages: $missing"
        _moldau_log "WARNING: install them with: sudo apt-get install -y $missing"
        _moldau_log "WARNING: tests that need them will FAIL (they are not skipped)."
    fi
}

# Prints the first interpreter that is Python >= 3.11, or fails.
_moldau_find_python() {
    local candidate
    for candidate in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
        [ -n "$candidate" ] || continue
        command -v "$candidate" >/dev/null 2>&1 || continue
        if "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
            command -v "$candidate"
            return 0
        fi
    done
    return 1
}

_moldau_install_stamp() {
    # Hash of everything that decides what `pip install -e '.[test,spark]'` installs, plus the venv's Python.
    {
        cat pyproject.toml
        "$MOLDAU_VENV/bin/python" -c 'import sys; print(sys.version)'
    } | sha256sum | cut -d' ' -f1
}

moldau_venv() {
    local python
    if [ -x "$MOLDAU_VENV/bin/python" ] && ! "$MOLDAU_VENV/bin/python" -c \
        'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
        _moldau_log "$MOLDAU_VENV has Python older than 3.11; recreating it"
        rm -rf "$MOLDAU_VENV"
    fi
    if [ ! -x "$MOLDAU_VENV/bin/python" ]; then
        if ! python="$(_moldau_find_python)"; then
            _moldau_log "ERROR: Moldau needs Python >= 3.11; none found (tried \$PYTHON, python3.13, python3.12, python3.11, python3)."
            _moldau_log "ERROR: on Debian/Ubuntu: apt-get install -y python3 python3-venv (Debian 12 ships 3.11)."
            return 1
        fi
        _moldau_log "creating $MOLDAU_VENV with $python ($("$python" -c 'import sys; print(sys.version.split()[0])'))"
        if ! "$python" -m venv "$MOLDAU_VENV"; then
            rm -rf "$MOLDAU_VENV"
            if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
                _moldau_log "venv failed; installing python3-venv"
                export DEBIAN_FRONTEND=noninteractive
                apt-get update -q </dev/null
                apt-get install -y -q python3-venv </dev/null
                "$python" -m venv "$MOLDAU_VENV"
            else
                _moldau_log "ERROR: '$python -m venv' failed; install python3-venv (apt-get install -y python3-venv)."
                return 1
            fi
        fi
    fi
    local want have=""
    want="$(_moldau_install_stamp)"
    [ -f "$MOLDAU_STAMP" ] && have="$(cat "$MOLDAU_STAMP")"
    if [ "$want" != "$have" ] || [ ! -x "$MOLDAU_VENV/bin/moldau-server" ]; then
        _moldau_log "installing Moldau and test dependencies into $MOLDAU_VENV (pyproject.toml changed)"
        rm -f "$MOLDAU_STAMP"
        local pip_log="$MOLDAU_VENV/pip-install.log"
        if ! PIP_DISABLE_PIP_VERSION_CHECK=1 "$MOLDAU_VENV/bin/python" -m pip install --no-input -e '.[test,spark]' \
            </dev/null >"$pip_log" 2>&1; then
            tail -n 40 "$pip_log" >&2
            _moldau_log "ERROR: pip install -e '.[test,spark]' failed (full log: $pip_log)"
            return 1
        fi
        echo "$want" >"$MOLDAU_STAMP"
    fi
}

moldau_setup() {
    moldau_system_packages
    moldau_venv
}

# mypy cannot follow setuptools' editable import hook, so it type-checks a tree of symlinks that has the
# installed package's shape: build/typecheck/moldau/ = client/'s entries + broker/, protocol/, storage/, testing/.
# Rebuilt on every call (cheap), so new files are always seen; mypy reads it through mypy_path.
moldau_typecheck_tree() {
    local tree=build/typecheck/moldau entry
    rm -rf build/typecheck
    mkdir -p "$tree"
    for entry in client/*; do
        case "$entry" in *__pycache__*) continue ;; esac
        ln -s "../../../$entry" "$tree/$(basename "$entry")"
    done
    for entry in broker protocol storage testing; do
        ln -s "../../../$entry" "$tree/$entry"
    done
}
