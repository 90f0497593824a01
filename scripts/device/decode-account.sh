#!/usr/bin/env bash
# Where a decode token's time goes, with warm caches as in the replayed graph: on the 4-layer
# full-width forge (the full model's shapes), the graph's tg64 (the token's wall time), then ncu
# per (kernel, grid) over 2 eager tokens twice — `--cache-control none` (L2 as the previous
# kernel left it: activations, norms and step parameters hit, as in the graph) and ncu's default
# `all` (every kernel starts from flushed caches: what scripts/device/decode-profile.sh reports).
# The difference says how much of a small kernel's ncu time is cold misses; the graph's token
# minus the warm kernels' sum is what launches and gaps cost (or PDL overlap saves).
# Carry .device/muser. ~3 min. Usage: bash scripts/device/decode-account.sh OUTDIR
set -uo pipefail
out=${1:?outdir}
log=$out/account.txt
source scripts/device/f4-ncu.sh
echo "== tg64 (graph)" >> "$log"
$M bench -m "$F" --backend cuda -p 0 -n 64 -r 2 2>&1 | grep -E "tg64|route" >> "$log"
MET=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size,sm__throughput.avg.pct_of_peak_sustained_elapsed
for cc in none all; do
  echo "== ncu decode (eager, 2 tokens, --cache-control $cc) per kernel and grid" >> "$log"
  MUSER_CUDA_GRAPH=0 timeout 200 $NCU --clock-control none --cache-control $cc --metrics $MET \
    --csv --print-units base $M bench -m "$F" --backend cuda -p 0 -n 2 -r 0 2>/dev/null \
    | python3 scripts/device/ncu-summary.py --by-grid >> "$log" 2>&1
done
cat "$log"
