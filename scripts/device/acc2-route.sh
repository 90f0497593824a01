#!/usr/bin/env bash
# Issue 5, the two-accumulator order as a route (docs/cuda.md's MUSER_CUDA_MVH_ACC2 row).
# Session 45 measured the decode kernels alone (acc2-experiment.sh: Q4H gains, Q6H loses); the
# prefill tiles (mmt_*, mmw_* / mmws_*) take the same k16 order under the same define for the
# same (format, chains), and since session 47 the warpgroup tiles it splits run at 2 warpgroups
# (at 3 ptxas serializes their wgmma: session 46's static SASS). Two modes are checked and timed:
#   =3  Q4H at S = 4 only (Muse Glimmer's attention output and Q4_K FFN down, the two that
#       gained most: −10% / −17% a launch); FFN gate / up keep their 3-warpgroup tiles;
#   =2  every Q4H matmul (its tiles all at 2 warpgroups: pp512 ~−10% expected, eb802ec).
# Per mode:
#   1. kernels_h16's Q4H test (every kernel kind on the same matrices: the same bits per token
#      whatever the token count; the arithmetic against the reference; the Q6H kernels are the
#      default's under =2 and =3), also with MUSER_CUDA_MMW_MIN=0 so the unsplit warpgroup tiles
#      run on the S = 4 shape too;
#   2. cuda_route's f16 test (chunk 1 / 7 / 512 against each other, bit for bit); the engine lets
#      the experiment run only for timing: MUSER_CUDA_MVH_ACC2_TIMING=1;
#   3. the tiny logits at chunk 512 and 1: both shas must agree with each other (not with the
#      default's: the order changes the numbers).
# Then pp512 + tg128 (+ 4 rows batched: mmh_q4h_s4 grows from 134 to 176 registers under =3) on
# the full forge, the default and each mode in turn, twice.
# A mode becomes a route only if 1-3 hold and decode gains more than prefill gives up (pp512 must
# stay >= 1.5x llama.cpp's; batched 4 rows >= 3.5x one), then with parity (scripts/parity.py)
# and the determinism gates.
# Carry .device/muser, .device/tests/kernels_h16, .device/tests/cuda_route (build-device.sh).
# Usage: [MODES="3 2"] bash scripts/device/acc2-route.sh OUTDIR
set -uo pipefail
out=${1:?outdir}
log=$out/acc2-route.txt
modes=${MODES:-3}
bash scripts/device/forge-bg.sh
source scripts/device/ab-lib.sh
tg=("")
for m in $modes; do
  a2="MUSER_CUDA_MVH_ACC2=$m MUSER_CUDA_MVH_ACC2_TIMING=1"
  tg+=("$a2")
  for mm in 1024 0; do
    env MUSER_CUDA_MVH_ACC2=$m MUSER_CUDA_MMW_MIN=$mm MUSER_CUDA_DEADLINE_S=120 timeout 300 \
      .device/tests/kernels_h16 --test-threads 1 mvh_q4h > "$out/kernels_h16-$m-$mm.txt" 2>&1
    echo "kernels_h16 ACC2=$m MMW_MIN=$mm rc=$? $(grep -E 'test result' "$out/kernels_h16-$m-$mm.txt" | tail -1)" >> "$log"
    grep -A4 panicked "$out/kernels_h16-$m-$mm.txt" | head -8 >> "$log"
  done
  env $a2 MUSER_CUDA_DEADLINE_S=120 timeout 300 .device/tests/cuda_route --test-threads 1 f16 \
    > "$out/cuda_route-$m.txt" 2>&1
  echo "cuda_route f16 ACC2=$m rc=$? $(grep -E 'test result' "$out/cuda_route-$m.txt" | tail -1)" >> "$log"
  grep -A4 panicked "$out/cuda_route-$m.txt" | head -8 >> "$log"
done
ab_tiny_logits "$log" "$out" "${tg[@]}"  # the default and each mode
while [ ! -f "$HOME/forge.done" ]; do sleep 2; done
for r in 1 2; do
  for v in "${tg[@]}"; do
    env $v timeout 150 .device/muser bench -m "$HOME/full.gguf" --backend cuda -p 512 -n 128 -b 1,4 \
      -r 2 > "$out/bench.txt" 2>&1
    echo "${v:-default}: rc=$? $(grep -E 'pp512|tg128' "$out/bench.txt" | tr -s ' ' | cut -d'(' -f1 | tr '\n' ' ') $(grep -o 'mv=[^,]*\|mm=[^,]*' "$out/bench.txt" | head -2 | tr '\n' ' ')" >> "$log"
  done
done
cat "$log"
