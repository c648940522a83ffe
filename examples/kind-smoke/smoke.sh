#!/usr/bin/env bash
# Kind smoke path: create a kind cluster, install TauGrid from this checkout, create the smoke
# workspace and run the smoke targets. Needs Docker (or Podman), kind, kubectl, helm and tau on PATH,
# and network access to the upstream Kueue and KubeRay charts.
#
#   examples/kind-smoke/smoke.sh            # create or reuse the cluster, install, run
#   KEEP_CLUSTER=0 examples/kind-smoke/smoke.sh   # delete the cluster afterwards
set -euo pipefail

CLUSTER="${CLUSTER:-tau-kind}"
CONTEXT="kind-${CLUSTER}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "${HERE}/../.." && pwd)"
CHART="${ROOT}/deploy/charts/taugrid"

need() {
  command -v "$1" >/dev/null 2>&1 || { echo "smoke: $1 is required on PATH" >&2; exit 1; }
}

cleanup() {
  if [[ "${KEEP_CLUSTER:-1}" == "0" ]]; then
    kind delete cluster --name "${CLUSTER}"
  fi
}

for tool in docker kind kubectl helm tau python3; do
  need "${tool}"
done
trap cleanup EXIT

if ! kind get clusters | grep -qx "${CLUSTER}"; then
  kind create cluster --name "${CLUSTER}" --wait 120s
fi
kubectl --context "${CONTEXT}" get nodes

# The controller chart's crds/ is a build copy of deploy/crds; the upstream charts come from their repos.
python3 "${ROOT}/deploy/tools/sync_chart_crds.py" >/dev/null
helm dependency build "${CHART}"

tau cluster install --context "${CONTEXT}" --chart "${CHART}" \
  --values "${HERE}/cluster-values.yaml" --timeout 10m

tau workspace create ray --context "${CONTEXT}" --system-namespace tau-system \
  --queue kind-cpu --apply
kubectl --context "${CONTEXT}" wait workspaces.tau.azure.com/ray -n tau-system \
  --for=condition=Ready --timeout=5m

cd "${HERE}"
tau run job --context "${CONTEXT}" --follow
tau run ray --context "${CONTEXT}" --follow
tau cluster validate installation --context "${CONTEXT}"
echo "smoke: the kind smoke path finished"
