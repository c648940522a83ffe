#!/usr/bin/env bash
# Proves the pod path: the Job starts, sees its Tau environment, and exits 0.
set -euo pipefail
echo "tau kind smoke: run=${HOSTNAME:-unknown} profile=${TAU_PROFILE:-none}"
for step in 1 2 3; do
  echo "step ${step}/3"
  sleep 1
done
echo "tau kind smoke: done"
