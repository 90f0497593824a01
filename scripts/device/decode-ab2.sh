#!/usr/bin/env bash
# One device call for the one-token decode A/Bs of branch wip/q6-pad: the Q6_K aligned repack
# (`MUSER_CUDA_Q6_PAD=1`) and two units ahead in registers (`MUSER_CUDA_MVA_AHEAD=2` for Q4_K,
# `MUSER_CUDA_MVA_AHEAD_Q6P=2` for Q6_K-P). Per variant: bit-identity (the `kernels` a16 test:
# every one-token kernel, the Q6_K-P ones included, against the eight-token kernel), the
# per-layer and per-matrix kernel times (`mvb_bench`); then `cuda_route` with everything on,
# then tg128 per variant on the full-size forge (after `scripts/device/cuda-setup.sh`).
# Usage: bash scripts/device/decode-ab2.sh   (~6 min; ROUTE=0 skips cuda_route, TG=0 tg128)
set -uo pipefail
M=.device/muser
VARIANTS=${VARIANTS:-"MUSER_CUDA_MVA_AHEAD=1 MUSER_CUDA_Q6_PAD=1 MUSER_CUDA_MVA_AHEAD=2 MUSER_CUDA_Q6_PAD=1,MUSER_CUDA_MVA_AHEAD_Q6P=2 MUSER_CUDA_Q6_PAD=1,MUSER_CUDA_MVA_AHEAD=2,MUSER_CUDA_MVA_AHEAD_Q6P=2"}
for v in $VARIANTS; do
  e=${v//,/ }
  echo "== $e"
  env $e timeout 120 .device/tests/kernels --test-threads 1 a16_matvec 2>&1 | grep -E "result|panick|differ"
  flag=""; case "$e" in *Q6_PAD=1*) flag=--q6pad;; esac
  env $e timeout 90 .device/mvb_bench $flag 2>&1 | grep -E "^nt 1:|^  "
done
if [ "${ROUTE:-1}" = 1 ]; then
  echo "== cuda_route, everything on"
  MUSER_CUDA_MVA_AHEAD=2 MUSER_CUDA_MVA_AHEAD_Q6P=2 MUSER_CUDA_DEADLINE_S=60 timeout 200 \
    .device/tests/cuda_route --test-threads 1 2>&1 | grep -E "result|panick"
fi
[ "${TG:-1}" = 1 ] || exit 0
while [ ! -f $HOME/forge.done ]; do sleep 2; done
for v in $VARIANTS; do
  e=${v//,/ }
  echo "== tg128 $e"
  env $e $M bench -m $HOME/full.gguf --backend cuda -p 0 -n 128 -r 2 2>&1 | grep -E "tg128"
done
