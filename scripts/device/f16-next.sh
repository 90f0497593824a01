#!/usr/bin/env bash
# Session 26's first call (built in session 25, not yet run): the f16 route's row maxima
# (MUSER_CUDA_H16_ROWMAX=1: the plain gate / FFN activation kernels fold each row's largest
# magnitude, attn_combine_m folds the combine and the gate, act_h16_m skips the rescan) — the
# kernels through cuda_attention, bit identity through cuda_route's f16 test, then
# Muser-only tg128 / pp512 on the full forge with it off and on, then where a decode token's time
# goes on the f16 route (decode-profile.sh on the 4-layer forge). After build-device.sh here;
# carry .device/muser, .device/tests/cuda_route, .device/tests/cuda_attention (~9 min). Usage: bash scripts/device/f16-next.sh OUTDIR
set -uo pipefail
out=${1:?outdir}
bash scripts/device/forge-bg.sh
MUSER_CUDA_DEADLINE_S=120 timeout 200 .device/tests/cuda_attention --test-threads 1 \
  > "$out/cuda_attention.txt" 2>&1
echo "cuda_attention rc=$?"; grep -E "^test |test result|panicked" -A2 "$out/cuda_attention.txt" | head
MUSER_CUDA_DEADLINE_S=120 timeout 200 .device/tests/cuda_route --test-threads 1 --nocapture f16 \
  > "$out/cuda_route.txt" 2>&1
echo "cuda_route f16 rc=$?"; grep -E "^test |test result|panicked|vs oracle" "$out/cuda_route.txt"
grep -A3 panicked "$out/cuda_route.txt" | head -12
while [ ! -f "$HOME/forge.done" ]; do sleep 2; done
for v in 0 1; do
  MUSER_CUDA_ACTS=f16 MUSER_CUDA_H16_ROWMAX=$v timeout 150 .device/muser bench -m "$HOME/full.gguf" \
    --backend cuda -p 512 -n 128 -d 0,2048 -r 2 > "$out/bench-rowmax$v.txt" 2>&1
  echo "bench rowmax $v rc=$?"; grep -E "pp512|tg128|route" "$out/bench-rowmax$v.txt"
done
MUSER_CUDA_ACTS=f16 timeout 240 bash scripts/device/decode-profile.sh > "$out/decode-profile-f16.txt" 2>&1
echo "decode-profile rc=$?"; head -60 "$out/decode-profile-f16.txt"
