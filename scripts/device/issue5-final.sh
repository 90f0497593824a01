#!/usr/bin/env bash
# Issue 5's closing measurements at one commit, in two calls on one warm machine:
#   PART=1: parity of the CUDA route against llama.cpp CUDA and the f64 oracle on tiny and small
#           (scripts/parity.py: the accuracy and determinism gates; gemma needs its parts first:
#           gemma-parts.sh), the device tests sessions 44–45 never ran (pending-tests.sh), the tiny
#           logits at chunk 512 and 1 (the defaults' sha since session 29: 42813e6170d8a91f);
#           the full forge starts detached meanwhile.
#           Carry .device/muser, .devllama (with bindings/: parity-bindings.sh),
#           .device/tests/muser_cuda, .device/tests/cuda_route.
#   PART=2: the side by side on the full forge (cuda-final.sh: pp128, pp512, decode at 0 / 2048 /
#           8192 / 32768, 1 / 2 / 4 / 8 rows). Carry .device/muser, .devllama.
# ROUTE_ENV (optional, e.g. "MUSER_CUDA_MVH_ACC2=3 MUSER_CUDA_MVH_ACC2_TIMING=1" after
# acc2-route.sh found that mode's bits consistent and a net gain): f16-route switches for the
# parity, the tiny logits and the side by side, so their receipts measure that route (the route
# ids name it); give it to both parts. Not for pending-tests.sh (its A8 cases would refuse them).
# Usage: MUSER_COMMIT=<sha> PART=1|2 [ROUTE_ENV=...] bash scripts/device/issue5-final.sh OUTDIR
set -uo pipefail
out=${1:?outdir}
export MUSER_COMMIT=${MUSER_COMMIT:?say which commit the binaries are}
route_env=${ROUTE_ENV:-}
echo "ROUTE_ENV: ${route_env:-none}"
case ${PART:?1 or 2} in
  1)
    bash scripts/device/forge-bg.sh
    env $route_env FIXTURES=${FIXTURES:-tiny,small} SKIP_BENCH=1 \
      bash scripts/device/cuda-final.sh "$out"
    bash scripts/device/pending-tests.sh "$out"
    source scripts/device/ab-lib.sh
    ab_tiny_logits "$out/tiny-logits.txt" "$out" "$route_env"
    cat "$out/tiny-logits.txt"
    ;;
  2)
    env $route_env SKIP_PARITY=1 SKIP_ORACLE=1 PP=128,512 DEPTH=0,2048,8192,32768 BATCH=1,2,4,8 \
      bash scripts/device/cuda-final.sh "$out"
    tail -3 "$HOME/forge.log"
    ;;
  *) echo "PART must be 1 or 2" >&2; exit 2 ;;
esac
