#!/usr/bin/env bash
# Experiment (issue 5, docs/cuda-f16.md, Next item 1): Hopper warpgroup MMA for the
# f16 prefill tiles — bit identity against mma.sync on the same chains, and FFN gate / up's speed
# at 512 tokens (scripts/device/experiments/wgmma_tile.cu's header). Needs nvcc on the device.
# VARIANTS: name:defines (commas for spaces), e.g. "wg2:-DWG=2 wg3:-DWG=3 r2:-DWG=2,-DRING2=2".
# Usage: [VARIANTS=...] bash scripts/device/wgmma-experiment.sh OUTDIR   (~20 s per variant)
set -uo pipefail
out=${1:?outdir}
NVCC=$(command -v nvcc || ls /usr/local/cuda*/bin/nvcc 2>/dev/null | head -1)
for v in ${VARIANTS:-wg2:-DWG=2}; do
  name=${v%%:*}; defs=${v#*:}; defs=${defs//,/ }
  $NVCC -O3 -gencode arch=compute_90a,code=sm_90a -Xptxas -v $defs -o "$out/wgmma_tile" \
    scripts/device/experiments/wgmma_tile.cu > "$out/nvcc-$name.txt" 2>&1 \
    || { tail -30 "$out/nvcc-$name.txt"; exit 1; }
  echo "== $name ($defs): $(grep -E "registers" "$out/nvcc-$name.txt" | sed 's/.*Used//' | tr '\n' ' ')"
  grep -i "wgmma" "$out/nvcc-$name.txt" | head -3
  timeout 120 "$out/wgmma_tile" > "$out/wgmma-$name.txt" 2>&1; echo "wgmma_tile rc=$?"
  grep -vE "swap|swapped" "$out/wgmma-$name.txt"
  rm -f "$out/wgmma_tile"
done
