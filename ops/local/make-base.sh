#!/usr/bin/env bash
# Builds `moldau-local-base:bookworm`, a Debian 12 image with python3, from Debian's mirror (no image registry):
# debootstrap --variant=minbase, then docker import. Needs root, debootstrap and a running dockerd.
set -euo pipefail
root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase --include=python3,python3-venv,passwd bookworm "$root" >/dev/null
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb
tar -C "$root" -c . | docker import - moldau-local-base:bookworm
