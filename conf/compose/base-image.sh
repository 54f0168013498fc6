#!/usr/bin/env bash
# Build the base image of the compose stack from Debian's packages, for machines that reach no image
# registry: debootstrap a minimal Debian 12 (bookworm) and `docker import` it.
#   conf/compose/base-image.sh [TAG]     (default srm-base:bookworm; a no-op when the tag exists)
# Where a registry is reachable, the Dockerfile's default base (debian:bookworm-slim) needs none of this.
set -euo pipefail
TAG=${1:-srm-base:bookworm}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
if docker image inspect "$TAG" >/dev/null 2>&1; then
    echo "base image $TAG exists"
    exit 0
fi
command -v debootstrap >/dev/null || { echo "debootstrap missing: apt-get install debootstrap" >&2; exit 1; }
SUDO=$( [ "$(id -u)" = 0 ] || echo sudo )  # debootstrap, and the tree it makes, need root
ROOT=$(mktemp -d)
trap '$SUDO rm -rf "$ROOT" "$ROOT.log"' EXIT
echo "debootstrap bookworm from $MIRROR into $ROOT (a minute or two)"
$SUDO debootstrap --variant=minbase --include=ca-certificates bookworm "$ROOT" "$MIRROR" >"$ROOT.log" 2>&1 \
    || { tail -20 "$ROOT.log" >&2; exit 1; }
# the same sources as the official image; no caches in the image
printf 'deb %s bookworm main\ndeb %s bookworm-updates main\ndeb http://deb.debian.org/debian-security bookworm-security main\n' \
    "$MIRROR" "$MIRROR" | $SUDO tee "$ROOT/etc/apt/sources.list" >/dev/null
$SUDO rm -rf "$ROOT"/var/cache/apt/archives/*.deb "$ROOT"/var/lib/apt/lists/*
$SUDO tar -C "$ROOT" -c . | docker import --change 'CMD ["bash"]' --change 'ENV LANG=C.UTF-8' - "$TAG"
echo "base image $TAG built"
