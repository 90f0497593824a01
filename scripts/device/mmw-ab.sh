#!/usr/bin/env bash
# The warpgroup-MMA prefill tiles (`MUSER_CUDA_MMT=wg`, mmw_h16.cu) against the default `w8` tiles,
# one call after scripts/device/build-device.sh here (carry .device/muser, .device/mvh_bench,
# .device/tests/kernels_h16, .device/tests/cuda_route): forges the full model in the background,
# runs `kernels_h16` (mmw vs mvh bit identity on Q4H / Q6H, every chain count and shape:
# MUSER_CUDA_MMW_MIN=0; set MMW_WG=2 in the environment to test that shape) and the f16
# `cuda_route` tests with wg, `mvh_bench` for w8 and for every matrix on mmw at 3 and 2
# warpgroups per block, then Muser-only pp512 / tg32 on the forge at w8, wg (mmw from 1024 row
# groups, unsplit), wg on every matrix, that at 2 warpgroups, and the split tiles (the default
# since session 25, MUSER_CUDA_MMW_SPLIT=1: FFN down and O as one block per (tile, chain), then
# the fold) (~7 min). Usage: bash scripts/device/mmw-ab.sh OUTDIR
set -uo pipefail
out=${1:?outdir}
T=.device/tests
bash scripts/device/forge-bg.sh
MUSER_CUDA_MMT=wg MUSER_CUDA_MMW_MIN=0 MUSER_CUDA_MMW_WG=${MMW_WG:-3} MUSER_CUDA_DEADLINE_S=120 \
  timeout 240 $T/kernels_h16 --test-threads 1 \
  > "$out/kernels_h16-wg.txt" 2>&1
echo "kernels_h16 wg rc=$?"; grep -E "^test |test result|panicked|differ" "$out/kernels_h16-wg.txt" | head -20
# The split tiles on the test's 128- and 416-group shapes (mmw on the 1025-group one).
MUSER_CUDA_MMT=wg MUSER_CUDA_MMW_SPLIT=1 MUSER_CUDA_DEADLINE_S=120 timeout 240 $T/kernels_h16 \
  --test-threads 1 > "$out/kernels_h16-wgs.txt" 2>&1
echo "kernels_h16 wg split rc=$?"; grep -E "^test |test result|panicked" "$out/kernels_h16-wgs.txt"
MUSER_CUDA_MMT=wg MUSER_CUDA_DEADLINE_S=120 timeout 150 $T/cuda_route --test-threads 1 --nocapture f16 \
  > "$out/cuda_route-wg.txt" 2>&1
echo "cuda_route f16 wg rc=$?"; grep -E "^test |test result|panicked|f16 route vs" "$out/cuda_route-wg.txt"
# Each variant: a tag and its environment (MUSER_CUDA_MMW_* act on MUSER_CUDA_MMT=wg only).
V_KERN=("w8|MUSER_CUDA_MMT=w8" "wg0|MUSER_CUDA_MMT=wg MUSER_CUDA_MMW_MIN=0"
        "wg0x2|MUSER_CUDA_MMT=wg MUSER_CUDA_MMW_MIN=0 MUSER_CUDA_MMW_WG=2"
        "wgs|MUSER_CUDA_MMT=wg MUSER_CUDA_MMW_SPLIT=1")
for v in "${V_KERN[@]}"; do
  tag=${v%%|*}
  env ${v#*|} timeout 90 .device/mvh_bench > "$out/mvh-$tag.txt" 2>&1
  echo "mvh_bench $tag rc=$?"; grep -E "nt 512:" "$out/mvh-$tag.txt" | grep -E "Mmt|Mmw"
done
while [ ! -f "$HOME/forge.done" ]; do sleep 2; done
V_RUN=("w8|MUSER_CUDA_MMT=w8" "wg|MUSER_CUDA_MMT=wg MUSER_CUDA_MMW_SPLIT=0" "wg0|MUSER_CUDA_MMT=wg MUSER_CUDA_MMW_MIN=0"
       "wg0x2|MUSER_CUDA_MMT=wg MUSER_CUDA_MMW_MIN=0 MUSER_CUDA_MMW_WG=2"
       "wgs|MUSER_CUDA_MMT=wg MUSER_CUDA_MMW_SPLIT=1")
for v in "${V_RUN[@]}"; do
  tag=${v%%|*}
  env ${v#*|} MUSER_CUDA_ACTS=f16 timeout 120 .device/muser bench -m "$HOME/full.gguf" \
    --backend cuda -p 512 -n 32 -r 2 > "$out/bench-$tag.txt" 2>&1
  echo "bench $tag rc=$?"; grep -E "pp512|tg32|route" "$out/bench-$tag.txt"
done
