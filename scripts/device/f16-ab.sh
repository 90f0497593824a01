#!/usr/bin/env bash
# The f16 route's tile-shape and chain-count switches against the defaults (docs/cuda.md, switch
# table `MUSER_CUDA_MMT`, `MUSER_CUDA_H16_WIDE_S`; first run at dd3d216, receipt
# docs/receipts/cuda-f16-ab-dd3d216.txt), after scripts/device/build-device.sh here and
# scripts/device/cuda-setup.sh there (the full forge):
#   PART=tests: `kernels_h16` (arithmetic, bit identity across decode / rows / tiles) with
#     MUSER_CUDA_MMT=w4b2 and with MUSER_CUDA_H16_WIDE_S=4 (its 1025-group shape takes S = 2 by
#     default), and `cuda_route`'s f16 tests with each (the tiny model's matrices stay under 1024
#     groups: there S changes nothing) (~4 min); carry .device/tests/kernels_h16, .device/tests/cuda_route.
#   PART=bench: `mvh_bench` and Muser-only pp512 / tg128 on the forge for the `w8` tiles (S = 2),
#     w4b2 and wide S = 4 (~2 min; the warpgroup tiles, the default since b4f3c72 / 5d58431, have
#     their own script: mmw-ab.sh); carry .device/muser, .device/mvh_bench.
# Usage: PART=tests|bench bash scripts/device/f16-ab.sh OUTDIR
set -uo pipefail
out=${1:?outdir}
T=.device/tests
variants=("MUSER_CUDA_MMT=w4b2" "MUSER_CUDA_H16_WIDE_S=4")
case "${PART:?PART=tests or PART=bench}" in
tests)
  for v in "${variants[@]}"; do
    tag=${v#MUSER_CUDA_}; tag=${tag//=/-}
    env "$v" MUSER_CUDA_DEADLINE_S=120 timeout 200 $T/kernels_h16 --test-threads 1 \
      > "$out/kernels_h16-$tag.txt" 2>&1
    echo "kernels_h16 $v rc=$?"; grep -E "^test |test result|panicked" "$out/kernels_h16-$tag.txt"
    env "$v" MUSER_CUDA_DEADLINE_S=120 timeout 150 $T/cuda_route --test-threads 1 --nocapture f16 \
      > "$out/cuda_route-$tag.txt" 2>&1
    echo "cuda_route f16 $v rc=$?"
    grep -E "^test |test result|panicked|f16 route vs" "$out/cuda_route-$tag.txt"
  done
  ;;
bench)
  for v in "MUSER_CUDA_MMT=w8" "${variants[@]}"; do
    tag=${v#MUSER_CUDA_}; tag=${tag//=/-}
    env "$v" timeout 90 .device/mvh_bench > "$out/mvh-$tag.txt" 2>&1
    echo "mvh_bench $v rc=$?"; grep -E "FFN gate|output" "$out/mvh-$tag.txt" | grep -E "nt 1:|nt 512:"
  done
  while [ ! -f "$HOME/forge.done" ]; do sleep 2; done
  for v in "MUSER_CUDA_MMT=w8" "${variants[@]}"; do
    tag=${v#MUSER_CUDA_}; tag=${tag//=/-}
    env "$v" MUSER_CUDA_ACTS=f16 timeout 120 .device/muser bench -m "$HOME/full.gguf" \
      --backend cuda -p 512 -n 128 -r 2 > "$out/bench-$tag.txt" 2>&1
    echo "bench $v rc=$?"; grep -E "pp512|tg128|route" "$out/bench-$tag.txt"
  done
  ;;
*) echo "PART=tests or PART=bench" >&2; exit 2 ;;
esac
