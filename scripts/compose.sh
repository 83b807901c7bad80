#!/usr/bin/env bash
# docker-compose.yml with one command, also on a machine that cannot pull images:
#
#   bash scripts/compose.sh up        # to healthy; prints the bootstrap servers
#   bash scripts/compose.sh ps        # (any other docker-compose command: logs, exec, kill, ...)
#   bash scripts/compose.sh down      # containers and networks; `down -v` also the data volumes
#   bash scripts/compose.sh purge     # down -v, then delete the private dockerd's data root (the image cache)
#
# `up` uses the machine's Docker when one answers (DOCKER_HOST or /var/run/docker.sock); otherwise (as root) it
# starts a private dockerd: its data root (images, build cache, volumes) is $MOLDAU_DOCKER_CACHE/data, its socket
# $MOLDAU_DOCKER_CACHE/run/docker.sock, and `down` stops it and removes what it set up on the host (its iptables
# chains and rules, bridges, mounts; the FORWARD policy as it was). When the images cannot be pulled
# (MOLDAU_COMPOSE_MODE=auto tries; =registry or =local force a mode), every image is built locally from a Debian
# base made with debootstrap (ops/local/), the Moldau image from wheels built on the host; Grafana is not in
# Debian and is left out in that mode. Images are built when missing, Moldau's also when its sources changed
# (`up --build` forces it).
#
# Settings (environment): MOLDAU_DOCKER_CACHE (/tmp/moldau-docker-cache), MOLDAU_COMPOSE_PROJECT (moldau),
# MOLDAU_COMPOSE_MODE (auto), MOLDAU_COMPOSE_TIMEOUT (seconds to healthy, 300), MOLDAU_COMPOSE_LOCK_WAIT (seconds
# to wait for another run's private dockerd to go, 0), and docker-compose.yml's MOLDAU_BROKER_{1,2,3}_PORT,
# MOLDAU_PROMETHEUS_PORT, MOLDAU_GRAFANA_PORT (remembered by `up` for the later commands).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PROG="compose.sh"
CACHE="${MOLDAU_DOCKER_CACHE:-/tmp/moldau-docker-cache}"
RUN="$CACHE/run"               # socket, pid file, exec-root (short path: unix sockets), state
STATE="$RUN/state"
PROJECT="${MOLDAU_COMPOSE_PROJECT:-moldau}"
MODE="${MOLDAU_COMPOSE_MODE:-auto}"
TIMEOUT="${MOLDAU_COMPOSE_TIMEOUT:-300}"
LOCK_WAIT="${MOLDAU_COMPOSE_LOCK_WAIT:-0}"
BASE_IMAGE="${MOLDAU_LOCAL_BASE:-moldau-local-base:bookworm}"
PORT_VARS=(MOLDAU_BROKER_1_PORT MOLDAU_BROKER_2_PORT MOLDAU_BROKER_3_PORT MOLDAU_PROMETHEUS_PORT MOLDAU_GRAFANA_PORT)
# Docker's iptables chains (Docker 20.10 to 28), per table; removed with the rules that jump to them.
FILTER_CHAINS=(DOCKER-USER DOCKER-FORWARD DOCKER-BRIDGE DOCKER-CT DOCKER-ISOLATION-STAGE-1 DOCKER-ISOLATION-STAGE-2
               DOCKER-INTERNAL DOCKER)

say() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() { printf '%s: error: %s\n' "$PROG" "$*" >&2; exit 1; }
usage() { printf 'usage: bash scripts/compose.sh up [--build] | down [-v] | purge | ps | logs | <docker-compose command>\n' >&2; exit 2; }

# ------------------------------------------------------------------------------------------------ state
# One `key=value` a line; read back with `state_get`.
state_get() { [[ -f "$STATE" ]] && sed -n "s/^$1=//p" "$STATE" | tail -n1 || true; }
state_set() { mkdir -p "$RUN"; printf '%s=%s\n' "$1" "$2" >>"$STATE"; }

load_state() {
    # The settings `up` ran with, for ps/logs/down/... run later without them.
    local v value
    [[ -f "$STATE" ]] || return 0
    PROJECT="$(state_get project)"; MODE="$(state_get mode)"
    for v in "${PORT_VARS[@]}"; do
        value="$(state_get "$v")"
        [[ -n "$value" ]] && export "$v=$value"
    done
    if [[ "$(state_get own_dockerd)" == 1 ]]; then
        export DOCKER_HOST="unix://$RUN/docker.sock"
    fi
}

pid_alive() { [[ -n "$1" ]] && kill -0 "$1" 2>/dev/null; }

