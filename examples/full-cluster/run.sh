#!/usr/bin/env bash
# The full-cluster operator walkthrough, after the cluster exists (docs: "Provision a GPU-enabled TauGrid AKS
# environment", and steps 3-4 of "Getting started on Kubernetes"): install or validate TauGrid, verify GPU
# capacity, create the workspace bound to a real group, wait until it is Ready, check its data PVC, and print
# the researcher handoff. Works against any Kubernetes context (AKS from deploy/terraform/aks, or the simulator).
#
#   TAU_CONTEXT=<context> PRINCIPAL=<entra-group-object-id> ./run.sh
#
# Environment:
#   TAU_CONTEXT     kubeconfig context (default: the current context)
#   TAU_WORKSPACE   workspace name (default taugrid-default)
#   PRINCIPAL       group/user bound to the workspace (omitted: an inert binding that grants nobody access)
#   VALUES          values file for `tau cluster install` (omitted: validate an existing installation only)
#   CHART           chart reference for `tau cluster install` (default: the released OCI chart)
#   INSTALL=1       run `tau cluster install` before validating
#   DATA_PVC        durable /data claim to check in the workspace namespace (optional)
set -euo pipefail
context="${TAU_CONTEXT:-$(kubectl config current-context)}"
workspace="${TAU_WORKSPACE:-taugrid-default}"
say() { printf '\n== %s\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }

if [ "${INSTALL:-0}" = 1 ]; then
  say "install TauGrid (Kueue, KubeRay, the Tau controller, GPU monitoring, the baseline queue, Portal)"
  args=(--context "$context")
  [ -n "${CHART:-}" ] && args+=(--chart "$CHART")
  [ -n "${VALUES:-}" ] && args+=(--values "$VALUES")
  run tau cluster install "${args[@]}" --timeout 10m
fi

say "the control-plane readiness gate"
run tau cluster validate installation --context "$context" --timeout 10m

say "GPU capacity (allocatable nvidia.com/gpu per node; empty on a CPU-only cluster)"
kubectl --context "$context" get nodes \
  -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.status.allocatable.nvidia\.com/gpu}{"\n"}{end}'

say "create the workspace"
create=(tau workspace create "$workspace" --namespace "$workspace" --context "$context")
[ -n "${PRINCIPAL:-}" ] && create+=(--principal-name "$PRINCIPAL")
run "${create[@]}"
run "${create[@]}" --apply

say "wait until the controller reports the workspace Ready"
deadline=$(( $(date +%s) + 300 ))
until tau workspace check "$workspace" --context "$context" >/dev/null 2>&1; do
  if [ "$(date +%s)" -ge "$deadline" ]; then
    tau workspace status "$workspace" --context "$context" || true
    echo "error: workspace $workspace did not become Ready within 5 minutes" >&2
    exit 1
  fi
  sleep 2
done
check=(tau workspace check "$workspace" --context "$context")
[ -n "${DATA_PVC:-}" ] && check+=(--data-pvc "$DATA_PVC")
run "${check[@]}"
run tau workspace quota show "$workspace" --context "$context"

say "hand off: the researcher's repository gets a non-secret descriptor"
echo "tau workspace init-repo <repository> --image <registry>/<repository>:<tag> --workspace $workspace \\"
echo "  --kube-context <researcher-context>"
echo "(AKS: add --azure-subscription-id, --azure-tenant-id, --aks-resource-group and --aks-cluster)"
