#!/usr/bin/env bash
# The TauGrid platform walkthrough, end to end, on a SIMULATED cluster (no real cluster, no Docker).
#
#   install -> create a workspace -> hand it off -> connect -> run -> quota -> refusals -> uninstall
#
# Needs only the project's console scripts (tau, tau-sim, tau-controller), helm, kubectl and bash (git optional).
# The upstream Kueue and KubeRay charts cannot be pulled here: the script builds the same small local
# stand-in charts the tests use (carrying the upstream CRDs), and the simulator's own Kueue and KubeRay
# controllers play their part. The Tau controller is the real `tau-controller run`.
#
#   examples/platform-walkthrough/run.sh            # prints every step; exit 0 = every check passed
#   TAU_WALKTHROUGH_DIR=/tmp/wt run.sh              # keep the working files there (default: a temp dir)
set -euo pipefail

for tool in tau tau-sim tau-controller helm kubectl; do
  command -v "$tool" >/dev/null || { echo "error: $tool is not on PATH" >&2; exit 1; }
done

work="${TAU_WALKTHROUGH_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/tau-walkthrough.XXXXXX")}"
mkdir -p "$work"
work="$(cd "$work" && pwd)"
export KUBECONFIG="$work/kubeconfig"
export TAU_CONFIG_DIR="$work/tau-config"   # connection pins and isolated kubeconfigs stay in here
export NO_COLOR=1
unset TAU_CONTEXT TAU_SYSTEM_NAMESPACE
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

started=$(date +%s.%N)
elapsed() { awk -v s="$started" -v n="$(date +%s.%N)" 'BEGIN { printf "%.1f", n - s }'; }
step() { printf '\n== [%ss] %s\n' "$(elapsed)" "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }
fail() { echo "walkthrough FAILED: $*" >&2; exit 1; }
wait_until() {  # wait_until SECONDS DESCRIPTION COMMAND...
  local limit=$1 what=$2; shift 2
  local deadline=$(( $(date +%s) + limit ))
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || fail "timed out after ${limit}s waiting for $what"
    sleep 0.5
  done
}

step "0. a simulated cluster with only nodes (no CRDs, no Kueue objects, no TauGrid)"
tau-sim serve --kubeconfig "$KUBECONFIG" --bare-nodes 2 --job-seconds 8 --volumes-dir "$work/volumes" \
  --add-user researcher=aurora-researchers --add-user outsider >"$work/sim.log" 2>&1 &
pids+=($!)
wait_until 30 "the simulated API server" kubectl get nodes
admin=$(kubectl config current-context)
researcher="$admin-researcher"
outsider="$admin-outsider"
run kubectl get nodes
echo "CRDs: $(kubectl get crd -o name | wc -l)"

step "1. tau cluster install (stand-in charts for Kueue/KubeRay) with the real tau-controller"
echo "note: the upstream Kueue and KubeRay charts are replaced by local test stand-ins"
chart=$(tau-sim standin-chart --output "$work/charts" --upstream-crds)
( until kubectl get crd clusters.tau.azure.com >/dev/null 2>&1; do sleep 0.3; done
  exec tau-controller run --kubeconfig "$KUBECONFIG" --system-namespace tau-system \
    --health-probe-bind-address 127.0.0.1:0 --metrics-bind-address 127.0.0.1:0 ) >"$work/controller.log" 2>&1 &
pids+=($!)
run tau cluster install --chart "$chart" --timeout 2m | tee "$work/install.out"
grep -q "READY" "$work/install.out" || fail "the readiness report did not reach READY"

step "2. the platform team creates the workspace; the controller makes it Ready"
run tau workspace create aurora --principal-name aurora-researchers
run tau workspace create aurora --principal-name aurora-researchers --apply
wait_until 60 "workspace aurora to become Ready" tau workspace check aurora
run tau workspace check aurora
echo "(workspace ready after $(elapsed)s)"
echo "the platform provisions the durable /data claim (the simulator binds no volumes: check warns, never fails;"
echo "its contents live in $work/volumes/aurora/blob-training):"
kubectl apply -f - <<'EOF'
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: blob-training, namespace: aurora}
spec:
  accessModes: [ReadWriteMany]
  resources: {requests: {storage: 1Gi}}
