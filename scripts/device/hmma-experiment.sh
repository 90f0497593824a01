#!/usr/bin/env bash
# Experiment (issue 5, docs/cuda.md Next steps): the f16 tensor-core decode matvec prototype
# (scripts/device/experiments/hmma_mv.cu: correctness against an f64 reference, nt = 1 vs 8 bit
# for bit, then µs and GB/s per matrix shape at 1/2/4/8 tokens), beside the engine's A8
# one-token kernels on the same shapes (`mvb_bench --a8`, from scripts/device/build-device.sh).
# Variants: base, -DMERGED=1 (issue-bound diagnostic), -DAHEAD=2 (deeper weight prefetch).
# Usage: [VARIANTS="base: ..."] [HMMA_SHAPES=N] [SKIP_MVB=1] [MMQ=1] bash scripts/device/hmma-experiment.sh OUTDIR   (~3 min)
set -uo pipefail
out=${1:?outdir}
NVCC=$(command -v nvcc || ls /usr/local/cuda*/bin/nvcc 2>/dev/null | head -1)
for v in ${VARIANTS:-base: merged:-DMERGED=1 ahead2:-DAHEAD=2}; do
  name=${v%%:*}; def=${v#*:}
  $NVCC -O3 -arch=sm_90a -Xptxas -v $def -o "$out/hmma_mv" scripts/device/experiments/hmma_mv.cu \
    > "$out/nvcc-$name.txt" 2>&1 || { tail -30 "$out/nvcc-$name.txt"; exit 1; }
  echo "== $name ($def): $(grep -E "registers" "$out/nvcc-$name.txt" | head -3 | sed 's/.*Used//' | tr '\n' ' ')"
  # base: every shape; the variants: FFN gate/up and down only (HMMA_SHAPES=2)
  [ $name = base ] && n=${HMMA_SHAPES:-6} || n=2
  HMMA_SHAPES=$n timeout 300 "$out/hmma_mv" > "$out/hmma-$name.txt" 2>&1; echo "hmma_mv rc=$?"
  rm -f "$out/hmma_mv"
  grep -E "streaming|d2d|check|nt=1|nt=4|nt=8|prefill|passed|FAILED" "$out/hmma-$name.txt"
done
if [ -n "${MMQ:-}" ]; then
  echo "== mmq_bench --a8 (the engine's prefill kernels, 512 tokens)"
  timeout 120 .device/mmq_bench --a8 > "$out/mmq-a8.txt" 2>&1; echo "mmq_bench rc=$?"
  head -30 "$out/mmq-a8.txt"
fi
[ -n "${SKIP_MVB:-}" ] && exit 0
echo "== mvb_bench --a8 (the engine's A8 kernels)"
timeout 120 .device/mvb_bench --a8 > "$out/mvb-a8.txt" 2>&1; echo "mvb_bench rc=$?"
head -40 "$out/mvb-a8.txt"
