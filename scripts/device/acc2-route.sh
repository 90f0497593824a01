#!/usr/bin/env bash
# Issue 5, the two-accumulator order as a route (session 45; docs/cuda.md's MUSER_CUDA_MVH_ACC2
# row). Session 45 measured the decode kernels alone (acc2-experiment.sh: Q4H gains, Q6H loses);
# since then the prefill tiles (mmt_*, mmw_* / mmws_*) take the same k16 order under the same
# define, so MUSER_CUDA_MVH_ACC2=2 (Q4H only) should keep every output's bits across decode,
# batched rows and prefill. This call checks that and times both sides:
#   1. kernels_h16 under ACC2=2 (every kernel kind on the same matrices: the same bits per token
#      whatever the token count; the arithmetic against the reference);
#   2. cuda_route's f16 test under ACC2=2 (chunk 1 / 7 / 512 against each other, bit for bit);
#      the engine lets it run only as a timing experiment: MUSER_CUDA_MVH_ACC2_TIMING=1;
#   3. the tiny logits at chunk 512 and 1 under ACC2=2: both shas must agree with each other
#      (not with the default's: the order changes the numbers);
#   4. pp512 + tg128 on the full forge, alternating twice: the default, ACC2=2 (its mmw tiles
#      spill 268 bytes at MMW_WG=3: static SASS), ACC2=2 with MMW_WG=2 (245 registers, no
#      spill; but WG=2 cost the default's pp512 ~10% in eb802ec). Session 46's static SASS: at
#      WG=3 ptxas also serializes every wgmma of those tiles (C7512, kernel-sass.py prints it),
#      so expect the middle variant's pp512 to fall far; it is timed to put a number on it.
# It becomes a route only if 1-3 hold and decode gains more than prefill can give up (pp512
# must stay >= 1.5x llama.cpp's), then with parity (scripts/parity.py) and the determinism gates.
# Carry .device/muser, .device/tests/kernels_h16, .device/tests/cuda_route (build-device.sh).
# Usage: bash scripts/device/acc2-route.sh OUTDIR
set -uo pipefail
out=${1:?outdir}
log=$out/acc2-route.txt
a2="MUSER_CUDA_MVH_ACC2=2 MUSER_CUDA_MVH_ACC2_TIMING=1"
bash scripts/device/forge-bg.sh
source scripts/device/ab-lib.sh
env MUSER_CUDA_MVH_ACC2=2 MUSER_CUDA_DEADLINE_S=120 timeout 300 .device/tests/kernels_h16 \
  --test-threads 1 > "$out/kernels_h16.txt" 2>&1
echo "kernels_h16 ACC2=2 rc=$? $(grep -E 'test result' "$out/kernels_h16.txt" | tail -1)" >> "$log"
grep -A4 panicked "$out/kernels_h16.txt" | head -8 >> "$log"
env $a2 MUSER_CUDA_DEADLINE_S=120 timeout 300 .device/tests/cuda_route --test-threads 1 f16 \
  > "$out/cuda_route.txt" 2>&1
echo "cuda_route f16 ACC2=2 rc=$? $(grep -E 'test result' "$out/cuda_route.txt" | tail -1)" >> "$log"
grep -A4 panicked "$out/cuda_route.txt" | head -8 >> "$log"
ab_tiny_logits "$log" "$out" "" "$a2"
variants tg "${TG:-;$a2;$a2 MUSER_CUDA_MMW_WG=2}"
while [ ! -f "$HOME/forge.done" ]; do sleep 2; done
for r in 1 2; do
  for v in "${tg[@]}"; do
    env $v timeout 120 .device/muser bench -m "$HOME/full.gguf" --backend cuda -p 512 -n 128 -r 2 \
      > "$out/bench.txt" 2>&1
    echo "${v:-default}: rc=$? $(grep -E 'pp512|tg128' "$out/bench.txt" | tr -s ' ' | cut -d'(' -f1 | tr '\n' ' ') $(grep -o 'mv=[^,]*\|mm=[^,]*' "$out/bench.txt" | head -2 | tr '\n' ' ')" >> "$log"
  done
done
cat "$log"
