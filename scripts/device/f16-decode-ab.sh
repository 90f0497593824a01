#!/usr/bin/env bash
# Session 27's first call (built in session 26, not yet run): the f16 route's decode switches
# with programmatic dependent launch now on by default —
#   MUSER_CUDA_MVH_EARLY=1   the matmuls' first weight piece before the PDL wait (same bits)
#   MUSER_CUDA_MVH_BULK=2    the bulk-copy ring (its first piece before the wait; same bits;
#                            neutral without PDL: 120.78 vs 120.96)
#   MUSER_CUDA_H16_MID_S=8   8 chains for the attention output and FFN down (part of the numbers)
#   MUSER_CUDA_H16_NARROW_S=16  16 chains for Q and the attention gate (part of the numbers)
#   MUSER_CUDA_H16_GLU=1     the FFN's gate, up and SwiGLU in one decode launch (same bits)
# First cuda_route's f16 test (its variants include H16_GLU=1) with the chain counts raised
# (decode and prefill kernels must still agree bit for bit), with MVH_EARLY, and as built, then mvh_bench --decode per chain setting, then
# pp512 / tg128 on the full forge per variant, the default first and last (Muser only).
# Carry .device/muser, .device/mvh_bench, .device/tests/cuda_route (and with FULL_TESTS=1
# .device/tests/cuda_batched).
# Usage: bash scripts/device/f16-decode-ab.sh OUTDIR   (~9 min)
set -uo pipefail
out=${1:?outdir}
bash scripts/device/forge-bg.sh
for v in "MUSER_CUDA_H16_MID_S=8 MUSER_CUDA_H16_NARROW_S=16" "MUSER_CUDA_MVH_EARLY=1" \
  "MUSER_CUDA_H16_GLU=0"; do
  env $v MUSER_CUDA_DEADLINE_S=120 timeout 200 .device/tests/cuda_route --test-threads 1 \
    --nocapture f16 > "$out/cuda_route.txt" 2>&1
  echo "cuda_route f16 ($v) rc=$?"; grep -E "test result|panicked|vs oracle" "$out/cuda_route.txt"
  grep -A3 panicked "$out/cuda_route.txt" | head -8
done
for v in "" "MUSER_CUDA_H16_MID_S=8" "MUSER_CUDA_H16_NARROW_S=16"; do
  env $v timeout 120 .device/mvh_bench --decode > "$out/mvh.txt" 2>&1
  echo "== mvh_bench ${v:-default} rc=$?"; grep -E "nt 1:" "$out/mvh.txt"
done
while [ ! -f "$HOME/forge.done" ]; do sleep 2; done
for v in "" "MUSER_CUDA_H16_GLU=1" "MUSER_CUDA_MVH_EARLY=1" "MUSER_CUDA_MVH_BULK=2" \
  "MUSER_CUDA_H16_MID_S=8" "MUSER_CUDA_H16_NARROW_S=16" "MUSER_CUDA_H16_GLU=1" \
  "MUSER_CUDA_H16_GLU=1 MUSER_CUDA_MVH_EARLY=1" ""; do
  env MUSER_CUDA_ACTS=f16 $v timeout 150 .device/muser bench -m "$HOME/full.gguf" --backend cuda \
    -p 512 -n 128 -r 2 > "$out/bench.txt" 2>&1
  echo "${v:-default}: $(grep -E "pp512|tg128" "$out/bench.txt" | tr -s ' ' | cut -d'(' -f1 | tr '\n' ' ') $(grep -o "mv=[^,]*" "$out/bench.txt")"
done
# FULL_TESTS=1 (carry .device/tests/cuda_batched too): every cuda_route and cuda_batched test on
# the commit as built — the default route's combine now takes its gate from common.cuh's
# ew_sigmoid_gate (the same expression), and f16 batched rows launch with PDL by default.
if [ -n "${FULL_TESTS:-}" ]; then
  for t in cuda_route cuda_batched; do
    MUSER_CUDA_DEADLINE_S=120 timeout 400 .device/tests/$t --test-threads 1 > "$out/$t-full.txt" 2>&1
    echo "$t (all) rc=$?"; grep -E "test result|panicked" "$out/$t-full.txt"
  done
fi
