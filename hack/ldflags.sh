#!/usr/bin/env bash
# Prints the -ldflags that stamp version information into the phalanx binaries:
# phalanx's own version and the Kubernetes version kube-scheduler reports
# (component-base). Used by the Makefile and the Dockerfile, so that `make
# build` and `make image` stamp the same.
#
#   hack/ldflags.sh VERSION
set -euo pipefail
cd "$(dirname "$0")/.."

version="${1:?usage: hack/ldflags.sh VERSION}"
k8s="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"
minor="$(cut -d. -f2 <<<"${k8s}")"
pkg=github.com/phalanx-sched/phalanx
echo "-X ${pkg}/internal/version.Version=${version}" \
  "-X k8s.io/component-base/version.gitVersion=${k8s}" \
  "-X k8s.io/component-base/version.gitMajor=1" \
  "-X k8s.io/component-base/version.gitMinor=${minor}"
