#!/usr/bin/env bash
# Session 30's leads (docs/cuda-f16-history.md "Session 30"), two calls; every line into $OUT/ab.txt as
# it comes.
# PART=1 (~9 min with the forge):
#   1. the prefetch branch's device tests: muser_cuda's `prefetch` unit test and cuda_route's f16
#      test (its variants include MUSER_CUDA_L2_PREFETCH, bit-identical logits required);
#      and cuda_route's f16 test again with MUSER_CUDA_NORM_H16=smem (session 30: NORM_SMEM=1; its fused-norm variants
#      against the unfused kernels, bit for bit);
#   2. the same logits with each candidate that must not change them: `muser eval` on the tiny
#      forge, 1100 tokens, MUSER_CUDA_ATTN_SUPER=32 (35 partials per late token, so the wide
#      combine's 32-partial chunks are crossed), chunk 512 and 1: default, COMBINE_WIDE=1,
#      L2_PREFETCH=16, NORM_H16=smem — every sha must be equal;
#   3. tg128 on the full forge, the default and each of TG (L2_PREFETCH 8 / 16 / 24 / 32 MiB per
#      prefetch point, NORM_H16=smem), alternating, twice.
# PART=2 (~6 min): pp512 and tg128 at depths 0 and 32768 for each of VARIANTS (default: the
#   attention partition MUSER_CUDA_ATTN_SUPER 128 / 64 / 32 — a numbers change, parity needed
#   before any default moves — and the wide combine, alone and with super 32).
# Carry .device/muser, .device/tests/muser_cuda, .device/tests/cuda_route.
# Usage: PART=1|2 [TG="MUSER_CUDA_L2_PREFETCH=8 ..."] [VARIANTS="..."] bash scripts/device/l2pf-super-ab.sh OUTDIR
set -uo pipefail
out=${1:?outdir}
log=$out/ab.txt
source scripts/device/ab-lib.sh
bash scripts/device/forge-bg.sh
if [ "${PART:-1}" = 1 ]; then
  timeout 120 .device/tests/muser_cuda --test-threads 1 prefetch > "$out/muser_cuda.txt" 2>&1
  echo "muser_cuda prefetch rc=$? $(grep -E 'test result' "$out/muser_cuda.txt")" >> "$log"
  MUSER_CUDA_DEADLINE_S=120 timeout 300 .device/tests/cuda_route --test-threads 1 f16 \
    > "$out/cuda_route.txt" 2>&1
  echo "cuda_route f16 rc=$? $(grep -E 'test result' "$out/cuda_route.txt")" >> "$log"
  grep -A4 panicked "$out/cuda_route.txt" | head -8 >> "$log"
  MUSER_CUDA_NORM_H16=smem MUSER_CUDA_DEADLINE_S=120 timeout 300 .device/tests/cuda_route \
    --test-threads 1 f16 > "$out/cuda_route.txt" 2>&1
  echo "cuda_route f16 with MUSER_CUDA_NORM_H16=smem rc=$? $(grep -E 'test result' "$out/cuda_route.txt")" >> "$log"
  grep -A4 panicked "$out/cuda_route.txt" | head -8 >> "$log"
  ab_tiny_logits "$log" "$out" "" MUSER_CUDA_COMBINE_WIDE=1 MUSER_CUDA_L2_PREFETCH=16 \
    MUSER_CUDA_NORM_H16=smem
  read -r -a tg <<< "${TG:-MUSER_CUDA_L2_PREFETCH=8 MUSER_CUDA_L2_PREFETCH=16 MUSER_CUDA_L2_PREFETCH=24 MUSER_CUDA_L2_PREFETCH=32 MUSER_CUDA_NORM_H16=smem}"
  ab_tg "$log" "$out" "" "${tg[@]}"
else
  while [ ! -f "$HOME/forge.done" ]; do sleep 2; done
  IFS=';' read -r -a vs <<< "${VARIANTS:-MUSER_CUDA_ATTN_SUPER=128;MUSER_CUDA_ATTN_SUPER=64;MUSER_CUDA_ATTN_SUPER=32;MUSER_CUDA_COMBINE_WIDE=1;MUSER_CUDA_ATTN_SUPER=32 MUSER_CUDA_COMBINE_WIDE=1}"
  for v in "${vs[@]}"; do
    env $v timeout 150 .device/muser bench -m "$HOME/full.gguf" --backend cuda -p 512 -n 128 \
      -d 0,32768 -r 2 > "$out/bench.txt" 2>&1
    echo "$v: rc=$? $(grep -E "pp512|tg128" "$out/bench.txt" | tr -s ' ' | cut -d'(' -f1 | tr '\n' ';') $(grep -o "attn=[^,]*" "$out/bench.txt" | head -1)" >> "$log"
  done
fi
cat "$log"