# ------------------------------------------------------------------------------------------------ docker
docker_answers() { timeout 20 docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

compose() {
    local files=(-f "$ROOT/docker-compose.yml")
    [[ "$MODE" == local ]] && files+=(-f "$ROOT/ops/local/docker-compose.local.yml")
    (cd "$ROOT" && COMPOSE_HTTP_TIMEOUT="${COMPOSE_HTTP_TIMEOUT:-120}" MOLDAU_LOCAL_BASE="$BASE_IMAGE" \
        docker-compose -p "$PROJECT" "${files[@]}" "$@")
}

services() {
    # Grafana comes from a registry only (not in Debian): the local mode runs the others.
    if [[ "$MODE" == local ]]; then echo zookeeper broker-1 broker-2 broker-3 prometheus
    else echo zookeeper broker-1 broker-2 broker-3 prometheus grafana; fi
}

start_dockerd() {
    command -v dockerd >/dev/null && command -v docker >/dev/null \
        || die "no Docker answers and dockerd is not installed (Debian: apt-get install docker.io docker-compose)"
    [[ "$(id -u)" == 0 ]] || die "no Docker answers, and starting a private dockerd needs root"
    mkdir -p "$CACHE/data" "$RUN"
    # The lock is held by dockerd itself (it inherits fd 9): one private dockerd per cache, also against
    # the tests' own runs.
    exec 9>"$CACHE/lock"
    if ! flock -w "$LOCK_WAIT" 9; then
        die "another run's dockerd uses $CACHE (lock $CACHE/lock): stop it with its 'down', or set MOLDAU_DOCKER_CACHE"
    fi
    rm -rf "$RUN"; mkdir -p "$RUN"
    # What `down` restores: the FORWARD policies and ip_forward (dockerd changes them), and whether another
    # dockerd shares the Docker chains.
    state_set project "$PROJECT"
    state_set own_dockerd 1
    state_set forward_policy "$(iptables -S FORWARD 2>/dev/null | sed -n 's/^-P FORWARD //p')"
    state_set forward6_policy "$(ip6tables -S FORWARD 2>/dev/null | sed -n 's/^-P FORWARD //p')"
    state_set ip_forward "$(cat /proc/sys/net/ipv4/ip_forward 2>/dev/null || true)"
    local t0=$SECONDS
    setsid dockerd --data-root "$CACHE/data" --exec-root "$RUN/x" --pidfile "$RUN/dockerd.pid" \
        -H "unix://$RUN/docker.sock" --bridge=none </dev/null >"$CACHE/dockerd.log" 2>&1 &
    local pid=$!
    exec 9>&-
    state_set dockerd_pid "$pid"
    export DOCKER_HOST="unix://$RUN/docker.sock"
    until docker_answers; do
        pid_alive "$pid" || { tail -n 15 "$CACHE/dockerd.log" >&2; stop_dockerd; die "dockerd exited (log: $CACHE/dockerd.log)"; }
        if (( SECONDS - t0 > 60 )); then
            tail -n 15 "$CACHE/dockerd.log" >&2; stop_dockerd; die "dockerd did not answer within 60 s"
        fi
        sleep 0.5
    done
    say "private dockerd (pid $pid) on $DOCKER_HOST, data root $CACHE/data, up in $((SECONDS - t0)) s"
    # Containers of other projects in the reused data root (a killed earlier run): restart policies would bring
    # them back with the daemon.
    local others
    others="$(docker ps -a --filter "label=com.docker.compose.project" \
        --format '{{.ID}} {{.Label "com.docker.compose.project"}}' | awk -v p="$PROJECT" '$2 != p {print $1}')"
    [[ -n "$others" ]] && docker rm -f -v $others >/dev/null
    docker network prune -f >/dev/null
    docker image prune -f >/dev/null
}

other_dockerd_running() {
    local own="$1" pid
    for pid in $(pgrep -x dockerd || true); do
        [[ "$pid" != "$own" ]] && return 0
    done
    return 1
}

delete_docker_iptables() {
    # Rules in the built-in chains that jump to Docker's chains or name our bridges, then the chains.
    local cmd table line chain
    for cmd in iptables ip6tables; do
        command -v "$cmd" >/dev/null || continue
        for table in filter nat raw mangle; do
            "$cmd" -w 5 -t "$table" -S >/dev/null 2>&1 || continue
            "$cmd" -w 5 -t "$table" -S | while read -r line; do
                # shellcheck disable=SC2086
                set -- $line
                [[ "$1" == -A && "$2" != DOCKER* ]] || continue
                if [[ "$line" == *DOCKER* || ( -n "${BRIDGES:-}" && "$line" =~ $BRIDGES ) ]]; then
                    shift
                    "$cmd" -w 5 -t "$table" -D "$@" 2>/dev/null || true
                fi
            done
            for chain in $("$cmd" -w 5 -t "$table" -S | awk '$1 == "-N" && $2 ~ /^DOCKER/ {print $2}'); do
                "$cmd" -w 5 -t "$table" -F "$chain" 2>/dev/null || true
            done
            for chain in $("$cmd" -w 5 -t "$table" -S | awk '$1 == "-N" && $2 ~ /^DOCKER/ {print $2}'); do
                "$cmd" -w 5 -t "$table" -X "$chain" 2>/dev/null || true
            done
        done
    done
}

stop_dockerd() {
    local pid bridges net point
    pid="$(state_get dockerd_pid)"
    # The bridges of the networks it made (br-<id[:12]>), asked while it still answers.
    bridges="$(state_get bridges)"
    if pid_alive "$pid"; then
        for net in $(timeout 20 docker network ls -q --no-trunc --filter type=custom 2>/dev/null || true); do
            bridges="$bridges br-${net:0:12}"
        done
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 60); do pid_alive "$pid" || break; sleep 0.5; done
        if pid_alive "$pid"; then say "dockerd (pid $pid) did not stop in 30 s: killing it"; kill -KILL "$pid" || true; fi
        for _ in $(seq 20); do pid_alive "$pid" || break; sleep 0.5; done
    fi
    # containerd and shims under our exec-root that outlived it
    for pid in $(pgrep -f -- "$RUN/x" || true); do kill -KILL "$pid" 2>/dev/null || true; done
    for net in $bridges; do
        [[ -e "/sys/class/net/$net" ]] && ip link delete "$net" 2>/dev/null || true
    done
    # Its mounts (netns bind mounts under the exec-root; overlays under the data root if it was killed): deepest first.
    awk -v a="$RUN/" -v b="$CACHE/data/" 'index($5, a) == 1 || index($5, b) == 1 {print length($5), $5}' \
        /proc/self/mountinfo | sort -rn | cut -d' ' -f2- | while read -r point; do
        umount -l "$point" 2>/dev/null || true
    done
    if ! other_dockerd_running ""; then
        BRIDGES="$(echo "$bridges" | xargs | tr ' ' '|')"
        delete_docker_iptables
        local policy
        policy="$(state_get forward_policy)"
        [[ -n "$policy" ]] && iptables -w 5 -P FORWARD "$policy"
        policy="$(state_get forward6_policy)"
        [[ -n "$policy" ]] && ip6tables -w 5 -P FORWARD "$policy" 2>/dev/null
        policy="$(state_get ip_forward)"
        [[ -n "$policy" ]] && echo "$policy" >/proc/sys/net/ipv4/ip_forward 2>/dev/null
    fi
    rm -rf "$RUN"
}

