#!/usr/bin/env bash
# The small steps' switches (crate muser_cuda::step_switches): the fused norm's thread layout
# (MUSER_CUDA_NORM_H16=auto|shfl|smem|unit|cl8) and the wide attention combine from N partials
# (MUSER_CUDA_COMBINE_WIDE=N). One call; every line into $OUT/ab.txt. Times (H200, session 32): the
# forge ~3 min in the background, then ~100 s per DV entry (the default included) at four depths
# with pp512 — the default and two variants fit one call after the forge.
#   1. cuda_route's f16 test under COMBINE_WIDE=1 (its variants against its unfused base, bit
#      for bit);
#   2. `muser eval` on the tiny forge, 1100 tokens, MUSER_CUDA_ATTN_SUPER=32, chunk 512 and 1:
#      default, NORM_H16=unit, NORM_H16=smem, COMBINE_WIDE=0 — every sha must be equal;
#   3. tg128 on the full forge: default and each of TG alternating, twice;
#   4. tg128 (and ppPP with PP > 0) at depths DEPTHS for the default and each of DV.
# Session 34 (docs/receipts/cuda-session34.txt) ran it with ROUTE_V / LOGITS_V / DV naming
#   COMBINE_WIDE, COMBINE_PIPE, ATTN_COLS and ATTN_EARLY; since then COMBINE_WIDE=8 with
#   COMBINE_PIPE=1 and ATTN_EARLY=1 are the defaults (their "off" forms: =0); session 35
#   (cuda-session35.txt) measured ATTN_FLAT_EXP, ATTN_ROWCOPY (since the defaults) and ROPE_EARLY.
# LOGITS_V, ROUTE_V and TG (variants separated by spaces, or by ';' when one sets several
# variables) replace steps 2's, 1's ("-": as is) and 3's lists. ATTN_V (';'-separated) first
# runs the device test cuda_attention under each variant (its output into $OUT/attn-N.txt).
# ROUTE=0 / LOGITS=0 skip steps 1 / 2 (their same-bits checks already ran); TG="" skips step 3,
# BENCH=0 step 4 (the forge then keeps running in the background for the next call).
# Usage: [ATTN_V="...;..."] [TG="..."] [DV="...;..."] [DEPTHS=2048,32768] [PP=0]
#        bash scripts/device/steps-ab.sh OUTDIR
set -uo pipefail
out=${1:?outdir}
log=$out/ab.txt
source scripts/device/ab-lib.sh
bash scripts/device/forge-bg.sh
IFS=';' read -r -a av <<< "${ATTN_V:-}"
n=0
for v in "${av[@]}"; do
  n=$((n + 1))
  env $v MUSER_CUDA_DEADLINE_S=120 timeout 200 .device/tests/cuda_attention --test-threads 1 \
    > "$out/attn-$n.txt" 2>&1
  echo "cuda_attention with $v rc=$? $(grep -E 'test result' "$out/attn-$n.txt")" >> "$log"
  grep -A4 panicked "$out/attn-$n.txt" | head -8 >> "$log"
done
# (Not MUSER_CUDA_NORM_H16: the test's base session is unfused, which refuses it.)
variants rv "${ROUTE_V:-MUSER_CUDA_COMBINE_WIDE=1}"
for v in "${rv[@]}"; do
  [ "${ROUTE:-1}" = 0 ] && break
  [ "$v" = - ] && v=""
  env $v MUSER_CUDA_DEADLINE_S=120 timeout 300 .device/tests/cuda_route --test-threads 1 f16 \
    > "$out/cuda_route.txt" 2>&1
  echo "cuda_route f16 with $v rc=$? $(grep -E 'test result' "$out/cuda_route.txt")" >> "$log"
  grep -A4 panicked "$out/cuda_route.txt" | head -8 >> "$log"
done
variants lv "${LOGITS_V:-MUSER_CUDA_NORM_H16=unit MUSER_CUDA_NORM_H16=smem MUSER_CUDA_COMBINE_WIDE=0}"
[ "${LOGITS:-1}" = 0 ] || ab_tiny_logits "$log" "$out" "" "${lv[@]}"
variants tg "${TG-MUSER_CUDA_NORM_H16=unit MUSER_CUDA_NORM_H16=smem}"
[ ${#tg[@]} = 0 ] || ab_tg "$log" "$out" "" "${tg[@]}"
IFS=';' read -r -a dv <<< "${DV:-MUSER_CUDA_COMBINE_WIDE=0;MUSER_CUDA_ATTN_EARLY=0}"
[ "${BENCH:-1}" = 0 ] && dv=() && { cat "$log"; exit 0; }
while [ ! -f "$HOME/forge.done" ]; do sleep 2; done
for v in "" "${dv[@]}"; do
  env $v timeout 300 .device/muser bench -m "$HOME/full.gguf" --backend cuda -p "${PP:-0}" \
    -n 128 -d "${DEPTHS:-2048,32768}" -r 2 > "$out/bench.txt" 2>&1
  echo "${v:-default}: rc=$? $(grep -E "pp[0-9]+|tg128" "$out/bench.txt" | tr -s ' ' | cut -d'(' -f1 | tr '\n' ';') $(grep -o "fuse=[^,]*\|attn=[^,]*" "$out/bench.txt" | head -2 | tr '\n' ' ')" >> "$log"
done
cat "$log"
