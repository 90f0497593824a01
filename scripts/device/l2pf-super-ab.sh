#!/usr/bin/env bash
# Session 30's leads, one call (docs/cuda-f16.md "Session 30"); every line into $OUT/ab.txt as
# it comes:
#   1. the prefetch branch's device tests: muser_cuda's `prefetch` unit test and cuda_route's f16
#      test (its variants include MUSER_CUDA_L2_PREFETCH, bit-identical logits required);
#   2. tg128 on the full forge with MUSER_CUDA_L2_PREFETCH = 0 and each of PF (MiB per prefetch
#      point), alternating, twice;
#   3. MUSER_CUDA_ATTN_SUPER = each of SUPERS: pp512 and tg128 at depths 0, 8192, 32768 (a numbers
#      change: the key-range partition; parity needed before any default moves).
# Carry .device/muser, .device/tests/muser_cuda, .device/tests/cuda_route. ~8 min with the forge.
# Usage: [PF="8 16 24 32"] [SUPERS="128 64 32"] bash scripts/device/l2pf-super-ab.sh OUTDIR
set -uo pipefail
out=${1:?outdir}
log=$out/ab.txt
bash scripts/device/forge-bg.sh
timeout 120 .device/tests/muser_cuda --test-threads 1 prefetch > "$out/muser_cuda.txt" 2>&1
echo "muser_cuda prefetch rc=$? $(grep -E 'test result' "$out/muser_cuda.txt")" >> "$log"
MUSER_CUDA_DEADLINE_S=120 timeout 300 .device/tests/cuda_route --test-threads 1 f16 \
  > "$out/cuda_route.txt" 2>&1
echo "cuda_route f16 rc=$? $(grep -E 'test result' "$out/cuda_route.txt")" >> "$log"
grep -A4 panicked "$out/cuda_route.txt" | head -8 >> "$log"
while [ ! -f "$HOME/forge.done" ]; do sleep 2; done
read -r -a pf <<< "${PF:-8 16 24 32}"
for r in 1 2; do
  for v in 0 "${pf[@]}"; do
    MUSER_CUDA_L2_PREFETCH=$v timeout 90 .device/muser bench -m "$HOME/full.gguf" --backend cuda \
      -p 0 -n 128 -r 2 > "$out/bench.txt" 2>&1
    echo "l2pf $v: rc=$? $(grep -E "tg128" "$out/bench.txt" | tr -s ' ' | cut -d'(' -f1) $(grep -o "mode=[^,]*" "$out/bench.txt" | head -1)" >> "$log"
  done
done
for v in ${SUPERS:-128 64 32}; do
  MUSER_CUDA_ATTN_SUPER=$v timeout 200 .device/muser bench -m "$HOME/full.gguf" --backend cuda \
    -p 512 -n 128 -d 0,8192,32768 -r 2 > "$out/bench.txt" 2>&1
  echo "super $v: rc=$? $(grep -E "pp512|tg128" "$out/bench.txt" | tr -s ' ' | cut -d'(' -f1 | tr '\n' ';')" >> "$log"
done
cat "$log"
