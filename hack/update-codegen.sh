#!/usr/bin/env bash
# Regenerates every generated file of the repo (make generate):
#   apis/**/zz_generated.{deepcopy,conversion,defaults}.go  deepcopy/conversion/defaulter-gen
#   pkg/generated/{clientset,listers,informers}             client/lister/informer-gen
#   manifests/crds/*.yaml                                   controller-gen
#   internal/estimator/karmadapb/*.pb.go                    protoc (hack/update-proto.sh)
# The CRDs are those of scheduling.phalanx.dev plus the scheduler-plugins PodGroup
# CRD (generated from its Go types, with phalanx's status fields) and the
# NodeResourceTopology CRD exactly as its API module ships it (v1alpha1 and
# v1alpha2 served, v1alpha2 stored, as NFD installs it), so that
# `kubectl apply -f manifests/crds` installs everything phalanx reads without
# breaking an existing scheduler-plugins or NFD install.
# Output depends only on the sources and the tool versions of hack/tools/go.mod.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"

"${root}/hack/tools.sh"
bin="${PHALANX_TOOLS_BIN:-${root}/bin/tools}"

export GOWORK=off GOFLAGS="${GOFLAGS:--buildvcs=false}" LC_ALL=C
module="$(go list -m)"
boilerplate="${root}/hack/boilerplate.go.txt"
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT

# Packages under apis/ that carry a given +k8s:<gen>= package tag, sorted.
pkgs_with_tag() {
  grep -rl --include='*.go' -E "^//[[:space:]]*\+k8s:$1=" apis |
    xargs -r -n1 dirname | sort -u | sed "s#^#${module}/#"
}

echo "deepcopy-gen, defaulter-gen, conversion-gen" >&2
find apis -name 'zz_generated.*.go' -delete
mapfile -t deepcopy_pkgs < <(pkgs_with_tag deepcopy-gen)
mapfile -t defaulter_pkgs < <(pkgs_with_tag defaulter-gen)
mapfile -t conversion_pkgs < <(pkgs_with_tag conversion-gen)
"${bin}/deepcopy-gen" --go-header-file "${boilerplate}" \
  --output-file zz_generated.deepcopy.go "${deepcopy_pkgs[@]}"
"${bin}/defaulter-gen" --go-header-file "${boilerplate}" \
  --output-file zz_generated.defaults.go "${defaulter_pkgs[@]}"
"${bin}/conversion-gen" --go-header-file "${boilerplate}" \
  --output-file zz_generated.conversion.go "${conversion_pkgs[@]}"

echo "client-gen, lister-gen, informer-gen" >&2
out="pkg/generated"
rm -rf "${out}"
"${bin}/client-gen" --go-header-file "${boilerplate}" \
  --input-base "${module}/apis" --input scheduling/v1alpha1 \
  --clientset-name versioned \
  --output-dir "${out}/clientset" --output-pkg "${module}/${out}/clientset"
"${bin}/lister-gen" --go-header-file "${boilerplate}" \
  --output-dir "${out}/listers" --output-pkg "${module}/${out}/listers" \
  "${module}/apis/scheduling/v1alpha1"
"${bin}/informer-gen" --go-header-file "${boilerplate}" \
  --versioned-clientset-package "${module}/${out}/clientset/versioned" \
  --listers-package "${module}/${out}/listers" \
  --output-dir "${out}/informers" --output-pkg "${module}/${out}/informers" \
  "${module}/apis/scheduling/v1alpha1"

echo "controller-gen CRDs" >&2
# The PodGroup CRD comes from the Go types at the version pinned in go.mod; only
# the kinds phalanx uses are kept (ElasticQuota is dropped).
crds=(
  scheduling.phalanx.dev_queues.yaml
  scheduling.phalanx.dev_networktopologies.yaml
  scheduling.phalanx.dev_queuepositions.yaml
  scheduling.x-k8s.io_podgroups.yaml
)
"${bin}/controller-gen" crd:crdVersions=v1 \
  paths="./apis/scheduling/...;sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1" \
  output:crd:dir="${tmp}/crds"
rm -rf manifests/crds
mkdir -p manifests/crds
for f in "${crds[@]}"; do
  [[ -f "${tmp}/crds/${f}" ]] || { echo "controller-gen did not produce ${f}" >&2; ls "${tmp}/crds" >&2; exit 1; }
  cp "${tmp}/crds/${f}" "manifests/crds/${f}"
done
# NodeResourceTopology: NFD's CRD is this module's manifests/crd.yaml; shipping
# the same one means applying either over the other changes nothing (a
# v1alpha2-only CRD would be refused over NFD's while v1alpha1 is stored).
nrt_dir="$(go list -m -f '{{.Dir}}' github.com/k8stopologyawareschedwg/noderesourcetopology-api)"
{
  echo "# From github.com/k8stopologyawareschedwg/noderesourcetopology-api $(go list -m -f '{{.Version}}' github.com/k8stopologyawareschedwg/noderesourcetopology-api)"
  echo "# manifests/crd.yaml (the CRD NFD installs), copied by hack/update-codegen.sh."
  cat "${nrt_dir}/manifests/crd.yaml"
} > manifests/crds/topology.node.k8s.io_noderesourcetopologies.yaml
crds+=(topology.node.k8s.io_noderesourcetopologies.yaml)
# controller-gen has no marker for the values of a map of another package's type;
# bound the quantity strings of Queue guarantee/capability so that the CEL rules
# that parse them fit the apiserver's cost budget.
for f in guarantee capability; do
  "${bin}/crdpatch" manifests/crds/scheduling.phalanx.dev_queues.yaml \
    "properties.spec.properties.${f}.additionalProperties.maxLength=64"
done
# phalanx extends the upstream PodGroup status (compatible additions): the
# scheduler writes a Scheduled condition saying why a gang waits, and the
# controller counts scheduled members. Without these the API server would prune
# both.
"${bin}/crdpatch" manifests/crds/scheduling.x-k8s.io_podgroups.yaml \
  'properties.status.properties.scheduled={"description":"The number of members bound to a node and not finished (phalanx).","format":"int32","type":"integer"}' \
  'properties.status.properties.conditions={"description":"Conditions of the gang; phalanx writes Scheduled with the reason it waits.","items":{"properties":{"lastTransitionTime":{"format":"date-time","type":"string"},"message":{"maxLength":32768,"type":"string"},"observedGeneration":{"format":"int64","minimum":0,"type":"integer"},"reason":{"maxLength":1024,"minLength":1,"pattern":"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$","type":"string"},"status":{"enum":["True","False","Unknown"],"type":"string"},"type":{"maxLength":316,"pattern":"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$","type":"string"}},"required":["lastTransitionTime","message","reason","status","type"],"type":"object"},"type":"array","x-kubernetes-list-map-keys":["type"],"x-kubernetes-list-type":"map"}'
# Named "Kustomization" (no .yaml) so that `kubectl apply -f manifests/crds`
# skips it while `kubectl apply -k manifests/crds` and kustomize still find it.
{
  echo "# Generated by hack/update-codegen.sh. DO NOT EDIT."
  echo "apiVersion: kustomize.config.k8s.io/v1beta1"
  echo "kind: Kustomization"
  echo "resources:"
  printf -- '- %s\n' "${crds[@]}"
} > manifests/crds/Kustomization

echo "done" >&2
bash "${root}/hack/update-proto.sh"
