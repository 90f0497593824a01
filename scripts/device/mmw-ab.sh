#!/usr/bin/env bash
# The warpgroup-MMA prefill tiles (`MUSER_CUDA_MMT=wg`, mmw_h16.cu) against the default `w8` tiles,
# one call after scripts/device/build-device.sh here (carry .device/muser, .device/mvh_bench,
# .device/tests/kernels_h16, .device/tests/cuda_route): forges the full model in the background,
# runs `kernels_h16` (mmw vs mvh bit identity on Q4H / Q6H, every chain count and shape:
# MUSER_CUDA_MMW_MIN=0) and the f16 `cuda_route` tests with wg, `mvh_bench` at both (every matrix
# on mmw), then Muser-only pp512 / tg32 on the forge at w8, wg (mmw from 1024 row groups) and
# wg with MUSER_CUDA_MMW_MIN=0 (~5 min). Usage: bash scripts/device/mmw-ab.sh OUTDIR
set -uo pipefail
out=${1:?outdir}
T=.device/tests
[ -f "$HOME/forge.done" ] || setsid nohup bash -c \
  ".device/muser forge --preset full --seed 7 -o $HOME/full.gguf > $HOME/forge.log 2>&1; touch $HOME/forge.done" \
  > /dev/null 2>&1 < /dev/null &
MUSER_CUDA_MMT=wg MUSER_CUDA_MMW_MIN=0 MUSER_CUDA_DEADLINE_S=120 timeout 240 $T/kernels_h16 --test-threads 1 \
  > "$out/kernels_h16-wg.txt" 2>&1
echo "kernels_h16 wg rc=$?"; grep -E "^test |test result|panicked|differ" "$out/kernels_h16-wg.txt" | head -20
MUSER_CUDA_MMT=wg MUSER_CUDA_DEADLINE_S=120 timeout 150 $T/cuda_route --test-threads 1 --nocapture f16 \
  > "$out/cuda_route-wg.txt" 2>&1
echo "cuda_route f16 wg rc=$?"; grep -E "^test |test result|panicked|f16 route vs" "$out/cuda_route-wg.txt"
for v in w8 wg; do
  # wg: every matrix on mmw (MUSER_CUDA_MMW_MIN acts on wg only)
  [ $v = wg ] && export MUSER_CUDA_MMW_MIN=0 || unset MUSER_CUDA_MMW_MIN
  MUSER_CUDA_MMT=$v timeout 90 .device/mvh_bench > "$out/mvh-$v.txt" 2>&1
  echo "mvh_bench $v rc=$?"; grep -E "nt 512:" "$out/mvh-$v.txt" | grep -E "Mmt|Mmw"
done
while [ ! -f "$HOME/forge.done" ]; do sleep 2; done
for v in w8:1024 wg:1024 wg:0; do
  mm=${v%%:*}; min=${v#*:}; [ $mm = wg ] && export MUSER_CUDA_MMW_MIN=$min || unset MUSER_CUDA_MMW_MIN
  MUSER_CUDA_MMT=$mm MUSER_CUDA_ACTS=f16 timeout 120 .device/muser bench -m "$HOME/full.gguf" \
    --backend cuda -p 512 -n 32 -r 2 > "$out/bench-${v%%:*}${v#*:}.txt" 2>&1
  echo "bench $v rc=$?"; grep -E "pp512|tg32|route" "$out/bench-${v%%:*}${v#*:}.txt"
done
