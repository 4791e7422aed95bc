#!/usr/bin/env bash
# Runs test/e2e — the same suite `make test` runs on an in-process API server —
# against a kind cluster where phalanx is installed with `helm install`. Only
# the bootstrap differs: the suite connects to PHALANX_E2E_KUBECONFIG instead of
# starting its own control plane.
#
# Needs a Docker engine, kind and kubectl; helm is built from Helm's Go module
# (hack/tools.sh). Cannot run on the project's build machine (no Docker).
#
#   hack/e2e-kind.sh                       # second-scheduler mode
#   MODE=replace hack/e2e-kind.sh          # phalanx replaces kube-scheduler
#   KEEP=1 hack/e2e-kind.sh                # keep the cluster afterwards
#
# Environment: MODE (second-scheduler|replace), KIND_CLUSTER (phalanx-e2e),
# KIND_NODE_IMAGE (a kindest/node image of the Kubernetes minor in go.mod),
# IMAGE (default: what `make image` builds).
set -euo pipefail
cd "$(dirname "$0")/.."

mode="${MODE:-second-scheduler}"
cluster="${KIND_CLUSTER:-phalanx-e2e}"
k8s_version="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"
node_image="${KIND_NODE_IMAGE:-kindest/node:${k8s_version}}"
image="${IMAGE:-$(make -s --no-print-directory -f - <<<'include Makefile
print-image: ; @echo $(IMAGE)' print-image)}"
ns=phalanx-system
for tool in docker kind kubectl; do
  command -v "$tool" >/dev/null || { echo "e2e-kind.sh: $tool not found" >&2; exit 1; }
done

tmp="$(mktemp -d)"
cleanup() {
  rm -rf "$tmp"
  if [[ "${KEEP:-}" != 1 ]]; then kind delete cluster --name "$cluster" >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

echo "== image ${image}"
make image IMAGE="${image}"

echo "== kind cluster ${cluster} (${node_image})"
kind create cluster --name "$cluster" --image "$node_image" --wait 120s
kind get kubeconfig --name "$cluster" >"$tmp/kubeconfig"
export KUBECONFIG="$tmp/kubeconfig"
kind load docker-image "$image" --name "$cluster"

echo "== helm install (${mode})"
bash hack/tools.sh
values=()
if [[ "$mode" == replace ]]; then
  values=(-f charts/phalanx/values-replace.yaml)
fi
bin/tools/helm install phalanx charts/phalanx --namespace "$ns" --create-namespace \
  --set image.repository="${image%:*}" --set image.tag="${image##*:}" "${values[@]}" --wait --timeout 5m

if [[ "$mode" == replace ]]; then
  # The two files of the phalanx-replace ConfigMap, onto the control-plane node
  # (docs/deploy.md, "Replace kube-scheduler (kubeadm)").
  node="${cluster}-control-plane"
  kubectl -n "$ns" get configmap phalanx-replace -o jsonpath='{.data.config\.yaml}' >"$tmp/config.yaml"
  kubectl -n "$ns" get configmap phalanx-replace -o jsonpath='{.data.kube-scheduler\.yaml}' >"$tmp/kube-scheduler.yaml"
  docker exec "$node" mkdir -p /etc/kubernetes/phalanx
  docker cp "$tmp/config.yaml" "$node:/etc/kubernetes/phalanx/config.yaml"
  docker cp "$tmp/kube-scheduler.yaml" "$node:/etc/kubernetes/manifests/kube-scheduler.yaml"
  echo "waiting for phalanx to hold kube-system/kube-scheduler"
  for _ in $(seq 1 60); do
    holder="$(kubectl -n kube-system get lease kube-scheduler -o jsonpath='{.spec.holderIdentity}' 2>/dev/null || true)"
    pod="${holder%%_*}"
    if [[ -n "$pod" ]] && kubectl -n kube-system get pod "$pod" -o jsonpath='{.spec.containers[0].command[0]}' 2>/dev/null | grep -q phalanx-scheduler; then
      break
    fi
    sleep 5
  done
fi

echo "== test/e2e"
bash hack/ensure-deb.sh bwrap bubblewrap   # TestDeployDocSteps runs the docs' node steps in a sandbox
PHALANX_E2E_KUBECONFIG="$KUBECONFIG" PHALANX_E2E_MODE="$mode" PHALANX_E2E_NAMESPACE="$ns" PHALANX_E2E_CRD_ORDERS=1 \
  go test -count=1 -v -timeout 30m ./test/e2e/...
