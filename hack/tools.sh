#!/usr/bin/env bash
# Builds the pinned code generators and linters of hack/tools/go.mod (and the
# small crdpatch helper of hack/tools/crdpatch), and the helm CLI of
# hack/helm/go.mod (its own module: Helm's Kubernetes libraries are newer than
# ours), into bin/tools/. Idempotent: does nothing when the binaries match go.mod, go.sum and
# the Go toolchain. Only the Go module proxy is used for downloads.
#
#   hack/tools.sh            # build if stale
#   hack/tools.sh --force    # rebuild
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
moddir="${root}/hack/tools"
bindir="${PHALANX_TOOLS_BIN:-${root}/bin/tools}"

tools=(controller-gen deepcopy-gen conversion-gen defaulter-gen client-gen lister-gen informer-gen staticcheck crdpatch helm protoc-gen-go protoc-gen-go-grpc)

export GOWORK=off GOFLAGS="${GOFLAGS:--buildvcs=false}"

stamp="${bindir}/.stamp"
helmdir="${root}/hack/helm"
want="$(cat "${moddir}/go.mod" "${moddir}/go.sum" "${moddir}"/crdpatch/*.go "${helmdir}/go.mod" "${helmdir}/go.sum" <(go env GOVERSION GOOS GOARCH) |
  sha256sum | cut -d' ' -f1)"

uptodate=1
[[ "${1:-}" == "--force" ]] && uptodate=0
[[ -f "${stamp}" && "$(cat "${stamp}")" == "${want}" ]] || uptodate=0
for t in "${tools[@]}"; do [[ -x "${bindir}/${t}" ]] || uptodate=0; done
if [[ "${uptodate}" == 1 ]]; then
  exit 0
fi

echo "building tools into ${bindir#"${root}/"}/" >&2
mkdir -p "${bindir}"
rm -f "${stamp}"
(cd "${moddir}" && go build -trimpath -o "${bindir}/" tool ./crdpatch)
(cd "${helmdir}" && go build -trimpath -o "${bindir}/" tool)
for t in "${tools[@]}"; do
  [[ -x "${bindir}/${t}" ]] || { echo "tools.sh: ${t} was not built" >&2; exit 1; }
done
echo "${want}" > "${stamp}"
