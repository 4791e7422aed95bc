#!/usr/bin/env bash
# Installs protoc (Debian package protobuf-compiler) when it is missing: it
# generates the Karmada estimator's gRPC stubs (hack/update-proto.sh).
set -euo pipefail

if command -v protoc >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-protoc.sh: protoc is missing and apt-get is not available; install protobuf-compiler" >&2
  exit 1
fi
sudo=""
if [[ "$(id -u)" != 0 ]]; then
  sudo="sudo"
fi
echo "installing protoc (Debian package protobuf-compiler)" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
$sudo apt-get install -y -qq --no-install-recommends protobuf-compiler >/dev/null
command -v protoc >/dev/null
