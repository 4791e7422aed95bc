#!/usr/bin/env bash
# Fails, listing the files, when generated code or CRDs are stale (make verify).
# Regenerates in a scratch copy of the work tree and compares; it does not look
# at git and leaves the work tree as it was (only bin/tools/ may be built).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export LC_ALL=C

# Build the tools once in the real tree so repeated runs reuse them.
"${root}/hack/tools.sh"
export PHALANX_TOOLS_BIN="${PHALANX_TOOLS_BIN:-${root}/bin/tools}"

tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
work="${tmp}/phalanx"
mkdir -p "${work}"
tar -C "${root}" --exclude=./.git --exclude=./bin --exclude=./_output -cf - . | tar -C "${work}" -xf -

if ! "${work}/hack/update-codegen.sh" >"${tmp}/log" 2>&1; then
  cat "${tmp}/log" >&2
  echo "verify-codegen: hack/update-codegen.sh failed" >&2
  exit 1
fi

# Every generated path, in either tree.
generated() (
  cd "$1"
  find apis -name 'zz_generated.*.go'
  find internal/estimator/karmadapb -name "*.pb.go"
  for d in pkg/generated manifests/crds; do
    if [[ -d "${d}" ]]; then find "${d}" -type f; fi
  done
)

stale=()
while read -r f; do
  [[ -n "${f}" ]] || continue
  if ! cmp -s "${root}/${f}" "${work}/${f}"; then
    stale+=("${f}")
  fi
done < <({ generated "${root}"; generated "${work}"; } | sort -u)

if ((${#stale[@]} > 0)); then
  echo "verify-codegen: generated files are stale; run hack/update-codegen.sh (make generate):" >&2
  for f in "${stale[@]}"; do
    if [[ ! -e "${root}/${f}" ]]; then
      echo "  missing: ${f}" >&2
    elif [[ ! -e "${work}/${f}" ]]; then
      echo "  extra (no longer generated): ${f}" >&2
    else
      echo "  differs: ${f}" >&2
    fi
  done
  for f in "${stale[@]}"; do
    if [[ -e "${root}/${f}" && -e "${work}/${f}" ]]; then
      diff -u --label "${f} (in tree)" --label "${f} (regenerated)" "${root}/${f}" "${work}/${f}" | head -n 40 >&2 || true
    fi
  done
  exit 1
fi
echo "verify-codegen: generated files are up to date" >&2
