#!/usr/bin/env bash
# Pins k8s.io/kubernetes and rewrites the staging replace block from its own go.mod,
# so moving to a new Kubernetes patch is one command:
#   hack/update-k8s-version.sh v1.36.3
set -euo pipefail
cd "$(dirname "$0")/.."

version="${1:-$(go list -m -f '{{.Version}}' k8s.io/kubernetes)}"
staging="v0.${version#v1.}"   # v1.36.3 -> v0.36.3

kmod=$(go mod download -json "k8s.io/kubernetes@${version}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
[ -f "$kmod" ] || { echo "cannot find go.mod of k8s.io/kubernetes@${version}" >&2; exit 1; }

mods=$(sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\1#p' "$kmod")
[ -n "$mods" ] || { echo "no staging replaces in k8s.io/kubernetes@${version} go.mod" >&2; exit 1; }

args=()
for m in $mods; do args+=("-replace=${m}=${m}@${staging}"); done
go mod edit "${args[@]}"
go mod edit -require="k8s.io/kubernetes@${version}"
go mod tidy
echo "k8s.io/kubernetes ${version}, $(echo "$mods" | wc -l) staging modules at ${staging}"