EOF
run tau workspace check aurora --data-pvc blob-training

step "3. the researcher scaffolds a repository, connects and runs"
run tau workspace init-repo research --image python:3.12-slim --workspace aurora \
  --kube-context "$researcher" --output "$work/research"
cd "$work/research"
if command -v git >/dev/null; then git init -q .; fi   # a repository, as a researcher would have
printf 'y\n' | run tau workspace connection
run tau run train
first_submit=$(elapsed)

step "4. quota show reflects the admitted workload while it runs"
echo '$ tau workspace quota show aurora --context '"$admin"' (repeated until the run is admitted)'
deadline=$(( $(date +%s) + 60 ))
until quota=$(tau workspace quota show aurora --context "$admin") && grep -Eq 'Workloads: +1 admitted' <<<"$quota"; do
  [ "$(date +%s)" -lt "$deadline" ] || fail "quota show never reported the admitted run"
  sleep 0.5
done
echo "$quota"

step "5. the researcher follows the run to success, reads logs and results"
run tau run status train --watch   # follows the startup phase tree until the run is ready
echo "(the watch ends at Ready; waiting for the run itself to finish)"
wait_until 120 "the run to succeed" bash -c \
  "tau run status train -o json | grep -q '\"succeeded\": true'"
run tau run status train
echo "(first run succeeded after $(elapsed)s; submitted at ${first_submit}s)"
run tau logs train
echo "(the scaffold's targets declare storage.data_pvc and storage.output; the simulated container writes"
echo " report.json into \$OUTPUT_DIR on the claim, standing in for the training code)"
run tau run get train
run tau run get train --artifact report.json -o raw > "$work/report.json"
cat "$work/report.json"
grep -q '"simulated": true' "$work/report.json" || fail "tau run get did not fetch the run's report.json"

step "6. the researcher asks for more quota; the platform decides"
echo "the researcher asks for more quota (their workspace role allows creating the request):"
run tau workspace quota request aurora --resource cpu --requested 64 --reason "larger sweep" --apply
echo "a request that approves itself is denied by the quota admission guard:"
if kubectl --context "$researcher" create -f - 2>"$work/selfapprove.err" <<'EOF'
apiVersion: tau.azure.com/v1alpha1
kind: TauQuotaRequest
metadata:
  name: aurora-gpu-quota-request
  namespace: tau-system
  annotations: {tau.azure.com/approved: "true"}
spec: {workspace: aurora, resource: gpu, requested: 8, reason: self-approved}
EOF
then fail "a researcher approved their own quota request"; fi
cat "$work/selfapprove.err"
run kubectl annotate quotarequests.tau.azure.com aurora-cpu-quota-request -n tau-system \
  tau.azure.com/approved=true tau.azure.com/reviewed-by=platform-team
wait_until 30 "the controller to record the approval" bash -c \
  "kubectl get quotarequests.tau.azure.com aurora-cpu-quota-request -n tau-system -o jsonpath='{.status.phase}' | grep -qx Approved"
run kubectl get quotarequests.tau.azure.com -n tau-system

step "7. refusals: a second workspace, and a user outside the group"
if tau workspace create borealis --principal-name borealis-researchers --context "$admin" 2>"$work/second.err"; then
  fail "a second workspace was accepted"
fi
cat "$work/second.err"
if tau run train --context "$outsider" 2>"$work/outsider.err"; then
  fail "a user outside the group could submit"
fi
cat "$work/outsider.err"
grep -qi "forbidden" "$work/outsider.err" || fail "the outsider was not refused by RBAC"

step "8. tau cluster uninstall drains the queue and removes the release; the workspace data stays"
cd "$work"
run tau cluster uninstall --yes --chart "$chart" --timeout 2m
run kubectl get namespace aurora
run kubectl get pvc blob-training -n aurora
test -f "$work/volumes/aurora/blob-training/projects/aurora/runs/train/report.json" \
  || fail "the run's results did not survive the uninstall"
echo "the run's results remain on the claim: projects/aurora/runs/train/report.json"
step "done: every step passed in $(elapsed)s (work files in $work)"
