#!/usr/bin/env bash
# The f16 route's tensor-core attention (attn_h16.cu, MUSER_CUDA_H16_ATTN=mma) and the split
# warpgroup tiles as defaults, one call after scripts/device/build-device.sh here (carry
# .device/muser, .device/tests/cuda_attention, .device/tests/cuda_route, .device/tests/cuda_batched):
# forges the full model in the background; runs the attention kernel tests (decode vs every
# prefill shape bit for bit, vs an f64 softmax), the f16 route test (chunks, graphs, attention
# shapes bit-identical; KL vs the oracle with either attention) and the batched rows; then
# Muser-only pp512 / tg32 on the forge with the f16 route's attention on mma and on f32, and the
# phase profile of pp512 with mma (~6 min). Usage: bash scripts/device/attn-h16.sh OUTDIR
set -uo pipefail
out=${1:?outdir}
T=.device/tests
bash scripts/device/forge-bg.sh
MUSER_CUDA_DEADLINE_S=120 timeout 200 $T/cuda_attention --test-threads 1 --nocapture \
  > "$out/cuda_attention.txt" 2>&1
echo "cuda_attention rc=$?"; grep -E "^test |test result|panicked" "$out/cuda_attention.txt"
grep -A3 panicked "$out/cuda_attention.txt" | head -12
MUSER_CUDA_DEADLINE_S=120 timeout 200 $T/cuda_route --test-threads 1 --nocapture f16 \
  > "$out/cuda_route.txt" 2>&1
echo "cuda_route f16 rc=$?"; grep -E "^test |test result|panicked|vs oracle" "$out/cuda_route.txt"
grep -A3 panicked "$out/cuda_route.txt" | head -12
MUSER_CUDA_DEADLINE_S=120 timeout 200 $T/cuda_batched --test-threads 1 --nocapture \
  > "$out/cuda_batched.txt" 2>&1
echo "cuda_batched rc=$?"; grep -E "^test |test result|panicked" "$out/cuda_batched.txt"
while [ ! -f "$HOME/forge.done" ]; do sleep 2; done
for v in "mma|MUSER_CUDA_H16_ATTN=mma" "f32|MUSER_CUDA_H16_ATTN=f32"; do
  tag=${v%%|*}
  env ${v#*|} MUSER_CUDA_ACTS=f16 timeout 120 .device/muser bench -m "$HOME/full.gguf" \
    --backend cuda -p 512 -n 32 -r 2 > "$out/bench-$tag.txt" 2>&1
  echo "bench $tag rc=$?"; grep -E "pp512|tg32|route" "$out/bench-$tag.txt"
done
MUSER_CUDA_ACTS=f16 MUSER_CUDA_PROFILE=1 timeout 120 .device/muser bench -m "$HOME/full.gguf" \
  --backend cuda -p 512 -n 0 -r 1 > "$out/profile-mma.txt" 2>&1
echo "profile rc=$?"; grep -iE "phase|ms|attention|ffn|qkv|embed|logits" "$out/profile-mma.txt" | head -20
