#!/usr/bin/env bash
# The f16 route's decode switches, one warm machine (session 28 ran it: COMBINE_ACT lost, not kept —
# docs/receipts/cuda-session28.txt):
#   MUSER_CUDA_H16_COMBINE_ACT=1  the attention combine's last block per token writes the f16
#                                 activations (attn_combine_h16: same bits, one launch fewer)
# First cuda_attention (attn_combine_h16 against attn_combine_m and act_h16's host mirror), then
# cuda_route's f16 test (its variants include the switch; bits must match) and
# cuda_batched (an f16 variant with it), then pp512 / tg128 on the full forge, default and
# switch alternating (Muser only). Every line goes to $OUT/ab.txt as it comes, so a call cut
# short keeps what it measured (session 27 lost a call's stdout that way).
# Carry .device/muser, .device/tests/cuda_route, .device/tests/cuda_batched,
# .device/tests/cuda_attention.
# Usage: bash scripts/device/f16-decode-ab.sh OUTDIR   (~7 min with the forge)
set -uo pipefail
out=${1:?outdir}
log=$out/ab.txt
bash scripts/device/forge-bg.sh
timeout 200 .device/tests/cuda_attention --test-threads 1 > "$out/cuda_attention.txt" 2>&1
echo "cuda_attention rc=$? $(grep -E 'test result' "$out/cuda_attention.txt")" >> "$log"
grep -A3 panicked "$out/cuda_attention.txt" | head -8 >> "$log"
MUSER_CUDA_DEADLINE_S=120 timeout 200 .device/tests/cuda_route --test-threads 1 --nocapture f16 \
  > "$out/cuda_route.txt" 2>&1
echo "cuda_route f16 rc=$? $(grep -E 'test result' "$out/cuda_route.txt")" >> "$log"
grep -A3 panicked "$out/cuda_route.txt" | head -8 >> "$log"
MUSER_CUDA_DEADLINE_S=120 timeout 240 .device/tests/cuda_batched --test-threads 1 --nocapture \
  batched_decode_equals > "$out/cuda_batched.txt" 2>&1
echo "cuda_batched rc=$? $(grep -E 'test result' "$out/cuda_batched.txt")" >> "$log"
grep -E "f16|panicked" "$out/cuda_batched.txt" | head -8 >> "$log"
while [ ! -f "$HOME/forge.done" ]; do sleep 2; done
for v in "" "MUSER_CUDA_H16_COMBINE_ACT=1" "" "MUSER_CUDA_H16_COMBINE_ACT=1"; do
  env MUSER_CUDA_ACTS=f16 $v timeout 150 .device/muser bench -m "$HOME/full.gguf" --backend cuda \
    -p 512 -n 128 -r 2 > "$out/bench.txt" 2>&1
  echo "${v:-default}: rc=$? $(grep -E "pp512|tg128" "$out/bench.txt" | tr -s ' ' | cut -d'(' -f1 | tr '\n' ' ') $(grep -o "fuse=[^,]*" "$out/bench.txt")" >> "$log"
done
cat "$log"
