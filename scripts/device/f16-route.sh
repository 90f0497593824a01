#!/usr/bin/env bash
# The f16 route on the H200 (docs/cuda-f16.md), one call of
# about 6 minutes, alone on the GPU, after scripts/device/build-device.sh here and
# scripts/device/cuda-setup.sh there (the full-size forge): the kernel tests, a clean
# mvh_bench beside the A8 kernels' benchmarks on the same shapes, the engine route's device
# tests, then Muser-only tg128 / pp512 on the forge, f16 route against the default.
# Parity next, in its own call: MUSER_CUDA_ACTS=f16 FIXTURES=tiny,small bash
# scripts/device/cuda-issue4.sh $OUT parity (gemma-3-270m's Q5_0 / Q8_0 are refused on f16).
# Usage: bash scripts/device/f16-route.sh OUTDIR
set -uo pipefail
out=${1:?outdir}
T=.device/tests
MUSER_CUDA_DEADLINE_S=120 timeout 240 $T/kernels_h16 --test-threads 1 > "$out/kernels_h16.txt" 2>&1
echo "kernels_h16 rc=$?"; grep -E "^test |test result|panicked" "$out/kernels_h16.txt"
# SKIP_KBENCH=1: no kernel benchmarks (the carried .device may then hold only muser and tests).
if [ -z "${SKIP_KBENCH:-}" ]; then
  timeout 120 .device/mvh_bench > "$out/mvh.txt" 2>&1; echo "mvh_bench rc=$?"
  timeout 120 .device/mvb_bench --a8 > "$out/mvb-a8.txt" 2>&1; echo "mvb_bench rc=$?"
  timeout 120 .device/mmq_bench --a8 > "$out/mmq-a8.txt" 2>&1; echo "mmq_bench rc=$?"
fi
for t in "cuda_route f16" "cuda_batched batched_decode_equals"; do
  set -- $t
  MUSER_CUDA_DEADLINE_S=120 timeout 300 $T/$1 --test-threads 1 --nocapture "$2" > "$out/$1-$2.txt" 2>&1
  echo "$1 $2 rc=$?"; grep -E "^test |test result|panicked|f16 route vs|bit-identical" "$out/$1-$2.txt"
done
if [ -f "$HOME/forge.done" ]; then
  for acts in f16 default; do
    env $([ $acts = f16 ] && echo MUSER_CUDA_ACTS=f16) timeout 240 .device/muser bench \
      -m "$HOME/full.gguf" --backend cuda -p 512 -n 128 -r 2 > "$out/bench-$acts.txt" 2>&1
    echo "bench $acts rc=$?"; grep -E "pp512|tg128|route" "$out/bench-$acts.txt"
  done
fi
