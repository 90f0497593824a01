#!/usr/bin/env bash
# Issue 5: the device tests sessions 44–45 built and never ran on the H200 (one short call):
#   1. muser_cuda's graph::tests::late_branches_join_where_asked — a branch joined only after a
#      later step (the late gate's join), captured with and without programmatic dependent
#      launch, and eagerly;
#   2. cuda_route's A8 cases (`a8`: the tiny Q4_K_M mix and the plain Q5_K / Q8_0 / Q5_0 models),
#      which set MUSER_CUDA_GATE_LATE=1 explicitly on the A8 route (its default is off there).
# Carry .device/tests/muser_cuda and .device/tests/cuda_route (build-device.sh).
# Usage: bash scripts/device/pending-tests.sh OUTDIR
set -uo pipefail
out=${1:?outdir}
log=$out/pending-tests.txt
run_test() {  # NAME BINARY FILTER
  env MUSER_CUDA_DEADLINE_S=120 timeout 280 ".device/tests/$2" --test-threads 1 --nocapture "$3" \
    > "$out/$1.txt" 2>&1
  echo "$1 ($2 $3) rc=$? $(grep -E 'test result' "$out/$1.txt" | tail -1)" >> "$log"
  grep -E '^test |skipping|passed|KL' "$out/$1.txt" | head -12 >> "$log"
  grep -A4 panicked "$out/$1.txt" | head -8 >> "$log"
}
run_test late-branches muser_cuda late_branches_join_where_asked
run_test a8-route cuda_route a8
cat "$log"
