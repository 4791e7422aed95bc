#!/usr/bin/env bash
# Installs a Debian package when its command is missing:
#   hack/ensure-deb.sh <command> <package>
# The e2e suite needs bwrap (bubblewrap): it runs the scheduler and controller
# binaries with a read-only root filesystem, as their pod specs say.
# hack/update-proto.sh needs protoc (protobuf-compiler).
set -euo pipefail

cmd="$1" pkg="$2"
if command -v "${cmd}" >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-deb.sh: ${cmd} is missing and apt-get is not available; install ${pkg}" >&2
  exit 1
fi
sudo=""
if [[ "$(id -u)" != 0 ]]; then
  sudo="sudo"
fi
echo "installing ${cmd} (Debian package ${pkg})" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
$sudo apt-get install -y -qq --no-install-recommends "${pkg}" >/dev/null
command -v "${cmd}" >/dev/null
