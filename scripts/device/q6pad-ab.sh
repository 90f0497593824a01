#!/usr/bin/env bash
# One device call for the Q6_K aligned-repack A/B (`MUSER_CUDA_Q6_PAD`, branch wip/q6-pad):
# bit-identity (the `kernels` a16 test runs the Q6_K-P kernels against the Q6_K ones at every K;
# `cuda_route` has Q6_K-P variants), per-matrix kernel times (`mvb_bench` with and without
# `--q6pad`), tg128 alternating on the full-size forge (after `scripts/device/cuda-setup.sh`).
# Usage: bash scripts/device/q6pad-ab.sh   (~5 min)
set -uo pipefail
M=.device/muser
echo "== kernels a16"
timeout 150 .device/tests/kernels --test-threads 1 a16_matvec 2>&1 | grep -E "result|panick|differ"
echo "== cuda_route"
MUSER_CUDA_DEADLINE_S=60 timeout 200 .device/tests/cuda_route --test-threads 1 2>&1 | grep -E "result|panick|aligned"
for a in "" --q6pad; do
  echo "== mvb_bench $a"
  timeout 90 .device/mvb_bench $a 2>&1 | grep -E "^nt 1:|^  "
done
while [ ! -f $HOME/forge.done ]; do sleep 2; done
for i in 1 2; do
  for p in 0 1; do
    echo "== tg128 MUSER_CUDA_Q6_PAD=$p"
    MUSER_CUDA_Q6_PAD=$p $M bench -m $HOME/full.gguf --backend cuda -p 0 -n 128 -r 2 2>&1 | grep -E "tg128|^route"
  done
done
