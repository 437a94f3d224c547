#!/usr/bin/env bash
# Make the images' local base, TAG (default estflow/base:bookworm), from Debian's packages where
# Docker Hub cannot be reached: a minimal Debian bookworm with Python 3.11 and venv (what
# python:3.11-slim-bookworm gives), made by debootstrap (as root) and `docker import`ed.
# Does nothing when TAG exists. DEBIAN_MIRROR chooses the mirror.
set -euo pipefail
tag=${1:-estflow/base:bookworm}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
if docker image inspect "$tag" >/dev/null 2>&1; then
    exit 0
fi
if ! command -v debootstrap >/dev/null; then
    echo "base.sh: debootstrap is not installed (apt-get install debootstrap), so $tag cannot be made here;" \
         "where Docker Hub is reachable, make image IMAGE_BASE=hub uses the public bases instead." >&2
    exit 1
fi
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
echo "base.sh: making $tag with debootstrap from $mirror"
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
    bookworm "$root" "$mirror" >"$root.log" 2>&1 || { tail -20 "$root.log" >&2; exit 1; }
rm -f "$root.log"
# What a container never uses: downloaded packages, package lists, documentation, translations.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
    "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/locale/*
tar -C "$root" -c . | docker import --change 'ENV LANG=C.UTF-8' - "$tag" >/dev/null
echo "base.sh: made $tag"