# ------------------------------------------------------------------------------------------------ images
pick_mode() {
    # registry when every image is here or can be pulled; else local.
    [[ "$MODE" == auto ]] || return 0
    local image
    for image in "${ZOOKEEPER_IMAGE:-zookeeper:3.8.4}" "${PROMETHEUS_IMAGE:-prom/prometheus:v2.53.0}" \
                 "${GRAFANA_IMAGE:-grafana/grafana:10.4.2}" "${MOLDAU_PYTHON_IMAGE:-python:3.11.9-slim-bookworm}"; do
        docker image inspect "$image" >/dev/null 2>&1 && continue
        if ! timeout 600 docker pull -q "$image" >/dev/null 2>"$RUN/pull.err"; then
            say "cannot pull $image ($(tail -n1 "$RUN/pull.err" | cut -c1-160)): building every image locally"
            MODE=local
            return 0
        fi
    done
    MODE=registry
}

build_wheels() {
    # wheelhouse/ for the Dockerfile (pip in build containers may not reach an index): the dependencies' wheels,
    # setuptools and wheel (to build Moldau from its sources inside the build), and requirements.txt. They stay
    # in the cache, so a warm run needs no index; the Dockerfile installs them in a layer of their own.
    local py="$ROOT/.venv/bin/python" reqs pip_wheel
    [[ -x "$py" ]] || py="$(command -v python3)"
    mkdir -p "$CACHE/wheels"
    reqs="$CACHE/wheels/requirements.txt"
    "$py" -c 'import sys, tomllib; print("\n".join(tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]))' \
        "$ROOT/pyproject.toml" >"$reqs"
    pip_wheel=(env PIP_DISABLE_PIP_VERSION_CHECK=1 "$py" -m pip wheel -q --no-input --find-links "$CACHE/wheels"
               -w "$CACHE/wheels" -r "$reqs" "setuptools>=68" wheel)
    if ! "${pip_wheel[@]}" --no-index >"$RUN/wheels.log" 2>&1; then
        "${pip_wheel[@]}" >"$RUN/wheels.log" 2>&1 \
            || { tail -n 20 "$RUN/wheels.log" >&2; die "pip wheel failed (log: $RUN/wheels.log)"; }
    fi
    rm -f "$CACHE"/wheels/moldau-*.whl  # an earlier version's own wheel: built inside the image now
    rm -rf "$ROOT/wheelhouse"
    cp -rp "$CACHE/wheels" "$ROOT/wheelhouse"
}

