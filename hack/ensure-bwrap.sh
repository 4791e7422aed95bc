#!/usr/bin/env bash
# Installs bubblewrap (Debian package) when bwrap is missing. The e2e suite of
# `make test` runs the scheduler and controller binaries inside bwrap with a
# read-only root filesystem, as their pod specs say.
set -euo pipefail

if command -v bwrap >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-bwrap.sh: bwrap is missing and apt-get is not available; install bubblewrap" >&2
  exit 1
fi
sudo=""
if [[ "$(id -u)" != 0 ]]; then
  sudo="sudo"
fi
echo "installing bubblewrap (Debian package)" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
$sudo apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null
command -v bwrap >/dev/null
