#!/usr/bin/env bash
# One call for issue 4's receipts: parity (tiny, small, gemma) vs llama.cpp CUDA, optional decode
# A/B settings, the side-by-side benchmark on the full-size forge, and CUDA vs the f64 oracle on
# the full model at a few positions. Outputs (<= 8 files): receipts/*.json, *.log.
# Route switches picked by scripts/device/cuda-ab.sh ($HOME/best.env) apply to every run here.
# Gemma: $HOME/gemma.gguf (joined from the parts of scripts/device/gemma-parts.sh).
# SKIP_PARITY=1 / SKIP_BENCH=1 split it over two calls; PP, DEPTH, BATCH (e.g. 1,2,4,8) choose the
# benchmark's tests.
set -uo pipefail
export MUSER_COMMIT=${MUSER_COMMIT:-unknown}  # the device copy's git HEAD can be stale: say which commit was built
OUT=${1:?outdir}
M=$PWD/.device/muser
mkdir -p $HOME/llama $OUT/receipts
[ -f $HOME/llama/llama-bench ] || cat .devllama/llama-cuda-sm90.tar.xz.part0* | xz -d | tar x -C $HOME/llama
L=$HOME/llama; [ -f $L/llama-bench ] || L=$(dirname $(find $HOME/llama -name llama-bench | head -1))
export LD_LIBRARY_PATH=$L
FULL=$HOME/full.gguf
[ -f $HOME/best.env ] && source $HOME/best.env
env | grep ^MUSER_CUDA || true
# Detached (forge-bg.sh: survives a SKIP_BENCH call's end, so the next call finds the file).
bash scripts/device/forge-bg.sh $M
[ -n "${SKIP_PARITY:-}" ] || PYTHONUNBUFFERED=1 python3 scripts/parity.py --class cuda --fixtures ${FIXTURES:-tiny,small,gemma} --muser $M \
  --threads 16 --work $HOME/parity --llama-cuda $L --bindings $PWD/.devllama/bindings \
  --gemma $HOME/gemma.gguf --out-dir $OUT/receipts > $OUT/parity.log 2>&1
[ -n "${SKIP_PARITY:-}" ] || tail -12 $OUT/parity.log
[ -n "${SKIP_BENCH:-}" ] && exit 0
while [ ! -f $HOME/forge.done ]; do sleep 2; done
# A/B settings, e.g. AB="MUSER_CUDA_MVA_ROWS=2 MUSER_CUDA_MVA_ROWS=8" (each one tg128 run).
for ab in ${AB:-}; do
  echo "== $ab" >> $OUT/ab.log
  env $ab $M bench -m $FULL --backend cuda -p 0 -n 128 -r ${AB_REPS:-2} >> $OUT/ab.log 2>&1
done
[ -f $OUT/ab.log ] && grep -E "==|tg128|route" $OUT/ab.log
PYTHONUNBUFFERED=1 MUSER_COMMIT=${MUSER_COMMIT:-unknown} python3 scripts/bench-cuda.py --model $FULL \
  --model-sha256 8f7f1eaf590ce4fd4c7fd71274bbe60a72fbc4d76401252fbd2d5ba977ffe36b \
  --muser $M --llama-cuda $L --pp ${PP:-128,512} --tg 128 --depth ${DEPTH:-0} --reps 3 --batch "${BATCH:-}" --out $OUT/receipts/bench-cuda-full.json 2>&1 | tee $OUT/bench.log
[ -n "${SKIP_ORACLE:-}" ] && exit 0
$M tokenize -m $FULL -p "The capital of France is Paris, and the capital of" --ids > $HOME/ft.json
N=$(python3 -c "import json;print(len(json.load(open('$HOME/ft.json'))))")
$M eval -m $FULL --tokens $HOME/ft.json --route cuda --dump-logits $HOME/fc.f32 2>&1 | tail -1
timeout 300 $M eval -m $FULL --tokens $HOME/ft.json --route oracle -t 16 --dump-logits $HOME/fo.f32 2>&1 | tail -1 \
  && $M parity --oracle $HOME/fo.f32 --positions $N --route muser-cuda=$HOME/fc.f32 --json $OUT/receipts/full-oracle.json
