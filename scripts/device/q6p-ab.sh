#!/usr/bin/env bash
# The next device session's measurements (branches wip/q6p-default, wip/a8-decode): the CUDA
# tests (every binary of .device/tests, kernels_a8 included); kernel times per layer
# (`mvb_bench`: one-token and packed passes, tensor-core rows, with and without --q6pad; the A8
# one-token kernels, --a8, with and without a 6-blocks-per-SM register cap; the register-
# resident ones, --a8r, at 2 / 4 / 8 rows per warp, with the next row ahead, capped) and the prefill
# matmuls (`mmq_bench --a8`: A16 and A8); then end to end on the full-size forge (after
# `scripts/device/cuda-setup.sh`), alternating: Q6_PAD 0 and 1 and the A8 route
# (`MUSER_CUDA_ACTS=a8`, fused quantization as A16's; also with the register-resident decode
# kernels, `MUSER_CUDA_MVR=1`): tg128 and pp512; tg64 at 4 and 8 rows with Q6_PAD 0 and 1. Build first: scripts/device/build-device.sh.
# Usage: bash scripts/device/q6p-ab.sh OUTDIR   (TESTS=0 skips the tests, KB=0 the kernel
# benchmarks, E2E=0 the end to end, REPS the end-to-end repetitions (2); ~14 min in all: two calls, e.g. E2E=0, then TESTS=0 KB=0)
set -uo pipefail
out=${1:?outdir}
M=.device/muser
if [ "${TESTS:-1}" = 1 ]; then
  MUSER_CUDA_DEADLINE_S=60 timeout 300 bash scripts/device/cuda-tests.sh > "$out/tests.txt" 2>&1
  echo "tests rc=$?"
  grep -E "^== |test result|panicked|FAILED|differ" "$out/tests.txt" | head -40
fi
if [ "${KB:-1}" = 1 ]; then
  for f in "" "--q6pad"; do
    echo "== mvb_bench $f"
    timeout 90 .device/mvb_bench $f 2>&1 | grep -E "^nt |Q6"
    echo "== mvb_bench --mmv $f"
    timeout 90 .device/mvb_bench --mmv $f 2>&1 | grep -E "^nt "
  done
  for v in "" "MUSER_CUDA_MVA_MINB=6"; do
    echo "== mvb_bench --q6pad $v"
    env $v timeout 90 .device/mvb_bench --q6pad 2>&1 | grep -E "^nt 1|^  "
    echo "== mvb_bench --a8 $v"
    env $v timeout 90 .device/mvb_bench --a8 2>&1 | grep -E "^nt 1|^  |panicked"
  done
  for v in "" "MUSER_CUDA_MVR_ROWS=2" "MUSER_CUDA_MVR_ROWS=8" "MUSER_CUDA_MVR_AHEAD=1" "MUSER_CUDA_MVA_MINB=4"; do
    echo "== mvb_bench --a8r $v"
    env $v timeout 90 .device/mvb_bench --a8r 2>&1 | grep -E "^nt 1|^  |panicked"
  done
  echo "== mmq_bench --a8 (512 tokens; A16 and A8, Q6_K in Q6_K-P)"
  timeout 120 .device/mmq_bench --a8 2>&1 | grep -E "mmq|panicked"
fi
[ "${E2E:-1}" = 1 ] || exit 0
while [ ! -f $HOME/forge.done ]; do sleep 2; done
for rep in $(seq 1 ${REPS:-2}); do
  for v in MUSER_CUDA_Q6_PAD=0 MUSER_CUDA_Q6_PAD=1 MUSER_CUDA_ACTS=a8 MUSER_CUDA_ACTS=a8,MUSER_CUDA_MVR=1; do
    echo "== $v (rep $rep)"
    env ${v//,/ } $M bench -m $HOME/full.gguf --backend cuda -p 512 -n 128 -r 2 2>&1 | grep -E "pp512|tg128|route|rror"
  done
done
for v in 0 1; do
  echo "== Q6_PAD=$v batched"
  MUSER_CUDA_Q6_PAD=$v $M bench -m $HOME/full.gguf --backend cuda -p '' -n 64 -b 1,4,8 -r 2 2>&1 | grep -E "tg64|rows|x"
done
