#!/usr/bin/env bash
# Kueue admission of raw RayJobs on CPU only (no GPU quota): a TauGrid platform mechanics example.
#
#   ./demo.sh single      one ClusterQueue (3 CPU); two RayJobs: one admitted, one pending until the first ends
#   ./demo.sh borrowing   two teams' ClusterQueues in a cohort; team A borrows team B's idle quota
#   ./demo.sh cleanup     delete everything this example created (label app.kubernetes.io/part-of=cpu-queueing-example)
#
# Options: --context NAME (default: $TAU_CONTEXT, else the current context); --allow-shared-context to run on a
# cluster that already runs other Kueue workloads (only when that cluster is explicitly approved for this).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
mode="${1:-}"; shift || true
context="${TAU_CONTEXT:-}"
allow_shared=false
while [ $# -gt 0 ]; do
  case "$1" in
    --context) context="${2:?--context needs a value}"; shift 2 ;;
    --allow-shared-context) allow_shared=true; shift ;;
    *) echo "usage: $0 single|borrowing|cleanup [--context NAME] [--allow-shared-context]" >&2; exit 2 ;;
  esac
done
k() { if [ -n "$context" ]; then kubectl --context "$context" "$@"; else kubectl "$@"; fi; }
shown_context="${context:-$(kubectl config current-context)}"

guard() {
  local foreign
  foreign=$(k get workloads.kueue.x-k8s.io -A --no-headers 2>/dev/null \
    | awk '$1 !~ /^kueue-ray-/' | wc -l)
  if [ "$foreign" -gt 0 ] && [ "$allow_shared" != true ]; then
    echo "error: context $shown_context already runs $foreign Kueue workload(s) outside this example;" \
         "use a disposable cluster (or --allow-shared-context if this cluster is explicitly approved)" >&2
    exit 1
  fi
}

rayjob() {  # rayjob NAME NAMESPACE
  sed -e "s/@NAME@/$1/" -e "s/@NAMESPACE@/$2/" "$here/manifests/rayjob.yaml.in" | k apply -f -
}

case "$mode" in
  single)
    guard
    k apply -f "$here/manifests/single.yaml"
    rayjob cpu-demo-1 kueue-ray-cpu
    rayjob cpu-demo-2 kueue-ray-cpu
    echo "Watch admission in another terminal:"
    echo "  kubectl get workloads -n kueue-ray-cpu --watch"
    echo "Quota 3 CPU admits one RayJob (head + worker + submitter) at a time; the second waits."
    ;;
  borrowing)
    guard
    k apply -f "$here/manifests/borrowing.yaml"
    rayjob team-a-1 kueue-ray-team-a
    rayjob team-a-2 kueue-ray-team-a
    echo "Team B is idle, so team A's second RayJob borrows team B's quota through the cohort:"
    echo "  kubectl get workloads -n kueue-ray-team-a --watch"
    ;;
  cleanup)
    k delete rayjobs.ray.io -A -l app.kubernetes.io/part-of=cpu-queueing-example --ignore-not-found
    k delete -f "$here/manifests/single.yaml" --ignore-not-found
    k delete -f "$here/manifests/borrowing.yaml" --ignore-not-found
    ;;
  *)
    echo "usage: $0 single|borrowing|cleanup [--context NAME] [--allow-shared-context]" >&2
    exit 2
    ;;
esac
