#!/usr/bin/env bash
# Issue 4 measurements on the GPU machine, one call: CUDA parity (tiny, small) against llama.cpp
# CUDA, then forged full-size Muse Glimmer (generated here) benchmarked side by side.
# Needs carried: .device/muser, .devllama/llama-cuda-sm90.tar.xz.part0*, .devllama/bindings.
# Usage: scripts/device/cuda-issue4.sh OUTDIR [parity|bench|all]
set -uo pipefail
OUT=${1:?outdir}; WHAT=${2:-all}
M=$PWD/.device/muser
mkdir -p $HOME/llama $OUT/receipts
[ -f $HOME/llama/llama-bench ] || cat .devllama/llama-cuda-sm90.tar.xz.part0* | xz -d | tar x -C $HOME/llama
[ -d $HOME/llama/llama-bench ] || true
L=$HOME/llama; [ -f $L/llama-bench ] || L=$(dirname $(find $HOME/llama -name llama-bench | head -1))
export LD_LIBRARY_PATH=$L
FULL=$HOME/full.gguf
if [ "$WHAT" != parity ] && [ ! -f $FULL ]; then
  ( /usr/bin/time -v $M forge --preset full --seed 7 -o $FULL > $OUT/forge-full.log 2>&1 ) &
  FORGE=$!
fi
if [ "$WHAT" != bench ]; then
  PYTHONUNBUFFERED=1 python3 scripts/parity.py --class cuda --fixtures ${FIXTURES:-tiny,small} --muser $M \
    --threads 16 --work $HOME/parity --llama-cuda $L --bindings $PWD/.devllama/bindings \
    ${GEMMA:+--gemma $GEMMA} --out-dir $OUT/receipts 2>&1 | tee $OUT/parity.log
fi
if [ "$WHAT" != parity ]; then
  [ -n "${FORGE:-}" ] && wait $FORGE
  tail -3 $OUT/forge-full.log 2>/dev/null
  PYTHONUNBUFFERED=1 MUSER_COMMIT=${MUSER_COMMIT:-unknown} python3 scripts/bench-cuda.py --model $FULL \
    --muser $M --llama-cuda $L --pp ${PP:-512} --tg ${TG:-128} --reps ${REPS:-3} \
    --out $OUT/receipts/bench-cuda-full.json 2>&1 | tee $OUT/bench.log
fi
