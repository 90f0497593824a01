#!/usr/bin/env bash
# The A8 route's coverage on the H200 (built by scripts/device/build-device.sh; the full-size
# forge from scripts/device/cuda-setup.sh): the CUDA tests (every binary of .device/tests:
# kernels_a8 checks the plain Q5_K / Q8_0 / Q5_0 kernels and the packed A8 rows bit for bit,
# cuda_batched the A8 batched decode, cuda_route the plain formats end to end); `mvb_bench` packed rows
# A16 (packed and tensor-core) vs A8 at 1 / 2 / 4 / 8 rows; then end to end, alternating A16 and
# A8: batched decode at 1 / 2 / 4 / 8 rows and pp512 / tg128; the double-buffered prefill staging
# (MUSER_CUDA_MMQ_DB=1): mmq_bench, the mmq bit-identity tests and pp512.
# Usage: bash scripts/device/a8-ab.sh OUTDIR   (TESTS=0 skips the tests, KB=0 the kernel
# benchmarks, E2E=0 the end to end; REPS end-to-end repetitions, default 2). Then gemma A8
# parity: scripts/device/gemma-parts.sh's calls, and
#   MUSER_CUDA_ACTS=a8 FIXTURES=gemma GEMMA=$HOME/gemma.gguf scripts/device/cuda-issue4.sh $OUT parity
set -uo pipefail
out=${1:?outdir}
M=.device/muser
if [ "${TESTS:-1}" = 1 ]; then
  MUSER_CUDA_DEADLINE_S=120 timeout 520 bash scripts/device/cuda-tests.sh > "$out/tests.txt" 2>&1
  echo "tests rc=$?"
  grep -E "^== |test result|panicked|FAILED|differ|A8 \(" "$out/tests.txt" | head -40
fi
if [ "${KB:-1}" = 1 ]; then
  for f in "--q6pad" "--mmv --q6pad" "--a8" "--a8 --mmv"; do
    echo "== mvb_bench $f"
    timeout 150 .device/mvb_bench $f 2>&1 | grep -E "^nt |panicked"
  done
  # Double-buffered prefill staging (MUSER_CUDA_MMQ_DB): bit-identity (the mmq tests) and time.
  for db in 0 1; do
    echo "== MUSER_CUDA_MMQ_DB=$db"
    MUSER_CUDA_MMQ_DB=$db timeout 120 .device/mmq_bench --a8 2>&1 | grep -E "mmq|panicked"
  done
  MUSER_CUDA_MMQ_DB=1 MUSER_CUDA_DEADLINE_S=120 timeout 200 .device/tests/kernels --test-threads 1 mmq 2>&1 | grep -E "test |result|differ"
  MUSER_CUDA_MMQ_DB=1 MUSER_CUDA_DEADLINE_S=120 timeout 200 .device/tests/kernels_a8 --test-threads 1 mmq 2>&1 | grep -E "test |result|differ"
fi
[ "${E2E:-1}" = 1 ] || exit 0
# A fresh machine (the last one went back) has no forge: start it (and unpack llama.cpp).
if [ ! -f $HOME/forge.done ] && ! pgrep -f "forge --preset full" > /dev/null; then
  bash scripts/device/cuda-setup.sh > /dev/null 2>&1
fi
while [ ! -f $HOME/forge.done ]; do sleep 2; done
for rep in $(seq 1 ${REPS:-2}); do
  for v in a16 a8; do
    echo "== MUSER_CUDA_ACTS=$v (rep $rep)"
    MUSER_CUDA_ACTS=$v $M bench -m $HOME/full.gguf --backend cuda -p 512 -n 128 -r 2 2>&1 | grep -E "pp512|tg128|route|rror"
    MUSER_CUDA_ACTS=$v $M bench -m $HOME/full.gguf --backend cuda -p 0 -n 64 -b 1,2,4,8 -r 2 2>&1 | grep -E "x[1248]|seqs|rror"
    echo "== MUSER_CUDA_ACTS=$v MUSER_CUDA_MMQ_DB=1 (rep $rep)"
    MUSER_CUDA_ACTS=$v MUSER_CUDA_MMQ_DB=1 $M bench -m $HOME/full.gguf --backend cuda -p 512 -n 0 -r 2 2>&1 | grep -E "pp512|route|rror"
  done
done