build_images() {
    local rebuild="$1" t0=$SECONDS src
    src="$(source_hash)"  # before the build: a file changed while it runs makes the next `up` build again
    if [[ "$MODE" == local ]]; then
        if ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
            command -v debootstrap >/dev/null || die "the local base needs debootstrap (apt-get install debootstrap)"
            say "building $BASE_IMAGE with debootstrap (a few minutes, once)"
            bash "$ROOT/ops/local/make-base.sh"
        fi
        local missing=()
        docker image inspect moldau-local-zookeeper >/dev/null 2>&1 || missing+=(zookeeper)
        docker image inspect moldau-local-prometheus >/dev/null 2>&1 || missing+=(prometheus)
        if [[ "$rebuild" == 1 ]] || moldau_image_stale; then
            build_wheels
            say "wheels in $((SECONDS - t0)) s"
            missing+=(broker-1)
        fi
        if (( ${#missing[@]} )); then
            say "building ${missing[*]}"
            compose build "${missing[@]}" >"$RUN/build.log" 2>&1 \
                || { tail -n 30 "$RUN/build.log" >&2; die "docker-compose build failed (log: $RUN/build.log)"; }
            say "built in $((SECONDS - t0)) s"
        fi
    elif [[ "$rebuild" == 1 ]] || moldau_image_stale; then
        say "building broker-1 (the Moldau image)"
        compose build broker-1 >"$RUN/build.log" 2>&1 \
            || { tail -n 30 "$RUN/build.log" >&2; die "docker-compose build failed (log: $RUN/build.log)"; }
    fi
    docker image inspect "${MOLDAU_IMAGE:-moldau:local}" >/dev/null 2>&1 && echo "$src" >"$CACHE/image-source.$MODE"
    return 0
}

source_hash() {
    # What the Moldau image is built from: a changed file means a new image at the next `up`.
    (cd "$ROOT" && find pyproject.toml README.md Dockerfile client broker protocol storage testing spark_plugin \
        ops/docker -type f \
        ! -name '*.pyc' ! -path '*/__pycache__/*' ! -path '*.egg-info/*' -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
}

moldau_image_stale() {
    ! docker image inspect "${MOLDAU_IMAGE:-moldau:local}" >/dev/null 2>&1 \
        || [[ "$(cat "$CACHE/image-source.$MODE" 2>/dev/null)" != "$(source_hash)" ]]
}

# ------------------------------------------------------------------------------------------------ health
health() {
    # "service status" a line, from one `docker ps` (docker-compose itself is slow to start on a loaded machine):
    # the healthcheck's status where there is one, else the container's state.
    local service ps
    ps="$(docker ps -a --filter "label=com.docker.compose.project=$PROJECT" \
        --format '{{.Label "com.docker.compose.service"}} {{.State}} {{.Status}}' 2>/dev/null || true)"
    for service in $(services); do
        awk -v s="$service" '
            $1 == s { found = 1
                      if ($0 ~ /\(healthy\)/) st = "healthy"; else if ($0 ~ /\(unhealthy\)/) st = "unhealthy"
                      else if ($0 ~ /health: starting/) st = "starting"; else st = $2 }
            END { print s, (found ? st : "missing") }' <<<"$ps"
    done
}

wait_healthy() {
    local t0=$SECONDS states
    while :; do
        states="$(health)"
        if ! grep -qv ' healthy$' <<<"$states"; then
            say "every service healthy in $((SECONDS - t0)) s"
            return 0
        fi
        if grep -qE ' (exited|dead|unhealthy)$' <<<"$states" || (( SECONDS - t0 > TIMEOUT )); then
            printf '%s\n' "$states" >&2
            compose logs --no-color --tail 5 >&2 2>&1 || true
            die "not healthy after $((SECONDS - t0)) s (above; bash scripts/compose.sh logs, then down)"
        fi
        sleep 2
    done
}

# ------------------------------------------------------------------------------------------------ commands
cmd_up() {
    local rebuild=0 arg v
    for arg in "$@"; do
        case "$arg" in --build) rebuild=1 ;; *) usage ;; esac
    done
    command -v docker-compose >/dev/null || die "docker-compose is not installed (Debian: apt-get install docker-compose)"
    if [[ -f "$STATE" ]] && [[ "$(state_get own_dockerd)" == 1 ]] && pid_alive "$(state_get dockerd_pid)"; then
        [[ "$(state_get project)" == "$PROJECT" ]] \
            || die "the private dockerd runs project $(state_get project): bash scripts/compose.sh down first"
        export DOCKER_HOST="unix://$RUN/docker.sock"
        MODE="$(state_get mode)"
    elif [[ -f "$STATE" && "$(state_get own_dockerd)" == 1 ]]; then
        say "cleaning up after a private dockerd that is gone"
        stop_dockerd
        start_dockerd
    elif docker_answers; then
        rm -rf "$RUN"; state_set project "$PROJECT"; state_set own_dockerd 0
    else
        start_dockerd
    fi
    # Record what later commands need; a second `up` keeps the ports of the first unless given anew.
    if [[ -z "$(state_get mode)" ]]; then
        pick_mode
        state_set mode "$MODE"
    fi
    for v in "${PORT_VARS[@]}"; do
        if [[ -n "${!v:-}" ]]; then state_set "$v" "${!v}"
        elif [[ -n "$(state_get "$v")" ]]; then export "$v=$(state_get "$v")"; fi
    done
    build_images "$rebuild"
    local t0=$SECONDS
    # shellcheck disable=SC2046
    compose up -d --no-build $(services) >"$RUN/up.log" 2>&1 \
        || { tail -n 30 "$RUN/up.log" >&2; die "docker-compose up failed (log: $RUN/up.log)"; }
    say "containers up in $((SECONDS - t0)) s"
    wait_healthy
    local p1="${MOLDAU_BROKER_1_PORT:-9092}" p2="${MOLDAU_BROKER_2_PORT:-9093}" p3="${MOLDAU_BROKER_3_PORT:-9094}"
    echo "bootstrap servers: 127.0.0.1:$p1,127.0.0.1:$p2,127.0.0.1:$p3"
    echo "prometheus: http://127.0.0.1:${MOLDAU_PROMETHEUS_PORT:-9090}"
    [[ "$MODE" == registry ]] && echo "grafana: http://127.0.0.1:${MOLDAU_GRAFANA_PORT:-3000} (admin/admin)"
    if [[ "$(state_get own_dockerd)" == 1 ]]; then
        echo "docker commands: DOCKER_HOST=$DOCKER_HOST docker ps (or bash scripts/compose.sh ps, logs, exec ...)"
    fi
}

cmd_down() {
    local volumes=() arg
    for arg in "$@"; do
        case "$arg" in -v|--volumes) volumes=(-v) ;; *) usage ;; esac
    done
    if [[ ! -f "$STATE" ]]; then
        if docker_answers; then
            compose down "${volumes[@]}" --remove-orphans -t 10
        else
            say "nothing to stop (no state in $RUN, no Docker answers)"
        fi
        return 0
    fi
    load_state
    if docker_answers; then
        compose down "${volumes[@]}" --remove-orphans -t 10 || say "docker-compose down failed; stopping anyway"
    fi
    if [[ "$(state_get own_dockerd)" == 1 ]]; then
        stop_dockerd
        say "private dockerd stopped; its chains, bridges and mounts removed"
    else
        rm -rf "$RUN"
    fi
}

main() {
    [[ $# -ge 1 ]] || usage
    local cmd="$1"; shift
    case "$cmd" in
        up) cmd_up "$@" ;;
        down) cmd_down "$@" ;;
        purge) cmd_down -v; rm -rf "$CACHE"; say "deleted $CACHE" ;;
        -h|--help|help) usage ;;
        *)
            load_state
            [[ -f "$STATE" ]] || docker_answers || die "nothing is up (bash scripts/compose.sh up)"
            # `exec` without a terminal (a script, a pipe) needs -T
            if [[ "$cmd" == exec && ! -t 0 ]]; then compose exec -T "$@"; else compose "$cmd" "$@"; fi ;;
    esac
}

main "$@"; exit $?  # on one line: bash reads a script as it runs it, and this file may change meanwhile
